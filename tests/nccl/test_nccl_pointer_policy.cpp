// SPDX-License-Identifier: MIT
// Which buffers NCCL may hand the plugin (plugins/nccl/src/pointer_policy.cpp),
// per provider and compute capability: never device memory to a provider
// that would copy it with CUDA calls; GPU buffers to a NIC that writes them
// itself, with DMABUF where it registers DMA-BUFs and iflush's read-back
// where NCCL will ask for it; staged device memory only when asked; every
// answer says why.
#include <string>

#include <criterion/criterion.h>

#include "pointer_policy.hpp"

using hmemreg::nccl::choose_pointers;
using hmemreg::nccl::nccl_flushes;
using hmemreg::nccl::PointerFacts;

namespace {

bool says(const std::string &why, const char *what)
{
	return why.find(what) != std::string::npos;
}

// What the engine reports for a provider, with a CUDA driver loaded.
PointerFacts facts(const char *setting, const char *prov)
{
	PointerFacts f;
	f.setting = setting;
	f.provider = prov;
	f.cuda = true;
	const std::string p = prov;
	if (p == "shm" || p == "tcp;ofi_rxm" || p == "verbs;ofi_rxm") {
		// They refuse FI_OPT_CUDA_API_PERMITTED = false (shm and tcp copy
		// device memory with cudaMemcpy, rxm through its bounce buffers).
		f.direct_why_not = "provider " + p + " refuses FI_OPT_CUDA_API_PERMITTED = false (Operation not supported)";
	} else { // efa, verbs (rdm core), cxi: the NIC writes GPU memory itself
		f.provider_direct = true;
		f.dmabuf = true;
		f.read_back = true;
	}
	return f;
}

} // namespace

Test(nccl_pointer_policy, nccl_flushes_below_hopper_or_when_forced)
{
	cr_assert(nccl_flushes(70, false));
	cr_assert(nccl_flushes(80, false));
	cr_assert(nccl_flushes(89, false));
	cr_assert_not(nccl_flushes(90, false));
	cr_assert_not(nccl_flushes(100, false));
	cr_assert(nccl_flushes(90, true));
	cr_assert(nccl_flushes(0, false), "unknown capability: assume NCCL flushes");
}

Test(nccl_pointer_policy, providers_that_copy_with_cuda_stay_host_and_say_why)
{
	for (const char *prov : {"shm", "tcp;ofi_rxm", "verbs;ofi_rxm"}) {
		auto p = choose_pointers(facts("auto", prov));
		cr_assert_not(p.device, "%s", prov);
		cr_assert_not(p.dmabuf || p.read_back, "%s", prov);
		cr_assert(says(p.why, prov) && says(p.why, "FI_OPT_CUDA_API_PERMITTED"), "%s", p.why.c_str());
	}
}

Test(nccl_pointer_policy, a_nic_writing_device_memory_gets_gpu_buffers_with_read_back)
{
	for (int cc : {70, 80, 86, 90, 100}) {
		auto p = choose_pointers([&] {
			auto f = facts("auto", "efa");
			f.min_compute_capability = cc;
			return f;
		}());
		cr_assert(p.device && p.dmabuf && p.read_back, "cc %d: %s", cc, p.why.c_str());
		cr_assert(says(p.why, "GPUDirect RDMA") && says(p.why, "regMrDmaBuf") && says(p.why, "fi_read"), "%s",
			  p.why.c_str());
	}
}

Test(nccl_pointer_policy, no_dmabuf_below_api_1_20)
{
	auto f = facts("auto", "verbs");
	f.dmabuf = false;
	auto p = choose_pointers(f);
	cr_assert(p.device && !p.dmabuf && p.read_back);
	cr_assert(says(p.why, "no DMA-BUF registration"), "%s", p.why.c_str());
}

// Without FI_READ, Inline and eager data could reach GPU memory only
// through CUDA calls: host buffers at every compute capability, even where
// NCCL never flushes.
Test(nccl_pointer_policy, without_read_back_no_gpu_buffers)
{
	for (int cc : {80, 86, 0, 90, 100})
		for (bool force : {false, true}) {
			auto f = facts("auto", "efa");
			f.read_back = false;
			f.min_compute_capability = cc;
			f.force_flush = force;
			auto p = choose_pointers(f);
			cr_assert_not(p.device || p.dmabuf || p.read_back, "cc %d force %d: %s", cc, force, p.why.c_str());
			cr_assert(says(p.why, "FI_READ") && says(p.why, "Inline and eager"), "%s", p.why.c_str());
		}
	auto f = facts("auto", "efa");
	f.min_compute_capability = 90;
	auto p = choose_pointers(f);
	cr_assert(p.device && says(p.why, "land through the NIC") && says(p.why, "no flush"), "%s", p.why.c_str());
}

Test(nccl_pointer_policy, the_setting_decides_when_given)
{
	auto f = facts("staged", "shm");
	auto s = choose_pointers(f);
	cr_assert(s.device && !s.read_back);
	cr_assert(says(s.why, "staged") && says(s.why, "eagerly") && !says(s.why, "refused"), "%s", s.why.c_str());
	// CUDA_MODULE_LOADING=LAZY: staging would hang under NCCL (a first
	// launch holds the copies), so host buffers, and the log names the way out.
	f.lazy_loading = true;
	s = choose_pointers(f);
	cr_assert_not(s.device || s.dmabuf || s.read_back, "%s", s.why.c_str());
	cr_assert(says(s.why, "refused") && says(s.why, "lazily") && says(s.why, "CUDA_MODULE_LOADING=EAGER"), "%s",
		  s.why.c_str());
	for (const char *prov : {"shm", "efa"}) {
		auto p = choose_pointers(facts("host", prov));
		cr_assert_not(p.device || p.dmabuf || p.read_back, "%s", prov);
		cr_assert(says(p.why, "HMEMREG_NCCL_DEVICE_MEMORY=host"), "%s", p.why.c_str());
	}
}

Test(nccl_pointer_policy, no_cuda_driver_no_device_memory)
{
	for (const char *mode : {"auto", "staged"}) {
		auto f = facts(mode, "efa");
		f.cuda = false;
		f.cuda_why_not = "libcuda.so.1 not found";
		auto p = choose_pointers(f);
		cr_assert_not(p.device || p.dmabuf || p.read_back);
		cr_assert(says(p.why, "libcuda.so.1 not found"), "%s", p.why.c_str());
	}
}
