// SPDX-License-Identifier: MIT
// The libfabric registrar against a real provider (tcp on this machine;
// the VM lane runs verbs over Soft-RoCE with the same checks plus pinning).
// HMEMREG_TEST_PROV picks the provider (default "tcp").
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "hmemreg/hmemreg.h"

static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;

static void open_domain(void)
{
	const char *prov = getenv("HMEMREG_TEST_PROV");
	struct fi_info *hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup(prov && *prov ? prov : "tcp");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	int rc = fi_getinfo(hmemreg_fabric_api_version(), NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (rc)
		cr_skip_test("no %s provider here: %s", prov ? prov : "tcp", fi_strerror(-rc));
	cr_assert_eq(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	cr_assert_eq(fi_domain(fabric, info, &domain, NULL), 0);
}

static void close_domain(void)
{
	if (domain)
		cr_assert_eq(fi_close(&domain->fid), 0, "domain busy: a registration leaked");
	if (fabric)
		fi_close(&fabric->fid);
	if (info)
		fi_freeinfo(info);
	domain = NULL;
	fabric = NULL;
	info = NULL;
}

TestSuite(cache_fabric, .init = open_domain, .fini = close_domain);

static struct hmemreg_cache *make(uint32_t monitor)
{
	struct hmemreg_cache_config cfg;
	hmemreg_cache_config_init(&cfg);
	cfg.monitor = monitor;
	cfg.publish_stats = 0;
	struct hmemreg_cache *c = NULL;
	int rc = hmemreg_cache_create_fabric_info(domain, info, &cfg, &c);
	cr_assert_eq(rc, 0, "%s", hmemreg_strerror(rc));
	return c;
}

Test(cache_fabric, create_with_info_checks_it)
{
	struct hmemreg_cache *c = NULL;
	cr_assert_eq(hmemreg_cache_create_fabric_info(domain, NULL, NULL, &c), -HMEMREG_EINVAL);
	uint32_t v = info->fabric_attr->api_version;
	info->fabric_attr->api_version = fi_version() + 1; /* newer than the runtime */
	cr_assert_eq(hmemreg_cache_create_fabric_info(domain, info, NULL, &c), -HMEMREG_EINVAL);
	info->fabric_attr->api_version = v;
	cr_assert_null(c);
	/* The version libhmemreg negotiates is one this runtime accepts. */
	cr_assert_leq(hmemreg_fabric_api_version(), fi_version());
	cr_assert_geq(hmemreg_fabric_api_version(), FI_VERSION(1, 17));
}

Test(cache_fabric, registers_with_the_provider_and_caches)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_UFFD);
	size_t len = 1 << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(p, 1, len);
	struct hmemreg_mr a, b;
	cr_assert_eq(hmemreg_mr_get(c, p, len, &a), 0);
	cr_assert_not_null(a.mr, "a real fid_mr");
	cr_assert_eq(a.mr->fid.fclass, FI_CLASS_MR);
	cr_assert_eq(fi_mr_key(a.mr), a.key);
	cr_assert_eq(fi_mr_desc(a.mr), a.desc);
	cr_assert_eq(hmemreg_mr_get(c, p + 4096, 100, &b), 0);
	cr_assert_eq(a.mr, b.mr, "covered: same registration");
	hmemreg_mr_put(c, &a);
	hmemreg_mr_put(c, &b);
	struct hmemreg_cache_stats st;
	hmemreg_cache_get_stats(c, &st);
	cr_assert_eq(st.registrations, 1);
	cr_assert_eq(st.hits, 1);
	cr_assert_str_eq(st.registrar, "libfabric");

	/* memory goes away and comes back at the same address: a new MR */
	munmap(p, len);
	char *q = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	cr_assert_eq(q, p);
	cr_assert_eq(hmemreg_mr_get(c, q, len, &a), 0);
	hmemreg_cache_get_stats(c, &st);
	cr_assert_eq(st.registrations, 2, "munmap+mmap must miss");
	cr_assert_eq(st.deregistrations, 1, "the stale MR was closed");
	hmemreg_mr_put(c, &a);
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
	munmap(q, len);
}

