// SPDX-License-Identifier: MIT
// Whether NCCL may hand the plugin GPU buffers (ptrSupport CUDA|DMABUF,
// NCCL's GDR), from the setting and what the engine found.
//
// NCCL's kernels spin on the GPU until the proxy thread's test() says their
// data is in. With GPU buffers through shm, PyTorch's collectives hung on
// the H200 (two ranks on one GPU, with MPS and without): first with shm's
// own cudaMemcpy, then with the engine staging and the plugin landing data
// on non-blocking streams of their own, whose copies stayed unfinished for
// the 60 s of the run while no thread was blocked in CUDA. One process's
// copy behind its own spinning kernel finishes in 0.1 ms
// (tests/gpu/copy_behind_spin.py), so the cause lies with the second rank
// on the GPU; not found further. Only a NIC that writes GPU memory itself
// (GPUDirect RDMA, no CUDA call) moves device data under NCCL; until the
// plugin has the read-back flush such a NIC needs, NCCL keeps its buffers
// on the host path. HMEMREG_NCCL_DEVICE_MEMORY=staged offers them anyway,
// for drivers without NCCL's kernels (hmemreg_bench nccl, the GPU lane).
#pragma once

#include <string>

namespace hmemreg::nccl {

struct PointerFacts {
	std::string setting;      // HMEMREG_NCCL_DEVICE_MEMORY: auto (host), staged, host
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
