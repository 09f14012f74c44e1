// SPDX-License-Identifier: MIT
// The kernel's own memfd exporter, udmabuf, as a reference for hmemreg's HOST
// provider: the same pages exported by both look the same to the test
// importer (size, bytes mapped, DMA reads and writes, bounds), for a static
// and a dynamic importer. Needs CONFIG_UDMABUF, so it runs under the debug
// kernel only (tests/debug.d/20-udmabuf.sh).
#define _GNU_SOURCE
#include <linux/udmabuf.h>
#include <sys/mman.h>

#include "importer_client.h"

#define NPG 8
#define LEN (NPG * PG)

struct ref_pair {
	int memfd, hfd, ifd;
	char *cpu;
	int bufs[2];	// [0] udmabuf, [1] hmemreg
};

static const char *const names[2] = { "udmabuf", "hmemreg" };

static struct ref_pair ref_setup(void)
{
	struct ref_pair p;
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = LEN };
	int dev;

	p.memfd = memfd_create("hmemreg-udmabuf-ref", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	cr_assert_geq(p.memfd, 0);
	cr_assert_eq(ftruncate(p.memfd, LEN), 0);
	cr_assert_eq(fcntl(p.memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0, "udmabuf needs F_SEAL_SHRINK");
	p.cpu = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, p.memfd, 0);
	cr_assert_neq(p.cpu, MAP_FAILED);
	for (int i = 0; i < NPG; i++)
		memset(p.cpu + i * PG, 'a' + i, PG);

	dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	cr_assert_geq(dev, 0, "open /dev/udmabuf: %s", strerror(errno));
	c.memfd = p.memfd;
	p.bufs[0] = ioctl(dev, UDMABUF_CREATE, &c);
	cr_assert_geq(p.bufs[0], 0, "UDMABUF_CREATE: %s", strerror(errno));
	close(dev);

	p.hfd = hm_open();
	p.bufs[1] = hm_export_host(p.hfd, p.cpu, LEN, HMEMREG_EXPORT_WRITE, 0, NULL);
	cr_assert_geq(p.bufs[1], 0, "hmemreg export of the memfd pages: %s", strerror(-p.bufs[1]));
	p.ifd = imp_open();
	return p;
}

static void ref_teardown(struct ref_pair *p)
{
	close(p->ifd);
	close(p->bufs[0]);
	close(p->bufs[1]);
	close(p->hfd);
	munmap(p->cpu, LEN);
	close(p->memfd);
	hm_assert_ledger_idle();
}

// Attach (and for a dynamic importer pin) and map; returns the attachment id.
static int attach_map(const struct ref_pair *p, int b, uint32_t flags)
{
	struct hmimp_attach a = { .fd = p->bufs[b], .flags = flags };
	struct hmimp_op op;

	cr_assert_eq(hm_ioctl(p->ifd, HMIMP_IOC_ATTACH, &a), 0, "%s: attach", names[b]);
	cr_assert_eq(a.size, LEN, "%s: DMA-BUF size", names[b]);
	if (flags & HMIMP_DYNAMIC)
		cr_assert_eq(imp_op(p->ifd, HMIMP_IOC_PIN, a.id, 0, 0, NULL), 0, "%s: pin", names[b]);
	cr_assert_eq(imp_op(p->ifd, HMIMP_IOC_MAP, a.id, HMIMP_BIDIRECTIONAL, 0, &op), 0,
		     "%s: map", names[b]);
	cr_assert_gt(op.nents, 0, "%s: no DMA segments", names[b]);
	cr_assert_eq(op.mapped, LEN, "%s: bytes mapped", names[b]);
	return a.id;
}

static void unmap_detach(const struct ref_pair *p, int b, int id, uint32_t flags)
{
	cr_assert_eq(imp_op(p->ifd, HMIMP_IOC_UNMAP, id, 0, 0, NULL), 0, "%s: unmap", names[b]);
	if (flags & HMIMP_DYNAMIC)
		cr_assert_eq(imp_op(p->ifd, HMIMP_IOC_UNPIN, id, 0, 0, NULL), 0, "%s: unpin",
			     names[b]);
	cr_assert_eq(imp_op(p->ifd, HMIMP_IOC_DETACH, id, 0, 0, NULL), 0, "%s: detach", names[b]);
}

static void same_view(uint32_t flags)
{
	struct ref_pair p = ref_setup();
	static char rd[2][LEN];
	char wr[PG];
	int id[2];

	for (int b = 0; b < 2; b++)
		id[b] = attach_map(&p, b, flags);

	// Both importers read what the CPU wrote.
	for (int b = 0; b < 2; b++) {
		cr_assert_eq(imp_access(p.ifd, id[b], 0, 0, rd[b], LEN), 0, "%s: read", names[b]);
		cr_assert_eq(memcmp(rd[b], p.cpu, LEN), 0, "%s: DMA read differs from the CPU view",
			     names[b]);
	}
	// A device write through one exporter is seen by the CPU and through the other.
	for (int b = 0; b < 2; b++) {
		uint64_t off = (3 + 2 * b) * PG + 64;

		memset(wr, 'W' + b, sizeof(wr));
		cr_assert_eq(imp_access(p.ifd, id[b], 1, off, wr, 256), 0, "%s: write", names[b]);
		cr_assert_eq(memcmp(p.cpu + off, wr, 256), 0, "%s: write not seen by the CPU",
			     names[b]);
		cr_assert_eq(imp_access(p.ifd, id[!b], 0, off, rd[!b], 256), 0);
		cr_assert_eq(memcmp(rd[!b], wr, 256), 0, "%s write not seen through %s", names[b],
			     names[!b]);
	}
	// Same bounds: the last byte is reachable, one past it is not.
	for (int b = 0; b < 2; b++) {
		cr_assert_eq(imp_access(p.ifd, id[b], 0, LEN - 1, rd[b], 1), 0, "%s", names[b]);
		cr_assert_eq(imp_access(p.ifd, id[b], 0, LEN - 1, rd[b], 2), -ERANGE, "%s",
			     names[b]);
	}
	for (int b = 0; b < 2; b++)
		unmap_detach(&p, b, id[b], flags);
	ref_teardown(&p);
}

Test(udmabuf_reference, static_importer_sees_the_same_buffer)
{
	same_view(0);
}

Test(udmabuf_reference, dynamic_importer_sees_the_same_buffer)
{
	same_view(HMIMP_DYNAMIC);
}

// The exporters outlive every fd but the importer's attachment, alike.
Test(udmabuf_reference, attachment_outlives_the_fds)
{
	struct ref_pair p = ref_setup();
	char rd[PG];
	int id[2];

	for (int b = 0; b < 2; b++)
		id[b] = attach_map(&p, b, 0);
	close(p.bufs[0]);
	close(p.bufs[1]);
	munmap(p.cpu, LEN);
	close(p.memfd);
	for (int b = 0; b < 2; b++) {
		cr_assert_eq(imp_access(p.ifd, id[b], 0, 2 * PG, rd, PG), 0, "%s: read", names[b]);
		cr_assert_eq(rd[0], 'c', "%s: page 2 content", names[b]);
		unmap_detach(&p, b, id[b], 0);
	}
	close(p.ifd);
	close(p.hfd);
	hm_assert_ledger_idle();
}
