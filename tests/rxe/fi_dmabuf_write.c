// SPDX-License-Identifier: MIT
// libfabric (>= 1.20, FI_MR_DMABUF) over hmemreg's Soft-RoCE: two endpoints
// of verbs;ofi_rxm on one rxe device register hmemreg devmem exports by their
// dma-buf fds and RDMA-write devmem -> devmem; the devmem mmaps check it.
//   fi_dmabuf_write [DOMAIN [MIB [NODE [bench]]]]   (defaults rxe0, 8, none; NODE:
//   the device's IPv4 address, which rxm's listener binds). "bench" then also
//   measures devmem -> devmem (dma-buf MRs) against host -> host (ordinary
//   MRs) of the same sizes over the same endpoints, in alternating rounds.
// Exit 0: bytes verified; 1: failure (says which step); 77: no such provider.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>

#define BENCH_WINDOW 8
#include <unistd.h>

#include <linux/hmemreg.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define CHECK(call)                                                                  \
	do {                                                                         \
		int ret_ = (call);                                                   \
		if (ret_) {                                                          \
			fprintf(stderr, "fi_dmabuf_write: %s: %s (%d)\n", #call,    \
				fi_strerror(-ret_), ret_);                           \
			exit(1);                                                     \
		}                                                                    \
	} while (0)

static void die(const char *what)
{
	fprintf(stderr, "fi_dmabuf_write: %s: %s\n", what, strerror(errno));
	exit(1);
}

struct devbuf {
	int fd;
	char *map;
	size_t len;
	struct fid_mr *mr;
};

static struct devbuf devmem(int hm, size_t len)
{
	struct hmemreg_devmem_alloc a = { .size = sizeof(a), .len = len };
	struct devbuf d = { .len = len };

	if (ioctl(hm, HMEMREG_IOC_DEVMEM_ALLOC, &a))
		die("HMEMREG_IOC_DEVMEM_ALLOC");
	struct hmemreg_export e = {
		.size = sizeof(e), .provider = HMEMREG_PROVIDER_DEVMEM,
		.flags = HMEMREG_EXPORT_WRITE, .len = len, .handle = a.handle,
	};
	if (ioctl(hm, HMEMREG_IOC_EXPORT, &e))
		die("HMEMREG_IOC_EXPORT devmem");
	d.fd = e.fd;
	d.map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, d.fd, 0);
	if (d.map == MAP_FAILED)
		die("mmap of the devmem dma-buf");
	return d;
}

// Register the export by fd; its iova is its mmap address (FI_MR_VIRT_ADDR).
static void reg(struct fid_domain *dom, struct devbuf *d)
{
	struct fi_mr_dmabuf db = { .fd = d->fd, .offset = 0, .len = d->len, .base_addr = d->map };
	struct fi_mr_attr attr = {
		.dmabuf = &db, .iov_count = 1, .iface = FI_HMEM_SYSTEM,
		.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
	};

	CHECK(fi_mr_regattr(dom, &attr, FI_MR_DMABUF, &d->mr));
}

static struct fid_ep *endpoint(struct fi_info *fi, struct fid_domain *dom, struct fid_av *av,
			       struct fid_cq **cq)
{
	struct fi_cq_attr ca = { .format = FI_CQ_FORMAT_CONTEXT, .size = 64 };
	struct fid_ep *ep;

	CHECK(fi_cq_open(dom, &ca, cq, NULL));
	CHECK(fi_endpoint(dom, fi, &ep, NULL));
	CHECK(fi_ep_bind(ep, &(*cq)->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_ep_bind(ep, &av->fid, 0));
	CHECK(fi_enable(ep));
	return ep;
}

// Drive both endpoints' progress until cq has one completion.
static void wait_cq(struct fid_cq *cq, struct fid_cq *other)
{
	struct fi_cq_entry ent;
	struct timespec t0, t;
	ssize_t n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		n = fi_cq_read(cq, &ent, 1);
		if (n == 1)
			return;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(cq, &err, 0);
			fprintf(stderr, "fi_dmabuf_write: write failed: %s (prov errno %d)\n",
				fi_strerror(err.err), err.prov_errno);
			exit(1);
		}
		if (n != -FI_EAGAIN)
			CHECK((int)n);
		fi_cq_read(other, &ent, 0);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 60) {
			fprintf(stderr, "fi_dmabuf_write: no completion in 60 s\n");
			exit(1);
		}
	}
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

