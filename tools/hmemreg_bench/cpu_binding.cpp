// SPDX-License-Identifier: MIT
#include "cpu_binding.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <hwloc.h>

namespace hmemreg::bench {

struct CpuBinding::Impl {
	hwloc_topology_t topo = nullptr;
	bool ok = false;
	Impl() { ok = hwloc_topology_init(&topo) == 0 && hwloc_topology_load(topo) == 0; }
	~Impl()
	{
		if (topo)
			hwloc_topology_destroy(topo);
	}
};

namespace {

struct Bitmap {
	hwloc_bitmap_t b = hwloc_bitmap_alloc();
	~Bitmap() { hwloc_bitmap_free(b); }
	Bitmap() = default;
	Bitmap(const Bitmap &) = delete;
	Bitmap &operator=(const Bitmap &) = delete;
};

std::string list_of(hwloc_const_bitmap_t b)
{
	char *s = nullptr;
	if (hwloc_bitmap_list_asprintf(&s, b) < 0 || !s)
		return "?";
	std::string out(s);
	std::free(s);
	return out;
}

} // namespace

CpuBinding::CpuBinding() = default;
CpuBinding::~CpuBinding() = default;

bool CpuBinding::set(const std::string &arg, std::string &err)
{
	cpus_.clear();
	if (arg == "none")
		return true;
	if (!impl_) // (loaded on first use: other subcommands never pay for it)
		impl_ = std::make_unique<Impl>();
	if (!impl_->ok) {
		err = "cannot read this machine's CPUs (hwloc)";
		return false;
	}
	Bitmap allowed, want;
	if (hwloc_get_cpubind(impl_->topo, allowed.b, HWLOC_CPUBIND_PROCESS) < 0) {
		err = std::string("cannot read this process's CPUs: ") + std::strerror(errno);
		return false;
	}
	if (arg == "auto") {
		hwloc_bitmap_copy(want.b, allowed.b);
	} else if (arg.empty() || arg.find_first_not_of("0123456789,-") != std::string::npos ||
		   hwloc_bitmap_list_sscanf(want.b, arg.c_str()) < 0 || hwloc_bitmap_iszero(want.b)) {
		err = "'" + arg + "' is not a CPU list (such as 0-3,8), auto or none";
		return false;
	} else if (!hwloc_bitmap_isincluded(want.b, allowed.b)) {
		Bitmap outside;
		hwloc_bitmap_andnot(outside.b, want.b, allowed.b);
		err = "CPU " + list_of(outside.b) + " is not one this process may run on (" + list_of(allowed.b) + ")";
		return false;
	}
	for (int c = hwloc_bitmap_first(want.b); c >= 0; c = hwloc_bitmap_next(want.b, c))
		cpus_.push_back(static_cast<unsigned>(c));
	return true;
}

bool CpuBinding::bind(int t, std::string &err) const
{
	if (cpus_.empty())
		return true;
	const unsigned cpu = cpus_[static_cast<size_t>(t) % cpus_.size()];
	Bitmap one;
	hwloc_bitmap_only(one.b, cpu);
	if (hwloc_set_cpubind(impl_->topo, one.b, HWLOC_CPUBIND_THREAD) < 0) {
		err = "cannot bind thread " + std::to_string(t) + " to CPU " + std::to_string(cpu) + ": " +
		      std::strerror(errno);
		return false;
	}
	return true;
}

std::string CpuBinding::list() const
{
	if (cpus_.empty())
		return "none";
	Bitmap b;
	for (unsigned c : cpus_)
		hwloc_bitmap_set(b.b, c);
	return list_of(b.b);
}

} // namespace hmemreg::bench
