// SPDX-License-Identifier: MIT
// libhmemreg's export memory kind end to end over hmemreg's Soft-RoCE, public
// C API only (hmemreg/hmemreg.h) plus the ledger over netlink: two engines
// of verbs;ofi_rxm (libfabric >= 1.20 through LD_LIBRARY_PATH) in this
// process register hmemreg.ko exports, whose DMA-BUFs rxe imports, and write
// devmem -> devmem and devmem -> host export, checked through the CPU
// mappings; the ledger shows rxe as importer; cached registrations are
// reused; freeing or unmapping an export drops its registrations (and
// rxe's pins); a write through a freed export's old descriptor lands
// nowhere; bad input fails clearly with nothing pinned.
//   test_rxe_export NODE            all checks; exit 0 pass, 1 fail, 77 skip
//   test_rxe_export NODE hold       register, print "holding", sleep (kill -9)
//   test_rxe_export NODE bw         devmem exports vs host memory bandwidth
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <hmemreg/hmemreg.h>

#include "ledger.h"

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
			failures++;                                          \
		}                                                            \
	} while (0)
#define OK(expr)                                                                                   \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		if (rc_) {                                                                         \
			printf("FAIL %s:%d: %s = %d (%s): %s / %s\n", __FILE__, __LINE__, #expr, rc_, \
			       hmemreg_strerror(rc_), hmemreg_export_last_error(),                 \
			       hmemreg_engine_last_error());                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

static atomic_ulong notes;

static void on_notify(void *arg, uint64_t from, uint64_t tag, uint64_t bytes)
{
	(void)arg, (void)from, (void)tag, (void)bytes;
	atomic_fetch_add(&notes, 1);
}

struct pair {
	hmemreg_engine_t *a, *b;
	uint64_t b_at_a;
};

static void make_pair(const char *node, struct pair *p)
{
	struct hmemreg_engine_config c;
	hmemreg_engine_config_init(&c);
	c.provider = "verbs;ofi_rxm";
	c.node = node;
	c.progress_threads = 1;
	OK(hmemreg_engine_create(&c, &p->a));
	OK(hmemreg_engine_create(&c, &p->b));
	OK(hmemreg_engine_set_callbacks(p->b, on_notify, NULL, NULL));
	char addr[512];
	size_t len = sizeof(addr);
	uint64_t a_at_b;
	OK(hmemreg_engine_address(p->b, addr, &len));
	OK(hmemreg_engine_add_peer(p->a, addr, len, 1, &p->b_at_a));
	len = sizeof(addr);
	OK(hmemreg_engine_address(p->a, addr, &len));
	OK(hmemreg_engine_add_peer(p->b, addr, len, 1, &a_at_b));
}

// Write [0, len) of src to the region described by desc; 0 or the status.
static int write_all(struct pair *p, hmemreg_region_t *src, size_t len, const void *desc, size_t dlen)
{
	struct hmemreg_chunk ch = {src, 0, len, 0};
	hmemreg_xfer_t *x;
	unsigned long want = atomic_load(&notes) + 1;
	int rc = hmemreg_engine_write(p->a, p->b_at_a, &ch, 1, desc, dlen, 7, NULL, NULL, &x);
	if (rc)
		return rc;
	rc = hmemreg_xfer_wait(p->a, x, 30000);
	hmemreg_xfer_release(x);
	for (int i = 0; rc == 0 && i < 3000 && atomic_load(&notes) < want; i++)
		usleep(1000);
	if (rc == 0 && atomic_load(&notes) < want)
		rc = -HMEMREG_EAGAIN;
	return rc;
}

static void fill(void *p, size_t n, unsigned seed)
{
	unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 131 + seed);
}

static int same(const void *p, size_t n, unsigned seed)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(i * 131 + seed))
			return 0;
	return 1;
}

// The ledger's record of export id (this process), or NULL.
static struct ledger_export exps[64];
static const struct ledger_export *ledger_of(uint64_t id)
{
	int n = ledger_exports((uint32_t)getpid(), exps, 64);
	for (int i = 0; i < n && i < 64; i++)
		if (exps[i].id == id)
			return &exps[i];
	return NULL;
}

static uint64_t pins_live(void)
{
	struct ledger_stats st;
	if (ledger_stats(&st))
		return ~0ULL;
	return st.v[HMEMREG_NLA_STAT_PINS_LIVE];
}

static void describe_check(hmemreg_engine_t *e)
{
	char d[4096];
	hmemreg_engine_describe(e, d, sizeof(d));
	printf("%s\n", d);
	CHECK(strstr(d, "hmemreg.ko exports: FI_MR_DMABUF with FI_HMEM_SYSTEM: verbs imports the DMA-BUF"),
	      "describe() does not say verbs imports exports");
}

