// SPDX-License-Identifier: MIT
// hmemreg_bench reg --mem export: hmemreg.ko device memory exports (public
// C API, hmemreg/export.h), per provider and size. "cold" = fi_mr_regattr
// with FI_MR_DMABUF on the export's fd + fi_close straight on the domain
// (the import and its unpin, every time), "miss" = a cache get that
// registers (after an invalidate), "hit" = a cached hmemreg_mr_get_export +
// put. speedup = cold / this, from the same run. Needs libfabric >= 1.20
// (LD_LIBRARY_PATH) and the module loaded with a devmem pool.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>

#include "bench.hpp"
#include "bench_reg.hpp"
#include "domain.hpp"
#include "hmemreg/fabric_compat.h"
#include "hmemreg/hmemreg.h"

namespace hmemreg::bench {

int reg_export_main(const RegOptions &o, Printer &out)
{
	std::vector<uint64_t> sizes = o.sizes;
	if (sizes.empty())
		sizes = {64 << 10, 1 << 20, 8 << 20};
	const long iters = o.iters ? o.iters : 100;
	if (hmemreg_fabric_api_version() < HMEMREG_FI_API_DMABUF) {
		std::fprintf(stderr, "hmemreg_bench reg --mem export: libfabric API < 1.20 here (no FI_MR_DMABUF): "
				     "put libfabric >= 1.20 on LD_LIBRARY_PATH\n");
		return 1;
	}
	out.section("reg: cold registration vs cache miss vs cache hit (ns per op), hmemreg.ko devmem exports "
		    "(FI_MR_DMABUF)");
	int bad = 0;
	for (const auto &prov : o.providers) {
		CachedDomain cd;
		if (cd.open("hmemreg_bench reg --mem export", prov, "bench-reg-export")) {
			bad++;
			continue;
		}
		const Domain &f = cd.dom;
		hmemreg_cache *c = cd.cache;
		for (uint64_t sz : sizes) {
			hmemreg_export_t *x = nullptr;
			if (int rc = hmemreg_export_devmem(sz, &x)) {
				std::fprintf(stderr, "hmemreg_bench reg --mem export: hmemreg_export_devmem(%llu bytes): %s (%d)\n",
					     static_cast<unsigned long long>(sz), hmemreg_export_last_error(), rc);
				bad++;
				continue;
			}
			void *addr = hmemreg_export_addr(x);
			long n = sz >= (8 << 20) ? std::max(10L, iters / 10) : iters;
			const ColdMissHit v = measure_cold_miss_hit(
				c, HMEMREG_IFACE_KMOD_EXPORT, addr, sz, n, iters * 100,
				[&] {
					hmemreg_fi_mr_dmabuf_t d{hmemreg_export_fd(x), 0, sz, addr};
					hmemreg_fi_mr_attr a{};
					hmemreg_fi_mr_attr_set_dmabuf(&a, &d);
					a.attr.iov_count = 1;
					a.attr.access = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
					a.attr.iface = FI_HMEM_SYSTEM;
					fid_mr *mr;
					if (fi_mr_regattr(f.domain, &a.attr, HMEMREG_FI_MR_DMABUF, &mr))
						return false;
					return fi_close(&mr->fid) == 0;
				},
				[&](hmemreg_mr &m) { return hmemreg_mr_get_export(c, x, 0, sz, &m); });
			if (!print_cold_miss_hit(out, prov, "export", sz, v))
				bad++;
			hmemreg_cache_flush(c);
			if (hmemreg_export_free(x))
				bad++;
		}
	}
	return bad ? 1 : 0;
}

} // namespace hmemreg::bench
