// SPDX-License-Identifier: MIT
// stat_workload SECONDS: a process with two registration caches, both named
// "default" (the C API's name), for tests/host.d/12-mr-cache-stat.sh: cache
// A hits on every turn, cache B on every 16th, and B (max_entry_size 4 KiB)
// registers one 64 KiB buffer uncached (reason: limit). Prints "ready" once
// both are published, then works for SECONDS (or until SIGTERM) and exits
// cleanly, removing its stats block; killed (SIGKILL), it leaves it behind.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"

static char small[4096] __attribute__((aligned(4096)));
static char big[1 << 16] __attribute__((aligned(4096)));

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static struct hmemreg_cache *make(uint64_t max_entry_size)
{
	struct hmemreg_cache_config cfg;
	if (hmemreg_cache_config_init(&cfg))
		exit(1);
	cfg.monitor = HMEMREG_MONITOR_NONE;
	cfg.publish_stats = 1;
	cfg.max_entry_size = max_entry_size;
	struct hmemreg_cache *c = NULL;
	int rc = hmemreg_cache_create_memory(&cfg, &c);
	if (rc) {
		fprintf(stderr, "stat_workload: %s\n", hmemreg_strerror(rc));
		exit(1);
	}
	return c;
}

static int get_put(struct hmemreg_cache *c, void *p, size_t len)
{
	struct hmemreg_mr mr;
	int rc = hmemreg_mr_get(c, p, len, &mr);
	return rc ? rc : hmemreg_mr_put(c, &mr);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 0;
	if (seconds <= 0) {
		fprintf(stderr, "usage: stat_workload SECONDS\n");
		return 2;
	}
	signal(SIGTERM, on_term);
	struct hmemreg_cache *a = make(0), *b = make(4096);
	if (get_put(b, big, sizeof(big)))
		return 1;
	printf("ready\n");
	fflush(stdout);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long n = 0;; n++) {
		if (get_put(a, small, sizeof(small)) || (n % 16 == 0 && get_put(b, small, sizeof(small))))
			return 1;
		usleep(50);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds || stop)
			break;
	}
	hmemreg_cache_destroy(a);
	hmemreg_cache_destroy(b);
	return 0;
}