static void bad_input(struct pair *p, hmemreg_export_t *src)
{
	uint64_t pins0 = pins_live();
	hmemreg_export_t *x = NULL;
	hmemreg_region_t *r = NULL;
	CHECK(hmemreg_export_devmem(0, &x) == -HMEMREG_EINVAL, "length 0");
	CHECK(strstr(hmemreg_export_last_error(), "page size"), "%s", hmemreg_export_last_error());
	CHECK(hmemreg_export_devmem(4097, &x) == -HMEMREG_EINVAL, "unaligned length");
	CHECK(hmemreg_export_devmem(1ULL << 40, &x) == -HMEMREG_ENOMEM, "larger than the pool: %s",
	      hmemreg_export_last_error());
	CHECK(hmemreg_export_host((void *)4096, 4096, &x) == -HMEMREG_EINVAL, "unmapped host range: %s",
	      hmemreg_export_last_error());
	const size_t len = hmemreg_export_len(src);
	CHECK(hmemreg_engine_reg_export(p->a, src, len - 4096, 8192, &r) == -HMEMREG_EINVAL, "past the end");
	CHECK(strstr(hmemreg_engine_last_error(), "not inside export"), "%s", hmemreg_engine_last_error());
	CHECK(hmemreg_engine_reg_export(p->a, src, 0, 0, &r) == -HMEMREG_EINVAL, "length 0");
	CHECK(hmemreg_engine_reg_export(p->a, NULL, 0, 4096, &r) == -HMEMREG_EINVAL, "null export");
	CHECK(hmemreg_export_free((hmemreg_export_t *)&pins0) == -HMEMREG_EINVAL, "not an export");
	CHECK(pins_live() == pins0, "bad input left pins: %llu -> %llu", (unsigned long long)pins0,
	      (unsigned long long)pins_live());
	printf("ok bad input: clear errors, nothing pinned\n");
}

