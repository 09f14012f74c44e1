// SPDX-License-Identifier: MIT
// The C API of the cache: bad input, handles, configuration from the
// environment, fork semantics, and the shared-memory stats block.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/* Version 3 appends export rows: a version 2 block (shorter) is still read,
 * a version 3 block cut to the version 2 size is refused, a version from
 * the future too. */
Test(cache_api, stats_block_versions)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 1);
	size_t len;
	struct hmemreg_stats_block *b = map_block(getpid(), &len);
	cr_assert_not_null(b);
	cr_assert_eq(b->version, 3);
	cr_assert_eq(b->max_exports, HMEMREG_STATS_MAX_EXPORTS);
	cr_assert_eq(b->exports_unlisted, 0);
	cr_assert_eq(offsetof(struct hmemreg_stats_block, caches), 128, "version 2's fields keep their offsets");
	struct hmemreg_stats_block *copy = malloc(sizeof(*copy));
	cr_assert_not_null(copy);
	memcpy(copy, b, sizeof(*copy));
	cr_assert_eq(hmemreg_stats_block_check(copy, HMEMREG_STATS_BLOCK_SIZE_V2), -HMEMREG_EABI,
		     "version 3 needs its export rows");
	copy->version = 2;
	copy->block_size = HMEMREG_STATS_BLOCK_SIZE_V2;
	cr_assert_eq(hmemreg_stats_block_check(copy, HMEMREG_STATS_BLOCK_SIZE_V2), 0, "a version 2 block is read");
	copy->block_size = HMEMREG_STATS_BLOCK_SIZE_V2 - 8;
	cr_assert_eq(hmemreg_stats_block_check(copy, HMEMREG_STATS_BLOCK_SIZE_V2), -HMEMREG_EABI);
	copy->version = HMEMREG_STATS_VERSION + 1;
	copy->block_size = sizeof(*copy);
	cr_assert_eq(hmemreg_stats_block_check(copy, sizeof(*copy)), -HMEMREG_EABI, "a future version is refused");
	free(copy);
	munmap(b, len);
	hmemreg_cache_destroy(c);
}

Test(cache_api, stale_block_of_dead_process_is_detected)
{
	/* The child publishes its block and waits; we hold the block's lock so
	 * that no process's hmemreg_shm_gc() removes it once the child is dead
	 * (every process of libhmemreg runs one at its first stats block). */
	int go[2], ready[2];
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(pipe(ready), 0);
	pid_t pid = fork();
	if (pid == 0) {
		struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 1);
		(void)c;
		char x = 1;
		if (write(ready[1], &x, 1) != 1 || read(go[0], &x, 1) != 1)
			_exit(1);
		_exit(0); /* no cleanup, as if it crashed */
	}
	char x;
	cr_assert_eq(read(ready[0], &x, 1), 1);
	char name[64], path[80];
	snprintf(name, sizeof(name), HMEMREG_STATS_SHM_PREFIX "%d", (int)pid);
	snprintf(path, sizeof(path), "/dev/shm%s", name);
	int lock = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(lock >= 0 && flock(lock, LOCK_SH) == 0, "cannot lock %s", path);
	cr_assert_eq(write(go[1], &x, 1), 1);
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	size_t len;
	struct hmemreg_stats_block *b = map_block(pid, &len);
	cr_assert_not_null(b, "the dead child's block is left behind");
	cr_assert_eq(b->pid, pid);
	cr_assert_eq(hmemreg_stats_block_check(b, len), -HMEMREG_ESTALE);
	munmap(b, len);
	shm_unlink(name);
	close(lock);
}

