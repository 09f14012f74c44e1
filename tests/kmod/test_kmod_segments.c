// SPDX-License-Identifier: MIT
// The DMA segments an export is mapped with honour the importing device's
// limits: its max segment size, its segment boundary, and what its DMA path
// maps in one piece (dma_max_mapping_size(): the swiotlb slot limit when it
// bounces). The test importer attaches as devices of its own with such
// limits. tests/vm.d/10-kmod.sh runs this suite with the rest (and reserves
// huge pages); tests/vm.d/11-kmod-swiotlb.sh runs it again under
// swiotlb=force with HMEMREG_EXPECT_BOUNCE=1.
//
// What a segment list must be is worked out here from the buffer's physical
// pages (/proc/self/pagemap, root in the VM): physically contiguous pages
// share a segment, cut only where a limit says so.
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "importer_client.h"

#define HUGE_PG (2UL << 20)
#define MAX_SEGS 8192

struct limits {
	uint64_t max;		// bytes, after the mapping-size limit
	uint64_t boundary;	// mask
};

// Under swiotlb=force (tests/vm.d/11-kmod-swiotlb.sh): every mapping bounces.
static bool expect_bounce(void)
{
	const char *e = getenv("HMEMREG_EXPECT_BOUNCE");

	return e && *e == '1';
}

// Huge-page (hugetlbfs) backed anonymous memory, filled with a pattern.
static char *map_huge(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);

	cr_assert_neq(p, MAP_FAILED,
		      "MAP_HUGETLB of %zu bytes: %s (tests/vm.d/10-kmod.sh reserves huge pages "
		      "in /proc/sys/vm/nr_hugepages)", len, strerror(errno));
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(i * 7 + i / 4096);
	return p;
}

// Physical address of each page of [p, p + npages pages).
static uint64_t *phys_pages(const void *p, size_t npages)
{
	uint64_t *phys = calloc(npages, sizeof(*phys));
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	cr_assert(phys);
	cr_assert_geq(fd, 0, "pagemap: %s", strerror(errno));
	for (size_t i = 0; i < npages; i++) {
		uint64_t e;
		off_t off = ((uintptr_t)p / PG + i) * sizeof(e);

		cr_assert_eq(pread(fd, &e, sizeof(e), off), (ssize_t)sizeof(e));
		cr_assert(e >> 63, "page %zu not present", i);
		cr_assert_neq(e & ((1ULL << 55) - 1), 0, "no PFN in pagemap (needs root)");
		phys[i] = (e & ((1ULL << 55) - 1)) * PG;
	}
	close(fd);
	return phys;
}

// What one segment of the attached device may be (as the exporter must see it).
static struct limits att_limits(const struct hmimp_attach *a)
{
	struct limits l = { .max = a->max_seg, .boundary = a->seg_boundary };

	if (a->max_mapping && a->max_mapping < l.max)
		l.max = a->max_mapping;
	if (l.max >= PG)
		l.max &= ~(PG - 1);	// page-sized or larger: whole pages
	return l;
}

// The segments of npages pages at phys[] for limits l; their count.
static size_t expected_segs(const uint64_t *phys, size_t npages, struct limits l,
			    struct hmimp_seg *out, size_t room)
{
	size_t n = 0;

	for (size_t i = 0; i < npages;) {
		size_t first = i;

		for (i++; i < npages && phys[i] == phys[i - 1] + PG; i++)
			;
		for (uint64_t p = phys[first], end = phys[first] + (i - first) * PG; p < end;) {
			uint64_t to_boundary = l.boundary - (p & l.boundary) + 1;
			uint64_t len = end - p;

			if (to_boundary && to_boundary < len)
				len = to_boundary;
			if (len > l.max)
				len = l.max;
			cr_assert_lt(n, room);
			out[n++] = (struct hmimp_seg){ .addr = p, .len = len };
			p += len;
		}
	}
	return n;
}