// Seconds for `count` writes of `size` from src to dst, BENCH_WINDOW in flight.
static double timed_writes(struct fid_ep *a, struct fid_cq *cqa, struct fid_cq *cqb,
			   fi_addr_t to, char *src, void *desc, char *dst, uint64_t key,
			   size_t size, size_t span, int count)
{
	int posted = 0, done = 0;
	double t0 = now();

	while (done < count) {
		while (posted < count && posted - done < BENCH_WINDOW) {
			size_t off = (size_t)posted * size % span;
			ssize_t ret = fi_write(a, src + off, size, desc, to,
					       (uint64_t)(uintptr_t)(dst + off), key, NULL);

			if (ret == -FI_EAGAIN)
				break;
			CHECK((int)ret);
			posted++;
		}
		struct fi_cq_entry ent[BENCH_WINDOW];
		ssize_t n = fi_cq_read(cqa, ent, BENCH_WINDOW);

		if (n > 0)
			done += (int)n;
		else if (n != -FI_EAGAIN)
			CHECK((int)n);
		fi_cq_read(cqb, ent, 0);
	}
	return now() - t0;
}

static void bench(struct fid_domain *dom, struct fid_ep *a, struct fid_cq *cqa,
		  struct fid_cq *cqb, fi_addr_t to, struct devbuf *src, struct devbuf *dst)
{
	size_t span = src->len, sizes[] = { 64 << 10, 1 << 20 };
	char *hsrc = aligned_alloc(4096, span), *hdst = aligned_alloc(4096, span);
	struct fid_mr *hsmr, *hdmr;

	if (!hsrc || !hdst)
		die("aligned_alloc");
	memset(hsrc, 1, span);
	memset(hdst, 0, span);
	CHECK(fi_mr_reg(dom, hsrc, span, FI_WRITE | FI_READ, 0, 0, 0, &hsmr, NULL));
	CHECK(fi_mr_reg(dom, hdst, span, FI_REMOTE_WRITE | FI_REMOTE_READ, 0, 0, 0, &hdmr, NULL));
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t size = sizes[i];
		int count = (int)((64u << 20) / size);
		double tdev = 0, thost = 0;

		for (int round = 0; round < 3; round++) {	// alternate, so both see the same machine
			tdev += timed_writes(a, cqa, cqb, to, src->map, fi_mr_desc(src->mr), dst->map,
					     fi_mr_key(dst->mr), size, span, count);
			thost += timed_writes(a, cqa, cqb, to, hsrc, fi_mr_desc(hsmr), hdst,
					      fi_mr_key(hdmr), size, span, count);
		}
		double mb = 3.0 * count * size / 1e6;

		printf("bench: %7zu B writes x %d x 3 rounds: devmem dma-buf MR %.1f MB/s, host MR %.1f MB/s, ratio %.3f\n",
		       size, count, mb / tdev, mb / thost, thost / tdev);
	}
	fi_close(&hsmr->fid);
	fi_close(&hdmr->fid);
	free(hsrc);
	free(hdst);
}

