/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg: the per-process statistics block of the registration cache.
 *
 * Every process that creates a cache publishes its counters, live, in one
 * shared-memory file: /dev/shm/hmemreg-stats.<pid> (shm_open name
 * "/hmemreg-stats.<pid>"). A reader (mr_cache_stat) maps it read-only and
 * reads it while the process runs; nothing in the process waits for it.
 *
 * Layout rules: fixed-width fields, 64-bit counters naturally aligned (so a
 * plain 64-bit load never tears), append-only: a reader accepts a block
 * whose version it knows and ignores a larger @block_size tail. Counters
 * are updated with relaxed atomic operations; a snapshot is therefore
 * consistent per field, not across fields.
 *
 * Stale blocks: a process that dies without cleaning up leaves its file.
 * hmemreg_stats_block_check() tells a live block from a stale one by
 * comparing @pid and @start_time with /proc/<pid>/stat (field 22, the
 * process start time in clock ticks since boot) and @boot_id with
 * /proc/sys/kernel/random/boot_id: a recycled pid or a reboot never passes.
 */
#ifndef HMEMREG_STATS_H
#define HMEMREG_STATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HMEMREG_STATS_MAGIC 0x54415453524d4846ULL /* "FHMRSTAT" little endian */
/* 2: uncached_by[] (was reserved); a reader accepts 1 (reads zeros there) and 2 */
/* 3: exports[] appended after caches[] (earlier fields keep their offsets);
 * a reader of 2 refuses a 3 block (-HMEMREG_EABI), a reader of 3 reads
 * blocks 1 and 2 as having no export rows */
#define HMEMREG_STATS_VERSION 3
#define HMEMREG_STATS_VERSION_MIN 1
#define HMEMREG_STATS_VERSION_EXPORTS 3
#define HMEMREG_STATS_MAX_EXPORTS 64
#define HMEMREG_STATS_SHM_PREFIX "/hmemreg-stats."
#define HMEMREG_STATS_MAX_CACHES 16
#define HMEMREG_STATS_HIT_SHARDS 32
#define HMEMREG_STATS_REG_HIST_BUCKETS 40

/* Why entries left the cache: index of hmemreg_stats_cache.invalidations[]. */
enum hmemreg_inval_cause {
	HMEMREG_INVAL_UNMAP = 0,    /* munmap/brk shrink seen by a monitor */
	HMEMREG_INVAL_CLEAR = 1,    /* pages zapped: MADV_DONTNEED/REMOVE, reclaim */
	HMEMREG_INVAL_REMAP = 2,    /* mremap moved the range */
	HMEMREG_INVAL_EXPLICIT = 3, /* hmemreg_cache_invalidate() */
	HMEMREG_INVAL_STALE = 4,    /* found stale on a hit (generation word, buffer id) */
	HMEMREG_INVAL_OVERFLOW = 5, /* monitor lost events: whole cache revalidated */
	HMEMREG_INVAL_REPLACED = 6, /* a larger registration took its place */
	HMEMREG_INVAL_FORK = 7,     /* purged before fork() */
	HMEMREG_INVAL_OTHER = 8,
	HMEMREG_INVAL_MAX = 9
};

/* Why a registration was handed out uncached: index of uncached_by[]. */
enum hmemreg_uncached_reason {
	HMEMREG_UNCACHED_LIMIT = 0,       /* over a size limit, max_count 0, or every entry in use */
	HMEMREG_UNCACHED_UNWATCHABLE = 1, /* its memory can change unseen by the monitor
					     (uffd: shared or file-backed mappings) */
	HMEMREG_UNCACHED_REFUSED = 2,     /* the monitor cannot watch it (none usable, device
					     memory without a device monitor, uffd refused) */
	HMEMREG_UNCACHED_RACED = 3,       /* its memory changed while it was being registered */
	HMEMREG_UNCACHED_ASKED = 4,       /* HMEMREG_MR_NO_CACHE, or in a fork child */
	HMEMREG_UNCACHED_MAX = 5
};

/*
 * One cache's slot. @state is written last on creation (1 = live) and first
 * on destruction (0 = free); a reader skips slots whose state is not 1.
 */
