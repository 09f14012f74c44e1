/* SPDX-License-Identifier: MIT */
/*
 * libhmemreg: what a program built against older libfabric headers (Debian
 * 12 ships 1.17) needs to register DMA-BUFs, and to pass fi_mr_attr safely,
 * when it runs on a newer libfabric (1.20 or later, through
 * LD_LIBRARY_PATH): the runtime's API version decides, not the headers.
 * Header-only; libhmemreg uses the same definitions itself.
 *
 *   struct hmemreg_fi_mr_attr a = {0};   (C++: hmemreg_fi_mr_attr a{};)
 *   hmemreg_fi_mr_dmabuf_t d = {fd, offset, len, base_addr};
 *   hmemreg_fi_mr_attr_set_dmabuf(&a, &d);
 *   a.attr.iov_count = 1; a.attr.access = ...; a.attr.iface = FI_HMEM_SYSTEM;
 *   fi_mr_regattr(domain, &a.attr, HMEMREG_FI_MR_DMABUF, &mr);
 *
 * Only on a fabric opened at API HMEMREG_FI_API_DMABUF or later
 * (fi_info->fabric_attr->api_version, or hmemreg_fabric_api_version() for
 * what libhmemreg itself opens): older versions read the flag as unknown.
 */
#ifndef HMEMREG_FABRIC_COMPAT_H
#define HMEMREG_FABRIC_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The first API version with FI_MR_DMABUF and struct fi_mr_dmabuf. */
#define HMEMREG_FI_API_DMABUF FI_VERSION(1, 20)

#ifdef FI_MR_DMABUF
#define HMEMREG_FI_MR_DMABUF FI_MR_DMABUF
typedef struct fi_mr_dmabuf hmemreg_fi_mr_dmabuf_t;
#else
/* The values and layout of libfabric 1.20's fi_domain.h (its public ABI):
 * the registered range is [base_addr + offset, + len) of DMA-BUF fd. */
#define HMEMREG_FI_MR_DMABUF (1ULL << 40)
typedef struct hmemreg_fi_mr_dmabuf {
	int fd;
	uint64_t offset;
	size_t len;
	void *base_addr;
} hmemreg_fi_mr_dmabuf_t;
#endif

/*
 * fi_mr_attr with zeroed room behind it: a provider reads the fields that
 * newer API versions append (1.19 hmem_data, 1.22 page_size, 2.0 base_mr
 * and sub_mr_cnt) at the version the fabric was opened with, beyond the
 * sizeof of older headers. Zero reads as "not set" for each of them.
 */
struct hmemreg_fi_mr_attr {
	struct fi_mr_attr attr;
	uint64_t newer[8];
};

/* In 1.20+ headers mr_iov and dmabuf are one union, the first member. */
static inline void hmemreg_fi_mr_attr_set_dmabuf(struct hmemreg_fi_mr_attr *a, const hmemreg_fi_mr_dmabuf_t *d)
{
	a->attr.mr_iov = (const struct iovec *)(const void *)d;
}

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_FABRIC_COMPAT_H */
