// SPDX-License-Identifier: MIT
#include "pointer_policy.hpp"

namespace hmemreg::nccl {

PointerPolicy choose_pointers(const PointerFacts &f)
{
	// Staging costs a copy each way on the copy engines: worth it between
	// processes of one host (shm), where NCCL's own host path costs its
	// kernels a copy too; over a NIC NCCL's host path is one copy.
	const std::string mode = f.setting != "auto" ? f.setting : f.provider == "shm" ? "staged" : "host";
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
			      (f.setting == "auto" ? ", HMEMREG_NCCL_DEVICE_MEMORY=auto)" : ")")};
}

} // namespace hmemreg::nccl