struct hmemreg_stats_cache {
	uint32_t state;
	uint32_t id;            /* unique per process, never reused */
	char name[32];          /* hmemreg_cache_config.name, NUL terminated */
	char monitor[16];       /* "kmod", "uffd", "none", "unavailable" */
	char registrar[24];     /* "libfabric:tcp", "memory", ... */
	uint64_t max_count;     /* configured limits */
	uint64_t max_size;
	uint64_t max_entry_size;
	/* gauges (current values) */
	uint64_t entries;       /* cached registrations */
	uint64_t bytes;         /* bytes they cover */
	uint64_t uncached;      /* live registrations outside the index (orphans, uncached) */
	uint64_t uncached_bytes;
	uint64_t dead;          /* invalidated, waiting to be deregistered */
	uint64_t dead_bytes;
	/* counters (monotonic) */
	uint64_t misses;        /* gets that registered */
	uint64_t registrations; /* successful registrar calls */
	uint64_t registration_ns; /* total time spent in them */
	uint64_t registration_failures;
	uint64_t deregistrations;
	uint64_t uncached_registrations; /* returned uncached (limits, in use, unwatchable) */
	uint64_t evictions;     /* LRU evictions to honour the limits */
	uint64_t monitor_events; /* events received from the monitor */
	uint64_t races;         /* lost insert races (duplicate dropped) */
	uint64_t invalidations[HMEMREG_INVAL_MAX];
	char count_fence[16];   /* how counts are ordered: "membarrier" or "seq_cst" */
	uint64_t uncached_by[HMEMREG_UNCACHED_MAX]; /* uncached_registrations by reason (version 2) */
	uint64_t reserved[1];
	/* registrations by duration: bucket i counts those that took
	 * [2^i, 2^(i+1)) ns (the last bucket also takes anything longer);
	 * mr_cache_stat derives the p99 from it */
	uint64_t registration_hist[HMEMREG_STATS_REG_HIST_BUCKETS];
	/* (version 3, in what was padding before hits[]: a writer that predates
	 * them leaves zeros) */
	uint64_t monitor_failures;  /* 1 once the cache's monitor stopped on an error: it
				       dropped every entry then and caches nothing since */
	uint64_t monitor_fallbacks; /* misses whose range alone was registered with the
				       userfaultfd (its mapping refused whole registration) */
	/* hits: summed over shards (each on its own cache line: hits[8 * i]) */
	uint64_t hits[8 * HMEMREG_STATS_HIT_SHARDS] __attribute__((aligned(64)));
};

/*
 * One hmemreg.ko export that one cache holds registrations of (version 3):
 * written by the library when an entry of the export is registered and when
 * it is released, never on a hit. @seq is odd while the row is being
 * written; a reader copies the row between two equal even loads of @seq.
 * A row with @entries 0 is free.
 */
struct hmemreg_stats_export {
	uint64_t seq;
	uint32_t cache_id;      /* hmemreg_stats_cache.id of the cache */
	uint32_t reserved;
	uint64_t export_id;     /* the ledger's export id (mr_cache_stat joins on it) */
	uint64_t entries;       /* registrations of it the cache holds and watches (those
				   uncached by a limit or HMEMREG_MR_NO_CACHE are not counted) */
	uint64_t bytes;         /* bytes they cover */
};

struct hmemreg_stats_block {
	uint64_t magic;         /* HMEMREG_STATS_MAGIC */
	uint32_t version;       /* HMEMREG_STATS_VERSION */
	uint32_t block_size;    /* bytes of the whole block */
	int32_t pid;
	uint32_t max_caches;    /* HMEMREG_STATS_MAX_CACHES */
	uint64_t start_time;    /* /proc/<pid>/stat field 22 */
	char boot_id[40];       /* /proc/sys/kernel/random/boot_id */
	uint64_t reserved[4];
	struct hmemreg_stats_cache caches[HMEMREG_STATS_MAX_CACHES] __attribute__((aligned(64)));
	/* version 3 */
	uint32_t max_exports;   /* HMEMREG_STATS_MAX_EXPORTS */
	uint32_t reserved3;
	uint64_t exports_unlisted; /* (cache, export) pairs held but not in exports[]: it was full */
	struct hmemreg_stats_export exports[HMEMREG_STATS_MAX_EXPORTS] __attribute__((aligned(64)));
};

