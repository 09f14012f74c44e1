// SPDX-License-Identifier: MIT
// The C API of the cache: bad input, handles, configuration from the
// environment, fork semantics, and the shared-memory stats block.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include "hmemreg/hmemreg.h"

static struct hmemreg_cache *make(uint32_t monitor, int publish)
{
	struct hmemreg_cache_config cfg;
	cr_assert_eq(hmemreg_cache_config_init(&cfg), 0);
	cfg.monitor = monitor;
	cfg.publish_stats = publish;
	cfg.purge_on_fork = 0;
	strcpy(cfg.name, "api-test");
	struct hmemreg_cache *c = NULL;
	int rc = hmemreg_cache_create_memory(&cfg, &c);
	cr_assert_eq(rc, 0, "%s", hmemreg_strerror(rc));
	return c;
}

static char buf[1 << 16] __attribute__((aligned(4096)));

Test(cache_api, bad_input_gets_clear_errors)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 0);
	struct hmemreg_mr mr;
	cr_assert_eq(hmemreg_mr_get(NULL, buf, 10, &mr), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_mr_get(c, buf, 10, NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_mr_get(c, NULL, 10, &mr), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_mr_get(c, buf, 0, &mr), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_mr_get(c, (void *)(UINTPTR_MAX - 4), 16, &mr), -HMEMREG_EINVAL, "overflowing range");
	struct hmemreg_mr_request rq = {.size = sizeof(rq), .iface = HMEMREG_IFACE_MAX, .addr = buf, .len = 8, .dmabuf_fd = -1};
	cr_assert_eq(hmemreg_mr_get_req(c, &rq, &mr), -HMEMREG_EINVAL, "unknown iface");
	rq.iface = HMEMREG_IFACE_HOST;
	rq.size = 4;
	cr_assert_eq(hmemreg_mr_get_req(c, &rq, &mr), -HMEMREG_EINVAL, "short request struct");
	rq.size = sizeof(rq);
	rq.flags = 0x80;
	cr_assert_eq(hmemreg_mr_get_req(c, &rq, &mr), -HMEMREG_EINVAL, "unknown flag");
	cr_assert_eq(hmemreg_mr_put(c, NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_invalidate(c, HMEMREG_IFACE_HOST, buf, 0), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_invalidate(NULL, HMEMREG_IFACE_HOST, buf, 1), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_flush(NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_get_stats(c, NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_monitor(NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_destroy(NULL), 0);
	struct hmemreg_cache_config bad;
	hmemreg_cache_config_init(&bad);
	bad.size = 3;
	struct hmemreg_cache *x = NULL;
	cr_assert_eq(hmemreg_cache_create_memory(&bad, &x), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_create_memory(NULL, NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
}

Test(cache_api, create_fabric_rejects_what_is_not_a_domain)
{
	struct hmemreg_cache *c = (struct hmemreg_cache *)1;
	cr_assert_eq(hmemreg_cache_create_fabric(NULL, NULL, &c), -HMEMREG_EINVAL);
	cr_assert_null(c);
	struct fid_domain fake;
	memset(&fake, 0, sizeof(fake));
	fake.fid.fclass = FI_CLASS_EP; /* an unknown/wrong object */
	cr_assert_eq(hmemreg_cache_create_fabric(&fake, NULL, &c), -HMEMREG_EINVAL);
}

Test(cache_api, put_twice_and_destroy_while_held)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 0);
	struct hmemreg_mr mr;
	cr_assert_eq(hmemreg_mr_get(c, buf + 100, 10, &mr), 0);
	cr_assert(mr.flags & HMEMREG_MR_CACHED);
	cr_assert_leq(mr.start, (uint64_t)(uintptr_t)(buf + 100));
	cr_assert_geq(mr.end, (uint64_t)(uintptr_t)(buf + 110));
	cr_assert_eq(hmemreg_cache_destroy(c), -HMEMREG_EBUSY, "held registration");
	struct hmemreg_mr copy = mr;
	cr_assert_eq(hmemreg_mr_put(c, &mr), 0);
	cr_assert_null(mr.handle_);
	cr_assert_eq(hmemreg_mr_put(c, &mr), -HMEMREG_EINVAL, "second put");
	cr_assert_eq(hmemreg_mr_put(c, &copy), -HMEMREG_EINVAL, "copy of a released handle (entry still cached)");
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
}

Test(cache_api, environment_configures_the_cache)
{
	struct hmemreg_cache_config cfg;
	setenv("HMEMREG_MR_CACHE_MAX_COUNT", "7", 1);
	setenv("HMEMREG_MR_CACHE_MAX_SIZE", "64M", 1);
	setenv("HMEMREG_MR_CACHE_MAX_ENTRY_SIZE", "2k", 1);
	setenv("HMEMREG_MR_CACHE_MONITOR", "none", 1);
	setenv("HMEMREG_MR_CACHE_PURGE_ON_FORK", "0", 1);
	cr_assert_eq(hmemreg_cache_config_init(&cfg), 0);
	cr_assert_eq(cfg.max_count, 7);
	cr_assert_eq(cfg.max_size, 64ULL << 20);
	cr_assert_eq(cfg.max_entry_size, 2048);
	cr_assert_eq(cfg.monitor, HMEMREG_MONITOR_NONE);
	cr_assert_eq(cfg.purge_on_fork, 0);
	setenv("HMEMREG_MR_CACHE_MAX_COUNT", "lots", 1);
	cr_assert_eq(hmemreg_cache_config_init(&cfg), -HMEMREG_EINVAL);
	setenv("HMEMREG_MR_CACHE_MAX_COUNT", "5", 1);
	setenv("HMEMREG_MR_CACHE_MONITOR", "telepathy", 1);
	cr_assert_eq(hmemreg_cache_config_init(&cfg), -HMEMREG_EINVAL);
	setenv("HMEMREG_MR_CACHE_MONITOR", "uffd", 1);
	setenv("HMEMREG_MR_CACHE_MAX_SIZE", "5Q", 1);
	cr_assert_eq(hmemreg_cache_config_init(&cfg), -HMEMREG_EINVAL);
	/* NULL config = defaults + env, so a bad env fails creation clearly */
	struct hmemreg_cache *c = NULL;
	cr_assert_eq(hmemreg_cache_create_memory(NULL, &c), -HMEMREG_EINVAL);
	unsetenv("HMEMREG_MR_CACHE_MAX_SIZE");
	unsetenv("HMEMREG_MR_CACHE_MONITOR");
	unsetenv("HMEMREG_MR_CACHE_MAX_ENTRY_SIZE");
	unsetenv("HMEMREG_MR_CACHE_PURGE_ON_FORK");
	cr_assert_eq(hmemreg_cache_create_memory(NULL, &c), 0);
	struct hmemreg_mr mr[6];
	for (int i = 0; i < 6; i++)
		cr_assert_eq(hmemreg_mr_get(c, buf + i * 8192, 8, &mr[i]), 0);
	struct hmemreg_cache_stats st;
	hmemreg_cache_get_stats(c, &st);
	cr_assert_eq(st.entries, 5, "HMEMREG_MR_CACHE_MAX_COUNT=5 honoured");
	cr_assert_eq(st.uncached, 1);
	for (int i = 0; i < 6; i++)
		hmemreg_mr_put(c, &mr[i]);
	unsetenv("HMEMREG_MR_CACHE_MAX_COUNT");
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
}

Test(cache_api, provider_cache_is_disabled_at_load)
{
	/* libhmemreg's constructor ran before main(): the monitors of providers'
	 * registration caches are off, the count is not touched (a zero count
	 * makes every ofi_mr_cache_init() fail, shm's CUDA IPC cache included). */
	const char *v = getenv("FI_MR_CACHE_MONITOR");
	cr_assert_not_null(v);
	cr_assert_str_eq(v, "disabled");
	v = getenv("FI_MR_CUDA_CACHE_MONITOR_ENABLED");
	cr_assert_not_null(v);
	cr_assert_str_eq(v, "0");
	cr_assert_null(getenv("FI_MR_CACHE_MAX_COUNT"), "FI_MR_CACHE_MAX_COUNT must be left to the user");
}

Test(cache_api, fork_child_has_an_empty_cache)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 0);
	struct hmemreg_mr held, unused;
	cr_assert_eq(hmemreg_mr_get(c, buf, 8, &held), 0);
	cr_assert_eq(hmemreg_mr_get(c, buf + 8192, 8, &unused), 0);
	cr_assert_eq(hmemreg_mr_put(c, &unused), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int bad = 0;
		struct hmemreg_cache_stats st;
		hmemreg_cache_get_stats(c, &st);
		bad |= st.entries != 0 ? 1 : 0;
		bad |= hmemreg_mr_put(c, &held) != -HMEMREG_ESTALE ? 2 : 0;
		struct hmemreg_mr m;
		bad |= hmemreg_mr_get(c, buf, 8, &m) != 0 ? 4 : 0;
		bad |= (m.flags & HMEMREG_MR_CACHED) ? 8 : 0;
		bad |= hmemreg_mr_put(c, &m) != 0 ? 16 : 0;
		hmemreg_cache_get_stats(c, &st);
		bad |= st.entries != 0 ? 32 : 0;
		_exit(bad);
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child checks failed: mask %d", WEXITSTATUS(status));
	struct hmemreg_cache_stats st;
	hmemreg_cache_get_stats(c, &st);
	cr_assert_eq(st.entries, 2, "purge_on_fork off here: parent keeps its entries");
	cr_assert_eq(hmemreg_mr_put(c, &held), 0);
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
}

Test(cache_api, purge_on_fork_releases_unused_entries)
{
	struct hmemreg_cache_config cfg;
	hmemreg_cache_config_init(&cfg);
	cfg.monitor = HMEMREG_MONITOR_NONE;
	cfg.purge_on_fork = 1;
	cfg.publish_stats = 0;
	struct hmemreg_cache *c;
	cr_assert_eq(hmemreg_cache_create_memory(&cfg, &c), 0);
	struct hmemreg_mr held, unused;
	hmemreg_mr_get(c, buf, 8, &held);
	hmemreg_mr_get(c, buf + 8192, 8, &unused);
	hmemreg_mr_put(c, &unused);
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	struct hmemreg_cache_stats st;
	hmemreg_cache_get_stats(c, &st);
	cr_assert_eq(st.entries, 1, "the held entry stays");
	cr_assert_eq(st.invalidations[HMEMREG_INVAL_FORK], 1);
	hmemreg_mr_put(c, &held);
	hmemreg_cache_destroy(c);
}

static struct hmemreg_stats_block *map_block(pid_t pid, size_t *len)
{
	char name[64];
	snprintf(name, sizeof(name), HMEMREG_STATS_SHM_PREFIX "%d", (int)pid);
	int fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return NULL;
	*len = sizeof(struct hmemreg_stats_block);
	void *p = mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

Test(cache_api, stats_block_is_readable_from_outside)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 1);
	struct hmemreg_mr mr;
	hmemreg_mr_get(c, buf, 8, &mr);
	hmemreg_mr_put(c, &mr);
	hmemreg_mr_get(c, buf, 8, &mr);
	hmemreg_mr_put(c, &mr);
	size_t len;
	struct hmemreg_stats_block *b = map_block(getpid(), &len);
	cr_assert_not_null(b, "no /dev/shm/hmemreg-stats.<pid>");
	cr_assert_eq(hmemreg_stats_block_check(b, len), 0);
	cr_assert_eq(b->pid, getpid());
	const struct hmemreg_stats_cache *slot = NULL;
	for (unsigned i = 0; i < b->max_caches; i++)
		if (b->caches[i].state == 1 && !strcmp(b->caches[i].name, "api-test"))
			slot = &b->caches[i];
	cr_assert_not_null(slot);
	struct hmemreg_cache_stats st;
	hmemreg_stats_sum(slot, &st);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.misses, 1);
	cr_assert_eq(st.entries, 1);
	cr_assert_str_eq(st.monitor, "none");
	cr_assert_str_eq(st.registrar, "memory");
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
	cr_assert_eq(slot->state, 0, "slot freed at destroy");
	cr_assert_eq(hmemreg_stats_block_check(NULL, 0), -HMEMREG_EINVAL);
	munmap(b, len);
}

Test(cache_api, stale_block_of_dead_process_is_detected)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 1);
		(void)c;
		_exit(0); /* no cleanup, as if it crashed */
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	size_t len;
	struct hmemreg_stats_block *b = map_block(pid, &len);
	cr_assert_not_null(b, "the dead child's block is left behind");
	cr_assert_eq(b->pid, pid);
	cr_assert_eq(hmemreg_stats_block_check(b, len), -HMEMREG_ESTALE);
	munmap(b, len);
	char name[64];
	snprintf(name, sizeof(name), HMEMREG_STATS_SHM_PREFIX "%d", (int)pid);
	shm_unlink(name);
}
