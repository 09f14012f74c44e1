// SPDX-License-Identifier: MIT
#include "fabric/av.hpp"

#include "fabric/error.hpp"

namespace hmemreg::fabric {

AddressVector::AddressVector(fid_domain *domain, size_t count_hint)
{
	fi_av_attr attr{};
	attr.type = FI_AV_UNSPEC;
	attr.count = count_hint;
	fid_av *av = nullptr;
	check(fi_av_open(domain, &attr, &av, nullptr), "fi_av_open");
	av_ = Fid<fid_av>(av);
}

fi_addr_t AddressVector::insert(const void *name)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int n = fi_av_insert(av_.get(), name, 1, &a, 0, nullptr);
	if (n != 1)
		check(n < 0 ? n : -FI_EINVAL, "fi_av_insert");
	return a;
}

void AddressVector::remove(fi_addr_t addr)
{
	check(fi_av_remove(av_.get(), &addr, 1, 0), "fi_av_remove");
}

} // namespace hmemreg::fabric