/* A file of the kinds hmemreg_shm_gc() looks at, in dir. */
static void touch(const char *dir, const char *name, size_t size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert(fd >= 0, "%s", path);
	cr_assert_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

static int exists(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static pid_t dead_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return pid;
}

struct gc_seen {
	int files, removed, live, stale;
};

static void count_file(const struct hmemreg_shm_file *f, void *arg)
{
	struct gc_seen *s = arg;
	s->files++;
	s->removed += f->verdict == HMEMREG_SHM_REMOVED;
	s->live += f->verdict == HMEMREG_SHM_LIVE;
	s->stale += f->verdict == HMEMREG_SHM_STALE;
}

Test(cache_api, shm_gc_removes_files_of_dead_processes_only)
{
	char dir[] = "/tmp/hmemreg-gc-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char dead_block[64], dead_region[64], live_block[64], live_region[64], held_region[64];
	pid_t dead = dead_pid();
	snprintf(dead_block, sizeof(dead_block), "hmemreg-stats.%d", (int)dead);
	snprintf(dead_region, sizeof(dead_region), "hmemreg_%d_123", (int)dead);
	snprintf(live_block, sizeof(live_block), "hmemreg-stats.%d", (int)getpid());
	snprintf(live_region, sizeof(live_region), "hmemreg_%d_456", (int)getpid());
	snprintf(held_region, sizeof(held_region), "hmemreg_%d_789", (int)dead);
	touch(dir, dead_block, 4096); /* not even a block: goes by its pid */
	touch(dir, dead_region, 1 << 16);
	touch(dir, live_block, 16);
	touch(dir, live_region, 1 << 16);
	touch(dir, held_region, 4096); /* dead pid, but someone holds its lock */
	touch(dir, "hmemreg_x_1", 1);  /* not a name of ours */
	touch(dir, "unrelated", 1);
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, held_region);
	int lock = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(lock >= 0 && flock(lock, LOCK_SH) == 0);

	cr_assert_eq(hmemreg_shm_gc(dir, 0x8, NULL, NULL), -HMEMREG_EINVAL, "unknown flag");
	cr_assert_eq(hmemreg_shm_gc("/nonexistent-hmemreg", 0, NULL, NULL), -HMEMREG_ESYS);

	struct gc_seen dry = {0};
	cr_assert_eq(hmemreg_shm_gc(dir, HMEMREG_SHM_GC_DRY_RUN, count_file, &dry), 2);
	cr_assert_eq(dry.files, 5, "ours are five, got %d", dry.files);
	cr_assert_eq(dry.stale, 2);
	cr_assert_eq(dry.live, 3);
	cr_assert(exists(dir, dead_block) && exists(dir, dead_region), "a dry run removes nothing");

	struct gc_seen real = {0};
	cr_assert_eq(hmemreg_shm_gc(dir, 0, count_file, &real), 2);
	cr_assert_eq(real.removed, 2);
	cr_assert(!exists(dir, dead_block), "block of a dead pid removed");
	cr_assert(!exists(dir, dead_region), "region of a dead pid removed");
	cr_assert(exists(dir, live_block) && exists(dir, live_region), "files of a live pid kept");
	cr_assert(exists(dir, held_region), "a file whose lock is held is kept");
	cr_assert(exists(dir, "hmemreg_x_1") && exists(dir, "unrelated"), "other files untouched");
	close(lock);
	cr_assert_eq(hmemreg_shm_gc(dir, 0, NULL, NULL), 1, "released: the held one goes now");
	cr_assert(!exists(dir, held_region));

	const char *left[] = {live_block, live_region, "hmemreg_x_1", "unrelated"};
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, left[i]);
		unlink(path);
	}
	cr_assert_eq(rmdir(dir), 0);
}

Test(cache_api, library_holds_and_removes_its_own_block)
{
	/* A live process's block is locked: a gc (any process's) keeps it. */
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE, 1);
	char path[80];
	snprintf(path, sizeof(path), "/dev/shm" HMEMREG_STATS_SHM_PREFIX "%d", (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0, "no %s", path);
	cr_assert_neq(flock(fd, LOCK_EX | LOCK_NB), 0, "the library holds its block's lock");
	close(fd);
	hmemreg_cache_destroy(c);
	/* A fork child that exits normally removes its own block. */
	pid_t pid = fork();
	if (pid == 0) {
		struct hmemreg_cache *k = make(HMEMREG_MONITOR_NONE, 1);
		hmemreg_cache_destroy(k);
		exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(path, sizeof(path), "/dev/shm" HMEMREG_STATS_SHM_PREFIX "%d", (int)pid);
	cr_assert_neq(access(path, F_OK), 0, "%s left behind by a clean exit", path);
}
