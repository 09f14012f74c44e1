// SPDX-License-Identifier: MIT
// Whether NCCL may hand the plugin GPU buffers (ptrSupport CUDA|DMABUF,
// NCCL's GDR), from the setting and what the engine found.
//
// With GPU buffers through shm, PyTorch's collectives hung on the H200
// (two ranks on one GPU, with MPS and without): with shm's own cudaMemcpy,
// and again with the engine staging and the plugin landing data on
// non-blocking streams of their own. The plugin's stall report names the
// one edge of the cycle that does not move: a copy into NCCL's GPU buffer
// (cuMemcpyHtoDAsync on our stream) stays "not run yet" while NCCL tests
// that receive about two million times a second, so NCCL's kernel there
// never posts its next send, for which the other rank waits. The source
// does not matter (an Inline copy, an eager slot, a pinned buffer, the
// engine's pinned mirror), nor the hardware queues (32
// CUDA_DEVICE_MAX_CONNECTIONS; tests/gpu/copy_behind_spin.py --sweep), the
// legacy stream (HMEMREG_STREAM=side), NCCL's user-buffer registration or
// the protocol (LL alone). What it needs is a change of collective: at the
// first receive of all_gather after all_reduce, or of all_reduce after
// all_gather; each alone, broadcast, and all_reduce then broadcast ran
// exactly (H100, no MPS, 8-128 KiB, 2026-12-06). The cause is CUDA's lazy
// module loading: the test's check after the new collective launches
// kernels for the first time (broadcast's reuses all_reduce's), and a first
// launch beside a spinning kernel holds every later copy of the process
// (tests/gpu/copy_behind_spin.py --first-launch: stuck under LAZY, done at
// once under EAGER; the same NCCL run hung under LAZY and ran exactly under
// CUDA_MODULE_LOADING=EAGER, H100, 2026-12-06). So staging is granted only
// where loading is eager; even then a module loaded while NCCL's kernels
// spin holds the process: the load and the next copy call did not return
// within 3 s, lazy or eager (--load-beside-spin, H100), so it stays opt-in.
// Host buffers ran every collective exactly: a provider that would copy
// device memory with CUDA calls (it refuses FI_OPT_CUDA_API_PERMITTED =
// false: shm, tcp, ofi_rxm, whose bounce buffers copy with CUDA) gets no
// device memory unless HMEMREG_NCCL_DEVICE_MEMORY=staged asks.
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
	// CUDA loads kernels at their first launch (CUDA_MODULE_LOADING=LAZY,
	// the default): such a load waits for the context's running kernels
	// while it holds the context, so a staged copy can wait behind it.
	bool lazy_loading = false;
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
