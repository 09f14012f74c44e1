// SPDX-License-Identifier: GPL-2.0
/*
 * fail_nth_load: load a module once per allocation point of its loading and
 * init, failing exactly that allocation (the kernel's /proc/thread-self/fail-nth),
 * and check each attempt either loads a module that unloads again or fails
 * with nothing of it left. KASAN, kmemleak and lockdep (debug kernel) judge
 * the unwinding; this checks the outcome.
 *
 *   fail_nth_load MODULE.ko NAME [MAX_ATTEMPTS [PARAMS]]
 *
 * Attempts go from the last allocation point backwards, so the module's own
 * init (which runs after the loader's work) is covered first. Exit 0: every
 * attempt behaved, 1: one did not, 2: usage or setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int nth_fd = -1;
static const char *params = "";

static void set_nth(long n)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "%ld", n);

	if (pwrite(nth_fd, buf, len, 0) != len) {
		perror("fail_nth_load: write fail-nth");
		exit(2);
	}
}

/* Calls left before the armed failure (0: it fired, or none armed). */
static long get_nth(void)
{
	char buf[32] = "";

	if (pread(nth_fd, buf, sizeof(buf) - 1, 0) <= 0) {
		perror("fail_nth_load: read fail-nth");
		exit(2);
	}
	return strtol(buf, NULL, 10);
}

static int loaded(const char *name)
{
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	return stat(path, &st) == 0;
}

/* One load with the n-th fault-injectable call failing (0: none). */
static int load(int ko, long n, long *left)
{
	int r, err;

	set_nth(n);
	r = syscall(SYS_finit_module, ko, params, 0);
	err = errno;
	*left = get_nth();
	set_nth(0);
	errno = err;
	return r;
}

static int unload(const char *name)
{
	return syscall(SYS_delete_module, name, O_NONBLOCK);
}

int main(int argc, char **argv)
{
	const long big = 1000000;
	long total, left, n, first, max = argc > 3 ? atol(argv[3]) : 0;
	int ko, bad = 0, failed = 0;
	const char *name;

	if (argc < 3) {
		fprintf(stderr, "usage: %s MODULE.ko NAME [MAX_ATTEMPTS [PARAMS]]\n", argv[0]);
		return 2;
	}
	name = argv[2];
	if (argc > 4)
		params = argv[4];
	ko = open(argv[1], O_RDONLY | O_CLOEXEC);
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (ko < 0 || nth_fd < 0) {
		perror("fail_nth_load: open (module, or fail-nth: needs CONFIG_FAULT_INJECTION)");
		return 2;
	}
	if (loaded(name)) {
		fprintf(stderr, "fail_nth_load: %s is already loaded\n", name);
		return 2;
	}
	/* Count the fault-injectable calls of one clean load. */
	if (load(ko, big, &left) != 0) {
		fprintf(stderr, "fail_nth_load: clean load failed: %s\n", strerror(errno));
		return 1;
	}
	total = big - left;
	if (unload(name) != 0) {
		fprintf(stderr, "fail_nth_load: unload failed: %s\n", strerror(errno));
		return 1;
	}
	first = max > 0 && max < total ? total - max + 1 : 1;
	printf("fail_nth_load: %s: %ld fault-injectable calls per load, trying %ld..%ld\n",
	       name, total, first, total);

	for (n = total; n >= first; n--) {
		int r = load(ko, n, &left);
		int err = errno;

		if (r == 0) {
			/* A failure the loader or init tolerated: must unload. */
			if (unload(name) != 0) {
				printf("call %ld failed, module loaded but does not unload: %s\n",
				       n, strerror(errno));
				bad++;
			}
		} else {
			failed++;
			if (loaded(name)) {
				printf("call %ld failed, load returned %s but %s stays loaded\n",
				       n, strerror(err), name);
				bad++;
				unload(name);
			}
			if (left != 0) {
				printf("call %ld: load failed (%s) without the injected fault\n",
				       n, strerror(err));
				bad++;
			}
		}
		if (bad > 5)
			break;
	}
	/* After all that, a clean load and unload still work. */
	if (load(ko, 0, &left) != 0 || unload(name) != 0) {
		printf("clean load/unload after the faults failed: %s\n", strerror(errno));
		bad++;
	}
	printf("fail_nth_load: %ld attempts, %d failed the load, %d misbehaved\n",
	       total - first + 1, failed, bad);
	return bad ? 1 : 0;
}