/* Bytes of a block of version 1 or 2: the least a reader may accept. */
#define HMEMREG_STATS_BLOCK_SIZE_V2 offsetof(struct hmemreg_stats_block, max_exports)

/* A cache's counters, summed (hmemreg_cache_get_stats()). */
struct hmemreg_cache_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t entries;
	uint64_t bytes;
	uint64_t uncached;
	uint64_t uncached_bytes;
	uint64_t dead;
	uint64_t dead_bytes;
	uint64_t registrations;
	uint64_t registration_ns;
	uint64_t registration_failures;
	uint64_t deregistrations;
	uint64_t uncached_registrations;
	uint64_t evictions;
	uint64_t monitor_events;
	uint64_t races;
	uint64_t invalidations[HMEMREG_INVAL_MAX];
	char monitor[16];
	char registrar[24];
	uint64_t uncached_by[HMEMREG_UNCACHED_MAX]; /* enum hmemreg_uncached_reason */
	uint64_t monitor_failures;  /* see hmemreg_stats_cache */
	uint64_t monitor_fallbacks;
};

/*
 * Check a mapped block: 0 = valid and its process is alive;
 * -HMEMREG_ESTALE = its process is gone (or the pid was reused, or the
 * machine rebooted); -HMEMREG_EABI = not a block or a version this library
 * does not know; -HMEMREG_EINVAL = null or @len too small.
 */
int hmemreg_stats_block_check(const struct hmemreg_stats_block *block, size_t len);

/* Sum one slot of a block into @out (no process needs to be alive). */
void hmemreg_stats_sum(const struct hmemreg_stats_cache *slot, struct hmemreg_cache_stats *out);

/*
 * Shared-memory files left by dead processes.
 *
 * A process using libhmemreg owns two kinds of files in /dev/shm: its stats
 * block (hmemreg-stats.<pid>) and, for libfabric's shm provider, one region
 * per endpoint (hmemreg_<pid>_<random>, named by the engine). It holds a
 * shared flock(2) on each for as long as it uses it, and removes them when it
 * exits normally; a killed process leaves them behind. hmemreg_shm_gc()
 * removes a file only when nobody holds its lock and its process is gone
 * (stats blocks: hmemreg_stats_block_check(); regions: no such pid, or a pid
 * started after the file was made). libhmemreg runs it once per process, on
 * its first stats block or shm endpoint; mr_cache_stat --gc runs it on demand.
 */
enum hmemreg_shm_kind {
	HMEMREG_SHM_STATS_BLOCK = 0,   /* hmemreg-stats.<pid> */
	HMEMREG_SHM_FABRIC_REGION = 1, /* hmemreg_<pid>_<n> (libfabric shm provider) */
};

enum hmemreg_shm_verdict {
	HMEMREG_SHM_LIVE = 0,    /* its process runs (or may run): kept */
	HMEMREG_SHM_REMOVED = 1, /* stale and removed */
	HMEMREG_SHM_STALE = 2,   /* stale, left in place (HMEMREG_SHM_GC_DRY_RUN) */
	HMEMREG_SHM_FAILED = 3,  /* stale, but could not be removed (@error: errno) */
};

struct hmemreg_shm_file {
	const char *name;  /* file name inside the folder (valid during the callback) */
	int kind;          /* enum hmemreg_shm_kind */
	int pid;           /* from the name */
	uint64_t bytes;    /* file size */
	int verdict;       /* enum hmemreg_shm_verdict */
	int error;         /* errno with HMEMREG_SHM_FAILED, else 0 */
};

#define HMEMREG_SHM_GC_DRY_RUN 1u /* decide, remove nothing */

typedef void (*hmemreg_shm_gc_fn)(const struct hmemreg_shm_file *file, void *arg);

/*
 * Look at every hmemreg file in @dir (NULL: /dev/shm) and remove those of dead
 * processes; @each (may be NULL) is called once per file looked at. Returns
 * the number of stale files (removed, or that would be with DRY_RUN), or
 * -HMEMREG_EINVAL (unknown @flags) or -HMEMREG_ESYS (@dir unreadable; errno).
 */
int hmemreg_shm_gc(const char *dir, unsigned flags, hmemreg_shm_gc_fn each, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_STATS_H */
