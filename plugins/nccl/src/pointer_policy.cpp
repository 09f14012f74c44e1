// SPDX-License-Identifier: MIT
#include "pointer_policy.hpp"

namespace hmemreg::nccl {

PointerPolicy choose_pointers(const PointerFacts &f)
{
	// auto: host until a NIC path with its read-back flush exists (the
	// header says why staging is not the default).
	const std::string mode = f.setting == "staged" ? "staged" : "host";
	if (!f.cuda)
		return {false, "no CUDA driver: " + f.cuda_why_not};
	if (f.provider_direct)
		return {false, "provider " + f.provider +
				       " writes device memory itself (GPUDirect RDMA), which needs a read-back flush "
				       "that iflush does not do yet"};
	if (mode == "host")
		return {false, "HMEMREG_NCCL_DEVICE_MEMORY=host" +
				       std::string(f.setting == "auto" ? " (auto, provider " + f.provider + ")" : "")};
	return {true, "device memory staged by the engine on its own streams (provider " + f.provider +
			      ", HMEMREG_NCCL_DEVICE_MEMORY=staged: can hang while NCCL's kernels spin)"};
}

} // namespace hmemreg::nccl
