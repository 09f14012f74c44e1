// SPDX-License-Identifier: MIT
// Whether NCCL may hand the plugin GPU buffers (ptrSupport CUDA|DMABUF,
// NCCL's GDR), from the setting and what the engine found.
//
// NCCL's kernels spin on the GPU until the proxy thread's test() says their
// data is in; PyTorch meanwhile queues work on the legacy default stream
// that waits for those kernels. A CUDA call on that path that syncs the
// legacy stream (shm's and tcp's cudaMemcpy, rxm's bounce copies,
// cuMemcpyHtoD, cuStreamSynchronize(CU_STREAM_LEGACY)) therefore waits for
// itself. So the provider never copies device memory for us: the engine asks
// every rail for FI_OPT_CUDA_API_PERMITTED = false, and where a provider
// refuses, device memory is staged on the engine's own non-blocking streams.
#pragma once

#include <string>

namespace hmemreg::nccl {

struct PointerFacts {
	std::string setting;      // HMEMREG_NCCL_DEVICE_MEMORY: auto, staged, host
	std::string provider;     // the engine's provider
	bool cuda = false;        // a CUDA driver is loaded
	std::string cuda_why_not; // when not
	bool provider_direct = false; // the provider takes device memory itself, with no CUDA call (a NIC)
};

struct PointerPolicy {
	bool device = false; // NCCL_PTR_CUDA | NCCL_PTR_DMABUF too
	std::string why;     // said in NCCL's INFO log either way
};

PointerPolicy choose_pointers(const PointerFacts &f);

} // namespace hmemreg::nccl