// Every segment within l, and all of them covering len bytes.
static void assert_within(const char *what, const struct hmimp_seg *s, long n, struct limits l,
			  uint64_t len)
{
	uint64_t total = 0;

	for (long i = 0; i < n; i++) {
		uint64_t last = s[i].addr + s[i].len - 1;

		cr_assert_gt(s[i].len, 0);
		cr_assert_leq(s[i].len, l.max, "%s segment %ld: %" PRIu64 " bytes, the device takes %"
			      PRIu64, what, i, s[i].len, l.max);
		cr_assert_eq((s[i].addr ^ last) & ~l.boundary, 0,
			     "%s segment %ld [0x%" PRIx64 ", 0x%" PRIx64 "] crosses the boundary mask 0x%"
			     PRIx64, what, i, s[i].addr, last, l.boundary);
		total += s[i].len;
	}
	cr_assert_eq(total, len, "%s segments cover %" PRIu64 " of %" PRIu64 " bytes", what, total,
		     len);
}

/*
 * Map buf[0, len) (exported through dfd) for a device with max_seg and
 * boundary; check the exporter's sg entries are exactly the expected ones,
 * the DMA segments are within the limits, the device reads the buffer and
 * its writes reach it. Returns the number of sg entries.
 */
static long map_and_check(int ifd, int dfd, char *buf, uint64_t len, uint32_t flags,
			  uint32_t max_seg, uint64_t boundary)
{
	static struct hmimp_seg cpu[MAX_SEGS], dma[MAX_SEGS], want[MAX_SEGS];
	struct hmimp_attach a;
	struct hmimp_op op;
	uint64_t *phys = phys_pages(buf, len / PG);
	char *rd = malloc(len);
	int id = imp_attach_dev(ifd, dfd, flags, max_seg, boundary, &a);

	cr_assert_geq(id, 0, "attach as a device with max segment %u, boundary 0x%" PRIx64 ": %s",
		      max_seg, boundary, strerror(-id));
	cr_assert_eq(a.max_seg, max_seg, "the device reports the max segment asked for");
	if (boundary)
		cr_assert_eq(a.seg_boundary, boundary);
	struct limits l = att_limits(&a);

	if (flags & HMIMP_DYNAMIC)
		cr_assert_eq(imp_op(ifd, HMIMP_IOC_PIN, id, 0, 0, NULL), 0);
	int ret = imp_op(ifd, HMIMP_IOC_MAP, id, HMIMP_BIDIRECTIONAL, 0, &op);
	cr_assert_eq(ret, 0, "map %" PRIu64 " bytes for max segment %u, boundary 0x%" PRIx64
		     " (max mapping %" PRIu64 "): %s", len, max_seg, a.seg_boundary,
		     (uint64_t)a.max_mapping, strerror(-ret));
	cr_assert_eq(op.mapped, len);

	long ncpu = imp_segs(ifd, id, HMIMP_SEGS_CPU, cpu, MAX_SEGS);
	long ndma = imp_segs(ifd, id, HMIMP_SEGS_DMA, dma, MAX_SEGS);
	cr_assert_gt(ncpu, 0, "sg entries: %s", strerror(-ncpu));
	cr_assert_gt(ndma, 0, "DMA segments: %s", strerror(-ndma));
	cr_assert_leq(ncpu, MAX_SEGS);
	cr_assert_leq(ndma, MAX_SEGS);
	cr_assert_eq((uint64_t)ndma, op.nents);
	assert_within("sg entry", cpu, ncpu, l, len);
	assert_within("DMA", dma, ndma, l, len);
	if (expect_bounce())
		for (long i = 0; i < ndma && i < ncpu; i++)
			cr_assert_neq(dma[i].addr, cpu[i].addr, "segment %ld did not bounce", i);
	size_t nwant = expected_segs(phys, len / PG, l, want, MAX_SEGS);
	cr_assert_eq((size_t)ncpu, nwant, "%ld sg entries, want %zu (max %" PRIu64 ", boundary 0x%"
		     PRIx64 ")", ncpu, nwant, l.max, l.boundary);
	for (long i = 0; i < ncpu; i++)
		cr_assert(cpu[i].addr == want[i].addr && cpu[i].len == want[i].len,
			  "sg entry %ld is [0x%" PRIx64 " +%" PRIu64 "], want [0x%" PRIx64 " +%" PRIu64
			  "]", i, cpu[i].addr, cpu[i].len, want[i].addr, want[i].len);

	// The device reads what the CPU wrote, and its writes reach the pages
	// once unmapped (through the bounce buffer, if it bounces; a static
	// attachment's mapping is the core's until detach).
	cr_assert(rd);
	cr_assert_eq(imp_access(ifd, id, 0, 0, rd, len), 0);
	cr_assert_eq(memcmp(rd, buf, len), 0, "the device read other data than the buffer holds");
	for (uint64_t i = 0; i < len; i++)
		rd[i] = (char)~rd[i];
	cr_assert_eq(imp_access(ifd, id, 1, 0, rd, len), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNMAP, id, 0, 0, NULL), 0);
	if (flags & HMIMP_DYNAMIC)
		cr_assert_eq(imp_op(ifd, HMIMP_IOC_UNPIN, id, 0, 0, NULL), 0);
	cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, id, 0, 0, NULL), 0);
	cr_assert_eq(memcmp(rd, buf, len), 0, "the device's writes did not reach the buffer");
	free(rd);
	free(phys);
	return ncpu;
}

