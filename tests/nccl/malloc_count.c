// SPDX-License-Identifier: MIT
// LD_PRELOAD counter of heap allocations (malloc, calloc, realloc,
// aligned allocations; operator new ends in malloc): at exit (or _exit) each
// process prints "malloc_count pid P: N allocations" on stderr. Run a workload
// twice with different message counts and divide the difference by the
// difference in messages to get allocations per message (hmemreg_bench
// nccl --iters N). Not for production: glibc's own entry points are called.
#include <stdatomic.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t a, size_t n);

static atomic_ullong allocations;

__attribute__((visibility("default"))) void *malloc(size_t n)
{
	atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
	return __libc_malloc(n);
}

__attribute__((visibility("default"))) void *calloc(size_t n, size_t m)
{
	atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
	return __libc_calloc(n, m);
}

__attribute__((visibility("default"))) void *realloc(void *p, size_t n)
{
	atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
	return __libc_realloc(p, n);
}

__attribute__((visibility("default"))) int posix_memalign(void **out, size_t a, size_t n)
{
	atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
	void *p = __libc_memalign(a, n);
	if (!p)
		return 12; // ENOMEM
	*out = p;
	return 0;
}

__attribute__((visibility("default"))) void *aligned_alloc(size_t a, size_t n)
{
	atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
	return __libc_memalign(a, n);
}

static void report(void)
{
	char line[96];
	int n = snprintf(line, sizeof(line), "malloc_count pid %ld: %llu allocations\n", (long)getpid(),
			 (unsigned long long)atomic_load(&allocations));
	if (n > 0)
		(void)!write(2, line, (size_t)n);
}

__attribute__((destructor)) static void at_exit(void)
{
	report();
}

// Forked workers often leave by _exit, which runs no destructor.
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
	report();
	for (;;)
		syscall(SYS_exit_group, status);
}