static int hold(const char *node)
{
	struct pair p;
	make_pair(node, &p);
	hmemreg_export_t *s, *d;
	hmemreg_region_t *rs, *rd;
	OK(hmemreg_export_devmem(1 << 20, &s));
	OK(hmemreg_export_devmem(1 << 20, &d));
	OK(hmemreg_engine_reg_export(p.a, s, 0, 1 << 20, &rs));
	OK(hmemreg_engine_reg_export(p.b, d, 0, 1 << 20, &rd));
	printf("holding: %llu pins live\n", (unsigned long long)pins_live());
	fflush(stdout);
	for (;;)
		pause();
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Bandwidth of the same engine pair, devmem exports (FI_MR_DMABUF) against
// host memory (ordinary MRs), same size, alternating rounds; one row each
// and the ratio. Software RoCE: read the ratio, not the MB/s.
static int bandwidth(const char *node)
{
	struct pair p;
	make_pair(node, &p);
	const size_t len = 8 << 20;
	const int rounds = 3, per = 4;
	hmemreg_export_t *s, *d;
	OK(hmemreg_export_devmem(len, &s));
	OK(hmemreg_export_devmem(len, &d));
	void *hs = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	void *hd = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	fill(hmemreg_export_addr(s), len, 3);
	fill(hs, len, 3);
	hmemreg_region_t *rs, *rd, *rhs, *rhd;
	OK(hmemreg_engine_reg_export(p.a, s, 0, len, &rs));
	OK(hmemreg_engine_reg_export(p.b, d, 0, len, &rd));
	OK(hmemreg_engine_reg(p.a, hs, len, &rhs));
	OK(hmemreg_engine_reg(p.b, hd, len, &rhd));
	char dd[256], dh[256];
	size_t ld = sizeof(dd), lh = sizeof(dh);
	OK(hmemreg_region_descriptor(rd, dd, &ld));
	OK(hmemreg_region_descriptor(rhd, dh, &lh));
	OK(write_all(&p, rs, len, dd, ld)); // warm both paths
	OK(write_all(&p, rhs, len, dh, lh));
	double t_dev = 0, t_host = 0;
	for (int r = 0; r < rounds; r++) {
		double t0 = now_s();
		for (int i = 0; i < per; i++)
			OK(write_all(&p, rs, len, dd, ld));
		double t1 = now_s();
		for (int i = 0; i < per; i++)
			OK(write_all(&p, rhs, len, dh, lh));
		t_dev += t1 - t0;
		t_host += now_s() - t1;
	}
	const double mb = (double)len * rounds * per / 1e6;
	CHECK(same(hmemreg_export_addr(d), len, 3) && same(hd, len, 3), "bandwidth rounds: bytes differ");
	printf("bw: devmem exports (FI_MR_DMABUF) %zu MiB writes: %.1f MB/s\n", len >> 20, mb / t_dev);
	printf("bw: host memory (ordinary MRs)    %zu MiB writes: %.1f MB/s\n", len >> 20, mb / t_host);
	printf("bw: devmem / host = %.3f (same engines, sizes and run, %d alternating rounds of %d)\n",
	       t_host / t_dev, rounds, per);
	hmemreg_region_release(rs);
	hmemreg_region_release(rd);
	hmemreg_region_release(rhs);
	hmemreg_region_release(rhd);
	hmemreg_engine_destroy(p.a);
	hmemreg_engine_destroy(p.b);
	OK(hmemreg_export_free(s));
	OK(hmemreg_export_free(d));
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s NODE [hold]\n", argv[0]);
		return 2;
	}
	if (hmemreg_fabric_api_version() < ((1u << 16) | 20u)) {
		printf("SKIP: the libfabric loaded has API < 1.20 (no FI_MR_DMABUF): set LD_LIBRARY_PATH\n");
		return 77;
	}
	if (argc > 2 && !strcmp(argv[2], "hold"))
		return hold(argv[1]);
	if (argc > 2 && !strcmp(argv[2], "bw"))
		return bandwidth(argv[1]);
	const size_t len = 4 << 20;
	struct pair p;
	make_pair(argv[1], &p);
	describe_check(p.a);

	// devmem -> devmem, zero-copy through rxe's imports.
	hmemreg_export_t *src, *dst;
	OK(hmemreg_export_devmem(len, &src));
	OK(hmemreg_export_devmem(len, &dst));
	CHECK(hmemreg_export_is_devmem(src), "devmem export");
	fill(hmemreg_export_addr(src), len, 5);
	hmemreg_region_t *rs, *rd;
	OK(hmemreg_engine_reg_export(p.a, src, 0, len, &rs));
	OK(hmemreg_engine_reg_export(p.b, dst, 0, len, &rd));
	char desc[256], desc_old[256];
	size_t dlen = sizeof(desc);
	OK(hmemreg_region_descriptor(rd, desc, &dlen));
	OK(write_all(&p, rs, len, desc, dlen));
	CHECK(same(hmemreg_export_addr(dst), len, 5), "devmem -> devmem bytes differ");
	const struct ledger_export *ls = ledger_of(hmemreg_export_id(src));
	CHECK(ls && ls->pins_live >= 1 && ls->attachments >= 1 && !strncmp(ls->att_device, "rxe", 3) &&
		      ls->provider == HMEMREG_PROVIDER_DEVMEM,
	      "ledger: export %llu not pinned by rxe (%s, pins %u)", (unsigned long long)hmemreg_export_id(src),
	      ls ? ls->att_device : "absent", ls ? ls->pins_live : 0);
	printf("ok devmem -> devmem %zu MiB verified; ledger: export %llu pinned by %s (pid %d)\n", len >> 20,
	       (unsigned long long)hmemreg_export_id(src), ls ? ls->att_device : "?", getpid());

	// Cached: a second registration of the same export imports nothing new.
	uint64_t pins_total0 = ls ? ls->pins_total : 0;
	hmemreg_region_release(rs);
	OK(hmemreg_engine_reg_export(p.a, src, 4096, len - 4096, &rs));
	ls = ledger_of(hmemreg_export_id(src));
	CHECK(ls && ls->pins_total == pins_total0, "a cached export registration pinned again (%llu -> %llu)",
	      (unsigned long long)pins_total0, ls ? (unsigned long long)ls->pins_total : 0ULL);
	printf("ok second registration of export %llu: a cache hit (pins_total %llu)\n",
	       (unsigned long long)hmemreg_export_id(src), (unsigned long long)pins_total0);
	hmemreg_region_release(rs);
	OK(hmemreg_engine_reg_export(p.a, src, 0, len, &rs));

	// Freeing while a region holds it: refused, nothing changes.
	CHECK(hmemreg_export_free(dst) == -HMEMREG_EBUSY, "free of a held export");
	CHECK(strstr(hmemreg_export_last_error(), "still held"), "%s", hmemreg_export_last_error());
	memset(hmemreg_export_addr(dst), 0, len);
	OK(write_all(&p, rs, len, desc, dlen));
	CHECK(same(hmemreg_export_addr(dst), len, 5), "write after a refused free");

	// Freed while cached (region released, entry cached and pinned): the
	// cache drops it, rxe unpins, the memory goes back to the pool. (The
	// refused free dropped the held entry: it went with its last release.)
	hmemreg_region_release(rd);
	OK(hmemreg_engine_reg_export(p.b, dst, 0, len, &rd));
	dlen = sizeof(desc);
	OK(hmemreg_region_descriptor(rd, desc, &dlen));
	hmemreg_region_release(rd);
	uint64_t dst_id = hmemreg_export_id(dst);
	CHECK(ledger_of(dst_id) && ledger_of(dst_id)->pins_live >= 1, "released region's export stays cached");
	OK(hmemreg_export_free(dst));
	CHECK(ledger_of(dst_id) == NULL, "export %llu still in the ledger after free", (unsigned long long)dst_id);
	printf("ok free of a cached export: registration dropped, export %llu gone from the ledger\n",
	       (unsigned long long)dst_id);
	memcpy(desc_old, desc, dlen);

	// A new export (likely the same pool pages): a new registration, new key.
	hmemreg_export_t *dst2;
	hmemreg_region_t *rd2;
	OK(hmemreg_export_devmem(len, &dst2));
	OK(hmemreg_engine_reg_export(p.b, dst2, 0, len, &rd2));
	size_t dlen2 = sizeof(desc);
	OK(hmemreg_region_descriptor(rd2, desc, &dlen2));
	CHECK(dlen2 != dlen || memcmp(desc, desc_old, dlen), "new export got the old descriptor");
	fill(hmemreg_export_addr(src), len, 9);
	OK(write_all(&p, rs, len, desc, dlen2));
	CHECK(same(hmemreg_export_addr(dst2), len, 9), "write into the new export");
	printf("ok new export %llu: new registration, write verified\n", (unsigned long long)hmemreg_export_id(dst2));

	// Host export: devmem -> host pages; then unmapped while cached.
	void *h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	CHECK(h != MAP_FAILED, "mmap");
	hmemreg_export_t *hx;
	hmemreg_region_t *rh;
	OK(hmemreg_export_host(h, len, &hx));
	OK(hmemreg_engine_reg_export(p.b, hx, 0, len, &rh));
	size_t dlen3 = sizeof(desc);
	OK(hmemreg_region_descriptor(rh, desc, &dlen3));
	OK(write_all(&p, rs, len, desc, dlen3));
	CHECK(same(h, len, 9), "devmem -> host export bytes differ");
	const struct ledger_export *lh = ledger_of(hmemreg_export_id(hx));
	CHECK(lh && lh->pins_live >= 1 && !strncmp(lh->att_device, "rxe", 3), "host export not pinned by rxe");
	printf("ok devmem -> host export %llu verified, pinned by %s\n", (unsigned long long)hmemreg_export_id(hx),
	       lh ? lh->att_device : "?");
	hmemreg_region_release(rh);
	munmap(h, len);
	CHECK(hmemreg_export_check(hx) == -HMEMREG_ESTALE, "unmapped host export not stale");
	int waited = 0;
	while ((lh = ledger_of(hmemreg_export_id(hx))) && lh->pins_live && waited < 5000) {
		usleep(10000);
		waited += 10;
	}
	CHECK(lh && lh->pins_live == 0, "unmapped host export still pinned after %d ms", waited);
	printf("ok host range unmapped: the event ring dropped the registration, rxe unpinned (%d ms)\n", waited);
	CHECK(hmemreg_engine_reg_export(p.b, hx, 0, len, &rh) == -HMEMREG_ESTALE, "registering an unmapped export");
	OK(hmemreg_export_free(hx));

	bad_input(&p, src);

	// Last (it may break the connection): the freed export's old descriptor
	// no longer names registered memory; the write fails and lands nowhere.
	fill(hmemreg_export_addr(src), len, 77);
	memset(hmemreg_export_addr(dst2), 0, len);
	int rc = write_all(&p, rs, len, desc_old, dlen);
	CHECK(rc != 0, "a write through a freed export's descriptor succeeded");
	const unsigned char *n2 = hmemreg_export_addr(dst2);
	size_t landed = 0;
	for (size_t i = 0; i < len; i++)
		landed += n2[i] != 0;
	CHECK(landed == 0, "%zu bytes of a stale write landed in the new export", landed);
	printf("ok write through the freed export's descriptor: %s, nothing landed in the new pages\n",
	       hmemreg_strerror(rc));

	hmemreg_region_release(rs);
	hmemreg_region_release(rd2);
	hmemreg_engine_destroy(p.a);
	hmemreg_engine_destroy(p.b);
	OK(hmemreg_export_free(src));
	OK(hmemreg_export_free(dst2));
	CHECK(ledger_exports((uint32_t)getpid(), exps, 64) == 0, "exports left in the ledger");
	CHECK(pins_live() == 0, "pins left: %llu", (unsigned long long)pins_live());
	printf(failures ? "FAILED: %d check(s)\n" : "all export checks passed\n", failures);
	return failures ? 1 : 0;
}