// The case the issue was found with: pages 1..32 of a 2 MiB huge page for a
// device with a 64 KiB max segment and boundary: 60 + 64 + 4 KiB.
Test(segments, huge_page_range_cut_at_64k_boundary)
{
	int fd = hm_open(), ifd = imp_open();
	char *buf = map_huge(HUGE_PG);
	int dfd = hm_export_host(fd, buf + PG, 32 * PG, HMEMREG_EXPORT_WRITE, 0, NULL);

	cr_assert_geq(dfd, 0);
	long n = map_and_check(ifd, dfd, buf + PG, 32 * PG, HMIMP_DYNAMIC, 64 << 10, 0xffff);
	cr_assert_eq(n, 3, "one huge page is contiguous: 3 segments, got %ld", n);
	close(dfd);
	close(ifd);
	close(fd);
	munmap(buf, HUGE_PG);
	hm_assert_ledger_idle();
}

// Limits smaller and larger than each other and than a page, static and
// dynamic importers, over most of a huge page (from its second page).
Test(segments, huge_page_under_mixed_limits)
{
	static const struct {
		uint32_t max_seg;
		uint64_t boundary;
		uint32_t flags;
	} cases[] = {
		{ 64 << 10, 0x3fff, HMIMP_DYNAMIC },	// boundary below the max segment
		{ 12 << 10, 0xffff, 0 },		// max not dividing the boundary
		{ 0xffff, 0xfffff, HMIMP_DYNAMIC },	// max segment not a page multiple
		{ 1 << 20, 0xfff, 0 },			// boundary of one page
		{ 2048, 0xffffffff, HMIMP_DYNAMIC },	// segments smaller than a page
		{ 1U << 31, 0, HMIMP_DYNAMIC },		// no boundary, 2 GiB segments
	};
	int fd = hm_open(), ifd = imp_open();
	char *buf = map_huge(HUGE_PG);
	uint64_t len = HUGE_PG - 2 * PG;
	int dfd = hm_export_host(fd, buf + PG, len, HMEMREG_EXPORT_WRITE, 0, NULL);

	cr_assert_geq(dfd, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		map_and_check(ifd, dfd, buf + PG, len, cases[i].flags, cases[i].max_seg,
			      cases[i].boundary);
	close(dfd);
	close(ifd);
	close(fd);
	munmap(buf, HUGE_PG);
	hm_assert_ledger_idle();
}

// Ordinary pages (contiguous only by chance) and emulated device memory.
Test(segments, scattered_pages_and_devmem)
{
	int fd = hm_open(), ifd = imp_open();
	char *buf = hm_map_anon(256 * PG);
	int dfd = hm_export_host(fd, buf, 256 * PG, HMEMREG_EXPORT_WRITE, 0, NULL);

	cr_assert_geq(dfd, 0);
	map_and_check(ifd, dfd, buf, 256 * PG, HMIMP_DYNAMIC, 16 << 10, 0x7fff);
	map_and_check(ifd, dfd, buf, 256 * PG, 0, 1 << 20, 0x1fffff);
	close(dfd);

	int64_t h = hm_dev_alloc(fd, 64 * PG);
	cr_assert_geq(h, 0);
	dfd = hm_export_dev(fd, h, 0, 64 * PG, HMEMREG_EXPORT_WRITE, NULL);
	cr_assert_geq(dfd, 0);
	char *m = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	cr_assert_neq(m, MAP_FAILED);
	memset(m, 0x6b, 64 * PG);
	map_and_check(ifd, dfd, m, 64 * PG, HMIMP_DYNAMIC, 8 << 10, 0x3fff);
	munmap(m, 64 * PG);
	close(dfd);
	cr_assert_eq(hm_dev_free(fd, h), 0);
	close(ifd);
	close(fd);
	hm_assert_ledger_idle();
}

// 4 and 8 MiB huge-page exports for devices with 1 MiB and 2 GiB segments.
// Under swiotlb=force (HMEMREG_EXPECT_BOUNCE=1) each segment must also fit a
// bounce buffer slot run (dma_max_mapping_size(), 256 KiB): larger ones fail
// to map with EIO ("swiotlb buffer is full").
Test(segments, large_huge_page_exports)
{
	int fd = hm_open(), ifd = imp_open();

	for (uint64_t len = 2 * HUGE_PG; len <= 4 * HUGE_PG; len *= 2) {
		char *buf = map_huge(len);
		int dfd = hm_export_host(fd, buf, len, HMEMREG_EXPORT_WRITE, 0, NULL);
		struct hmimp_attach a;

		cr_assert_geq(dfd, 0);
		int id = imp_attach_dev(ifd, dfd, HMIMP_DYNAMIC, 1 << 20, 0, &a);
		cr_assert_geq(id, 0);
		if (expect_bounce())
			cr_assert_lt(a.max_mapping, 1 << 20,
				     "swiotlb=force should limit a mapping to its slots, not %" PRIu64,
				     (uint64_t)a.max_mapping);
		cr_assert_eq(imp_op(ifd, HMIMP_IOC_DETACH, id, 0, 0, NULL), 0);
		map_and_check(ifd, dfd, buf, len, HMIMP_DYNAMIC, 1 << 20, 0);
		map_and_check(ifd, dfd, buf, len, 0, 1U << 31, 0);
		close(dfd);
		munmap(buf, len);
	}
	close(ifd);
	close(fd);
	hm_assert_ledger_idle();
}

// A device whose boundary is no mask of low bits is refused by the importer
// (its own check), so the cases above test what they say.
Test(segments, importer_refuses_bad_boundary)
{
	int fd = hm_open(), ifd = imp_open();
	char *buf = hm_map_anon(PG);
	int dfd = hm_export_host(fd, buf, PG, 0, 0, NULL);

	cr_assert_eq(imp_attach_dev(ifd, dfd, 0, 1 << 16, 0x10000, NULL), -EINVAL);
	cr_assert_eq(imp_attach_dev(ifd, dfd, 0, 0, 0xffff, NULL), -EINVAL);
	close(dfd);
	close(ifd);
	close(fd);
	hm_assert_ledger_idle();
}
