/* SPDX-License-Identifier: MIT */
/* See uffd_fault_shim.h. */
#undef _FORTIFY_SOURCE /* poll() must be a plain declaration here */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "uffd_fault_shim.h"

int shim_uffd_poll_errno;
int shim_uffd_polls_failed;
size_t shim_uffd_register_max;
int shim_uffd_registers_refused;

static int is_userfaultfd(int fd)
{
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	return strstr(link, "userfaultfd") != NULL;
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	static int (*real)(struct pollfd *, nfds_t, int);
	if (!real)
		real = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
	int err = __atomic_load_n(&shim_uffd_poll_errno, __ATOMIC_ACQUIRE);
	if (err && n > 0 && is_userfaultfd(fds[0].fd)) {
		__atomic_fetch_add(&shim_uffd_polls_failed, 1, __ATOMIC_RELEASE);
		errno = err;
		return -1;
	}
	return real(fds, n, timeout);
}

int ioctl(int fd, unsigned long request, ...)
{
	static int (*real)(int, unsigned long, ...);
	if (!real)
		real = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	size_t max = __atomic_load_n(&shim_uffd_register_max, __ATOMIC_ACQUIRE);
	if (max && request == UFFDIO_REGISTER && ((const struct uffdio_register *)arg)->range.len > max) {
		__atomic_fetch_add(&shim_uffd_registers_refused, 1, __ATOMIC_RELEASE);
		errno = EBUSY;
		return -1;
	}
	return real(fd, request, arg);
}