int main(int argc, char **argv)
{
	const char *domain = argc > 1 ? argv[1] : "rxe0";
	size_t len = (size_t)(argc > 2 ? atoi(argv[2]) : 8) << 20;
	struct fi_info *hints = fi_allocinfo(), *fi;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cqa, *cqb;
	struct fid_ep *a, *b;
	char addr[256];
	size_t alen = sizeof(addr);
	fi_addr_t to_b;
	int hm, ret;

	// rxm sizes its MSG CQs by the universe (default 256 peers): past rxe's max_cqe.
	setenv("FI_UNIVERSE_SIZE", "16", 0);
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->domain_attr->name = strdup(domain);
	hints->fabric_attr->prov_name = strdup("verbs;ofi_rxm");
	const char *node = argc > 3 ? argv[3] : NULL;

	ret = fi_getinfo(FI_VERSION(1, 20), node, NULL, node ? FI_SOURCE : 0, hints, &fi);
	if (ret) {
		printf("SKIP: no verbs;ofi_rxm on %s: %s\n", domain, fi_strerror(-ret));
		return 77;
	}
	printf("libfabric %u.%u, provider %s, domain %s\n", FI_MAJOR(fi_version()),
	       FI_MINOR(fi_version()), fi->fabric_attr->prov_name, fi->domain_attr->name);
	hm = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (hm < 0)
		die("open " HMEMREG_DEVICE_PATH);

	CHECK(fi_fabric(fi->fabric_attr, &fab, NULL));
	CHECK(fi_domain(fab, fi, &dom, NULL));
	struct fi_av_attr aa = { .type = FI_AV_TABLE };
	CHECK(fi_av_open(dom, &aa, &av, NULL));
	a = endpoint(fi, dom, av, &cqa);
	b = endpoint(fi, dom, av, &cqb);
	CHECK(fi_getname(&b->fid, addr, &alen));
	if (fi_av_insert(av, addr, 1, &to_b, 0, NULL) != 1)
		CHECK(-FI_EINVAL);

	struct devbuf src = devmem(hm, len), dst = devmem(hm, len);
	reg(dom, &src);
	reg(dom, &dst);
	printf("registered 2 x %zu MiB of devmem by dma-buf fd (FI_MR_DMABUF)\n", len >> 20);
	if (getenv("FI_DMABUF_LEDGER"))
		if (system(getenv("FI_DMABUF_LEDGER")))
			fprintf(stderr, "fi_dmabuf_write: ledger dump failed\n");

	for (size_t i = 0; i < len; i++)
		src.map[i] = (char)(i * 7 + (i >> 16));
	memset(dst.map, 0, len);
	// Several writes of 1 MiB, devmem -> devmem, no host buffer on either side.
	size_t chunk = 1 << 20;
	for (size_t off = 0; off < len; off += chunk) {
		size_t n = len - off < chunk ? len - off : chunk;

		do {
			ret = (int)fi_write(a, src.map + off, n, fi_mr_desc(src.mr), to_b,
					    (uint64_t)(uintptr_t)(dst.map + off), fi_mr_key(dst.mr),
					    NULL);
			if (ret == -FI_EAGAIN) {	// connecting: both sides progress
				fi_cq_read(cqa, NULL, 0);
				fi_cq_read(cqb, NULL, 0);
			}
		} while (ret == -FI_EAGAIN);
		CHECK(ret);
		wait_cq(cqa, cqb);
	}
	if (memcmp(src.map, dst.map, len)) {
		fprintf(stderr, "fi_dmabuf_write: destination devmem differs from the source\n");
		return 1;
	}
	printf("wrote %zu MiB devmem -> devmem through %s, verified through the devmem mmap\n",
	       len >> 20, fi->domain_attr->name);
	if (argc > 4 && !strcmp(argv[4], "bench"))
		bench(dom, a, cqa, cqb, to_b, &src, &dst);
	fi_close(&src.mr->fid);
	fi_close(&dst.mr->fid);
	fi_close(&a->fid);
	fi_close(&b->fid);
	fi_close(&cqa->fid);
	fi_close(&cqb->fid);
	fi_close(&av->fid);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	fi_freeinfo(fi);
	fi_freeinfo(hints);
	return 0;
}
