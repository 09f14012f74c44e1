/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg C API: error codes, versions, the kernel module handshake.
 *
 * Stable ABI for collective libraries: opaque handles, fixed-width fields,
 * int return codes (0 or a negative HMEMREG_E* value), no C++ types and no
 * exceptions across this boundary. hmemreg_strerror() turns a code into text.
 */
#ifndef HMEMREG_COMMON_H
#define HMEMREG_COMMON_H

#include <stdint.h>

#include <hmemreg/version.h> /* HMEMREG_VERSION_MAJOR, _MINOR, _PATCH, _STRING */

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes: always returned negated (e.g. -HMEMREG_EINVAL). */
enum hmemreg_error {
	HMEMREG_OK = 0,
	HMEMREG_EINVAL = 1,   /* bad argument (null, zero length, overflow, ...) */
	HMEMREG_ENOMEM = 2,   /* out of memory */
	HMEMREG_ENODEV = 3,   /* hmemreg.ko not loaded / device absent */
	HMEMREG_EACCES = 4,   /* no permission on /dev/hmemreg */
	HMEMREG_EABI = 5,     /* module speaks an incompatible ABI */
	HMEMREG_ESYS = 6,     /* a system call failed; errno is preserved */
	HMEMREG_ENOTSUP = 7,  /* operation not supported on this memory/provider */
	HMEMREG_ENOENT = 8,   /* no such entry/handle */
	HMEMREG_EBUSY = 9,    /* object in use */
	HMEMREG_EFABRIC = 10, /* libfabric call failed */
	HMEMREG_EAGAIN = 11,  /* try again later */
	HMEMREG_ESTALE = 12,  /* handle refers to invalidated memory */
	HMEMREG_ERROR_MAX
};

/* Text for a code (either sign). Never NULL. */
const char *hmemreg_strerror(int code);

/* Library version as major << 16 | minor. */
uint32_t hmemreg_library_version(void);

/* What the loaded kernel module reports (HMEMREG_IOC_VERSION). */
struct hmemreg_kmod_info {
	uint32_t abi_major;
	uint32_t abi_minor;
	uint64_t caps;
};

/*
 * Query /dev/hmemreg. Returns 0, -HMEMREG_ENODEV (not loaded), -HMEMREG_EACCES
 * (permission), -HMEMREG_EABI (incompatible major) or -HMEMREG_ESYS.
 */
int hmemreg_kmod_query(struct hmemreg_kmod_info *info);

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_COMMON_H */
