// SPDX-License-Identifier: MIT
#include "pointer_policy.hpp"

namespace hmemreg::nccl {

bool nccl_flushes(int min_compute_capability, bool force_flush)
{
	return force_flush || min_compute_capability < 90;
}

namespace {

std::string capability_text(int cc)
{
	return cc ? std::to_string(cc / 10) + "." + std::to_string(cc % 10) : std::string("unknown");
}

} // namespace

PointerPolicy choose_pointers(const PointerFacts &f)
{
	if (f.setting == "host")
		return {false, false, false, "HMEMREG_NCCL_DEVICE_MEMORY=host"};
	if (!f.cuda)
		return {false, false, false, "no CUDA driver: " + f.cuda_why_not};
	if (f.setting == "staged" && f.lazy_loading)
		return {false, false, false,
			"HMEMREG_NCCL_DEVICE_MEMORY=staged refused: CUDA loads kernels lazily here "
			"(CUDA_MODULE_LOADING=LAZY), and a kernel's first launch while NCCL's kernels spin holds "
			"every later copy in the process, the engine's staging copy too, so NCCL would hang; "
			"CUDA_MODULE_LOADING=EAGER lets the setting take effect"};
	if (f.setting == "staged")
		return {true, true, false,
			"device memory staged by the engine on its own streams (provider " + f.provider +
				", HMEMREG_NCCL_DEVICE_MEMORY=staged, kernels loaded eagerly: a module loaded while "
				"NCCL's kernels spin still holds every CUDA call of the process)"};
	if (!f.provider_direct)
		return {false, false, false,
			"provider " + f.provider + " does not write device memory without CUDA calls (" +
				(f.direct_why_not.empty() ? std::string("no FI_HMEM") : f.direct_why_not) +
				"), and a CUDA call can wait behind NCCL's kernels; HMEMREG_NCCL_DEVICE_MEMORY=staged "
				"stages it instead"};
	if (!f.read_back)
		return {false, false, false,
			"provider " + f.provider + " writes device memory itself (GPUDirect RDMA), but its rails cannot "
			"read their own registrations (no FI_READ): Inline and eager data would reach device memory "
			"only through CUDA calls, and iflush could not read back"};
	std::string why = "GPUDirect RDMA: provider " + f.provider +
			  " registers device memory and makes no CUDA call (FI_OPT_CUDA_API_PERMITTED = false); ";
	why += f.dmabuf ? "regMrDmaBuf registers NCCL's DMA-BUF (FI_MR_DMABUF); "
			: "no DMA-BUF registration (libfabric API < 1.20 or no FI_MR_DMABUF): by address; ";
	why += "Inline and eager data land through the NIC (fi_read from its own endpoint); ";
	why += nccl_flushes(f.min_compute_capability, f.force_flush)
		       ? "iflush reads back from each rail (fi_read)"
		       : "NCCL asks for no flush here (compute capability " +
				 capability_text(f.min_compute_capability) + ")";
	return {true, f.dmabuf, true, why};
}

} // namespace hmemreg::nccl
