// SPDX-License-Identifier: MIT
// Value types shared by the registration cache, its registrars and monitors.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hmemreg/cache.h"

namespace hmemreg::mr {

// Memory kinds; values are the C API's HMEMREG_IFACE_* (and libfabric's
// enum fi_hmem_iface for the ones libfabric knows).
enum class Iface : uint32_t {
	host = HMEMREG_IFACE_HOST,
	cuda = HMEMREG_IFACE_CUDA,
	rocr = HMEMREG_IFACE_ROCR,
	ze = HMEMREG_IFACE_ZE,
	neuron = HMEMREG_IFACE_NEURON,
	synapseai = HMEMREG_IFACE_SYNAPSEAI,
	kmod_export = HMEMREG_IFACE_KMOD_EXPORT, // hmemreg.ko export (export_table.hpp)
};

// Half-open byte range [start, end).
struct Range {
	uintptr_t start = 0;
	uintptr_t end = 0;
	size_t size() const { return end - start; }
	bool covers(uintptr_t s, uintptr_t e) const { return start <= s && e <= end; }
	bool overlaps(uintptr_t s, uintptr_t e) const { return start < e && s < end; }
};

// What a caller asks for. dmabuf_fd >= 0 asks the registrar to register
// through that DMA-BUF (offset = where addr sits inside it) when it can.
struct Request {
	const void *addr = nullptr;
	size_t len = 0;
	Iface iface = Iface::host;
	uint64_t device = 0;
	int dmabuf_fd = -1;
	uint64_t dmabuf_offset = 0;
	uint32_t flags = 0; // HMEMREG_MR_* bits
};

// What a registrar produced; opaque to the cache.
struct Registration {
	void *handle = nullptr; // e.g. struct fid_mr *
	void *desc = nullptr;   // fi_mr_desc()
	uint64_t key = 0;       // fi_mr_key()
	uint64_t cookie = 0;    // registrar-private
};

// Why an entry left the cache (index into the stats' invalidation array).
enum class Cause : uint32_t {
	unmap = HMEMREG_INVAL_UNMAP,
	clear = HMEMREG_INVAL_CLEAR,
	remap = HMEMREG_INVAL_REMAP,
	explicit_call = HMEMREG_INVAL_EXPLICIT,
	stale = HMEMREG_INVAL_STALE,
	overflow = HMEMREG_INVAL_OVERFLOW,
	replaced = HMEMREG_INVAL_REPLACED,
	fork = HMEMREG_INVAL_FORK,
	other = HMEMREG_INVAL_OTHER,
	evicted = HMEMREG_INVAL_MAX, // LRU eviction or flush: counted as an eviction
};

} // namespace hmemreg::mr
