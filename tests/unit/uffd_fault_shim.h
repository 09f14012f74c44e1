/* SPDX-License-Identifier: MIT */
/* Faults for the userfaultfd monitor, injected by definitions of poll() and
 * ioctl() in the test binary (they take the place of libc's for the library
 * linked into it and pass everything else through). */
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero: a poll() whose first descriptor is a userfaultfd fails with
 * this errno (the monitor thread's); polls_failed counts them. */
extern int shim_uffd_poll_errno;
extern int shim_uffd_polls_failed;
/* Non-zero: UFFDIO_REGISTER of more than this many bytes fails with EBUSY
 * (what the kernel answers for a range another userfaultfd holds);
 * registers_refused counts them. */
extern size_t shim_uffd_register_max;
extern int shim_uffd_registers_refused;

#ifdef __cplusplus
}
#endif