/* VmPin of this process in KiB (pages pinned by RDMA registrations). */
static long vm_pin_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* Providers whose registrations pin pages (verbs) show it in VmPin: the
 * cache's entry keeps them pinned while cached, and releasing the entry
 * unpins them (the provider's own cache is off: its monitors are disabled). */
Test(cache_fabric, registrations_pin_and_release_pages)
{
	const char *pin = getenv("HMEMREG_TEST_EXPECT_PIN");
	if (!pin || strcmp(pin, "1"))
		cr_skip_test("this provider does not pin pages (VM lane runs verbs over rxe with HMEMREG_TEST_EXPECT_PIN=1)");
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_AUTO);
	size_t len = 8 << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(p, 1, len);
	long before = vm_pin_kb();
	struct hmemreg_mr mr;
	cr_assert_eq(hmemreg_mr_get(c, p, len, &mr), 0);
	hmemreg_mr_put(c, &mr);
	long cached = vm_pin_kb();
	cr_assert_geq(cached - before, (long)(len >> 10), "registration pinned %ld KiB, expected %zu", cached - before, len >> 10);
	cr_assert_eq(hmemreg_mr_get(c, p, len, &mr), 0); /* hit: nothing new pinned */
	hmemreg_mr_put(c, &mr);
	cr_assert_eq(vm_pin_kb(), cached);
	cr_assert_eq(hmemreg_cache_flush(c), 1);
	cr_assert_eq(vm_pin_kb(), before, "deregistration unpinned");
	/* invalidation by unmap also unpins (at the next cache call) */
	cr_assert_eq(hmemreg_mr_get(c, p, len, &mr), 0);
	hmemreg_mr_put(c, &mr);
	cr_assert_eq(vm_pin_kb(), cached);
	munmap(p, len);
	char *o = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_eq(hmemreg_mr_get(c, o, 8, &mr), 0);
	hmemreg_mr_put(c, &mr);
	cr_assert_leq(vm_pin_kb(), before + 4, "the unmapped entry was deregistered");
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
	cr_assert_eq(vm_pin_kb(), before);
	munmap(o, 4096);
}

Test(cache_fabric, provider_errors_are_reported)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE);
	struct hmemreg_mr_request rq = {.size = sizeof(rq), .iface = HMEMREG_IFACE_CUDA, .device = 0,
					.addr = (void *)0x100000, .len = 4096, .dmabuf_fd = -1};
	struct hmemreg_mr mr;
	int rc = hmemreg_mr_get_req(c, &rq, &mr);
	/* The domain was opened without FI_HMEM (the cache knows from its fi_info):
	 * refused here, whatever the provider would make of the pointer (2.x tcp
	 * takes it for host memory). */
	cr_assert_eq(rc, -HMEMREG_ENOTSUP, "CUDA memory on a domain without FI_HMEM must fail: %d", rc);
	cr_assert_str_neq(hmemreg_strerror(rc), "unknown hmemreg error");
	struct hmemreg_cache_stats st;
	hmemreg_cache_get_stats(c, &st);
	cr_assert_eq(st.registration_failures, 1);
	cr_assert_eq(st.entries, 0);
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
}

Test(cache_fabric, destroy_closes_every_mr)
{
	struct hmemreg_cache *c = make(HMEMREG_MONITOR_NONE);
	static char buf[16][8192] __attribute__((aligned(4096)));
	struct hmemreg_mr mr;
	for (int i = 0; i < 16; i++) {
		cr_assert_eq(hmemreg_mr_get(c, buf[i], sizeof(buf[i]), &mr), 0);
		hmemreg_mr_put(c, &mr);
	}
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
	/* close_domain() fails if any MR is still open */
}
