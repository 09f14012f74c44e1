// SPDX-License-Identifier: MIT
// Whether NCCL may hand the plugin GPU buffers (ptrSupport CUDA|DMABUF,
// NCCL's GDR), from the setting and what the engine found.
//
// With GPU buffers through shm, PyTorch's collectives hung on the H200
// (two ranks on one GPU, with MPS and without): with shm's own cudaMemcpy,
// and again with the engine staging and the plugin landing data on
// non-blocking streams of their own. The plugin's stall report names the
// one edge of the cycle that does not move: rank 0's 64 KiB eager landing
// (host slot -> NCCL's GPU buffer, cuMemcpyHtoDAsync on our stream) stays
// queued for the whole run, so NCCL's kernel there never posts its next
// send, for which rank 1 waits. Not the hardware queues: a copy with 0-33
// streams made between a spinning kernel's and its own, at 4, 8 and 32
// CUDA_DEVICE_MAX_CONNECTIONS, finished in 0.01-0.1 ms every time, and the
// hang stays with 32 connections (tests/gpu/copy_behind_spin.py --sweep,
// 2026-12-05). Why the driver holds that copy is not found (README, known
// issues). Host buffers ran every collective exactly. So a provider that
// would copy device memory with CUDA calls (it refuses FI_OPT_CUDA_API_PERMITTED = false: shm, tcp, ofi_rxm,
// whose bounce buffers copy with CUDA) never gets device memory, and staged
// device memory is offered only where asked (HMEMREG_NCCL_DEVICE_MEMORY=
// staged: for drivers without NCCL's kernels, hmemreg_bench nccl and the
// GPU lane).
//
// A provider that accepts FI_OPT_CUDA_API_PERMITTED = false and registers
// device memory itself (FI_HMEM: a NIC writing GPU memory, GPUDirect RDMA)
// gets NCCL's GPU buffers by default, with DMABUF where the engine
// registers through FI_MR_DMABUF (libfabric API >= 1.20), provided iflush
// can read back what the NIC wrote (its completion may come while the data
// is still on its way into GPU memory; NCCL asks for the read-back below
// compute capability 9.0, or when forced). Inline and eager data, which
// come through host memory, reach its device buffers through the NIC too
// (an RDMA READ from its own endpoint: recv_landing.cpp), so nothing on
// this path calls CUDA; that needs FI_READ, as the read-back does. Not
// yet run under NCCL on a real NIC (none here).
#pragma once

#include <string>

namespace hmemreg::nccl {

struct PointerFacts {
	std::string setting;      // HMEMREG_NCCL_DEVICE_MEMORY: auto, staged, host
	std::string provider;     // the engine's provider
	bool cuda = false;        // a CUDA driver is loaded
	std::string cuda_why_not; // when not
	// The provider registers device memory (FI_HMEM) and accepted
	// FI_OPT_CUDA_API_PERMITTED = false on every rail: it moves GPU bytes
	// with the NIC alone.
	bool provider_direct = false;
	std::string direct_why_not{}; // the engine's reason when not
	bool dmabuf = false;        // device memory registers through FI_MR_DMABUF
	bool read_back = false;     // the rails can fi_read their own registrations (iflush)
	// The lowest compute capability of the process's GPUs (major * 10 +
	// minor), 0 where unknown; NCCL_NET_FORCE_FLUSH=1 in the environment.
	int min_compute_capability = 0;
	bool force_flush = false;
};

struct PointerPolicy {
	bool device = false;    // NCCL_PTR_CUDA
	bool dmabuf = false;    // NCCL_PTR_DMABUF too (regMrDmaBuf registers NCCL's fd)
	bool read_back = false; // iflush reads back device buffers the NIC wrote
	std::string why;        // said in NCCL's INFO log either way
};

// Whether NCCL calls iflush after a receive into GPU memory: below compute
// capability 9.0 (or unknown), or when forced (props.forceFlush,
// NCCL_NET_FORCE_FLUSH=1).
bool nccl_flushes(int min_compute_capability, bool force_flush);

PointerPolicy choose_pointers(const PointerFacts &f);

} // namespace hmemreg::nccl
