// SPDX-License-Identifier: GPL-2.0
/*
 * LD_PRELOAD shim for the debug lane: makes an allocation fail inside some of
 * the ioctls a test program sends to hmemreg's devices (/dev/hmemreg*), using
 * the kernel's per-thread /proc/thread-self/fail-nth, so the suites walk the
 * module's error paths exactly where it allocates (x86_64 has no stack-trace
 * filter to aim failslab at a module). The suites' own verdicts do not count
 * under it; the kernel's detectors do (KASAN, kmemleak, lockdep).
 *
 * Env: HMEMREG_FAILNTH_EVERY (arm one ioctl in this many, default 3),
 * HMEMREG_FAILNTH_SPAN (fail the n-th allocation, n drawn from 1..SPAN,
 * default 8), HMEMREG_FAILNTH_LOG (append "armed A injected I" at exit).
 * Without fail-nth in the kernel, it changes nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

typedef int (*ioctl_fn)(int, unsigned long, ...);

static atomic_long armed, injected, calls;

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : def;
}

static int is_hmemreg_fd(int fd)
{
	char path[64], target[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return strncmp(target, "/dev/hmemreg", 12) == 0;
}

static int set_nth(int nth_fd, long n)
{
	char buf[24];
	int len = snprintf(buf, sizeof(buf), "%ld", n);

	return pwrite(nth_fd, buf, len, 0) == len ? 0 : -1;
}

static long get_nth(int nth_fd)
{
	char buf[24] = "";

	return pread(nth_fd, buf, sizeof(buf) - 1, 0) > 0 ? atol(buf) : -1;
}

int ioctl(int fd, unsigned long req, ...)
{
	static ioctl_fn real;
	va_list ap;
	void *arg;
	long n, left;
	int nth_fd, r, saved;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (ioctl_fn)dlsym(RTLD_NEXT, "ioctl");

	if (atomic_fetch_add(&calls, 1) % env_int("HMEMREG_FAILNTH_EVERY", 3) ||
	    !is_hmemreg_fd(fd))
		return real(fd, req, arg);
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (nth_fd < 0)
		return real(fd, req, arg);
	n = 1 + random() % env_int("HMEMREG_FAILNTH_SPAN", 8);
	if (set_nth(nth_fd, n) != 0) {
		close(nth_fd);
		return real(fd, req, arg);
	}
	r = real(fd, req, arg);
	saved = errno;
	left = get_nth(nth_fd);
	set_nth(nth_fd, 0);
	close(nth_fd);
	atomic_fetch_add(&armed, 1);
	if (left == 0)
		atomic_fetch_add(&injected, 1);
	errno = saved;
	return r;
}

__attribute__((destructor)) static void report(void)
{
	const char *log = getenv("HMEMREG_FAILNTH_LOG");
	FILE *f;

	if (!log || !atomic_load(&armed))
		return;
	f = fopen(log, "a");
	if (!f)
		return;
	fprintf(f, "armed %ld injected %ld\n", atomic_load(&armed), atomic_load(&injected));
	fclose(f);
}
