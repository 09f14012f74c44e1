// SPDX-License-Identifier: MIT
// Which buffers NCCL may hand the plugin (plugins/nccl/src/pointer_policy.cpp):
// never device memory to a provider that would copy it with CUDA calls, nor
// to a NIC while the read-back flush is missing; staged device memory only
// when asked; every answer says why.
#include <string>

#include <criterion/criterion.h>

#include "pointer_policy.hpp"

using hmemreg::nccl::choose_pointers;
using hmemreg::nccl::PointerFacts;

namespace {

bool says(const std::string &why, const char *what)
{
	return why.find(what) != std::string::npos;
}

} // namespace

Test(nccl_pointer_policy, no_device_memory_by_default)
{
	for (const char *prov : {"shm", "tcp;ofi_rxm", "verbs;ofi_rxm", "efa"}) {
		auto p = choose_pointers({"auto", prov, true, "", false});
		cr_assert_not(p.device, "%s", prov);
		cr_assert(says(p.why, "HMEMREG_NCCL_DEVICE_MEMORY=host") && says(p.why, prov), "%s", p.why.c_str());
	}
}

Test(nccl_pointer_policy, the_setting_decides_when_given)
{
	auto s = choose_pointers({"staged", "shm", true, "", false});
	cr_assert(s.device);
	cr_assert(says(s.why, "staged") && says(s.why, "hang"), "%s", s.why.c_str());
	auto p = choose_pointers({"host", "shm", true, "", false});
	cr_assert_not(p.device);
	cr_assert(says(p.why, "HMEMREG_NCCL_DEVICE_MEMORY=host") && !says(p.why, "auto"), "%s", p.why.c_str());
}

Test(nccl_pointer_policy, no_cuda_driver_no_device_memory)
{
	auto p = choose_pointers({"staged", "shm", false, "libcuda.so.1 not found", false});
	cr_assert_not(p.device);
	cr_assert(says(p.why, "libcuda.so.1 not found"), "%s", p.why.c_str());
}

Test(nccl_pointer_policy, a_nic_writing_device_memory_needs_the_missing_flush)
{
	for (const char *mode : {"auto", "staged"}) {
		auto p = choose_pointers({mode, "efa", true, "", true});
		cr_assert_not(p.device, "%s", mode);
		cr_assert(says(p.why, "flush"), "%s", p.why.c_str());
	}
}
