// SPDX-License-Identifier: MIT
// Whether NCCL may hand the plugin GPU buffers (ptrSupport CUDA|DMABUF,
// NCCL's GDR), from the setting and what the engine found.
//
// With GPU buffers through shm, PyTorch's collectives hung on the H200
// (two ranks on one GPU, with MPS and without): with shm's own cudaMemcpy,
// and again with the engine staging and the plugin landing data on
// non-blocking streams of their own, where a landing copy's event stayed
// unfinished for the whole run while no thread was blocked in CUDA. A copy
// behind spinning kernels, this process's and another's, finishes in
// 0.1-2.2 ms (tests/gpu/copy_behind_spin.py), so CUDA alone does not explain
// it: not found yet (README, known issues). Host buffers ran every
// collective exactly. So NCCL gets device pointers only where asked
// (HMEMREG_NCCL_DEVICE_MEMORY=staged: for drivers without NCCL's kernels,
// hmemreg_bench nccl and the GPU lane), and a NIC that writes GPU memory
// itself waits for the read-back flush it needs. The engine asks every
// rail for FI_OPT_CUDA_API_PERMITTED = false all the same.
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
