// SPDX-License-Identifier: MIT
// Device memory's DMA-BUF wrapped by hmemreg.ko (provider DMABUF) before it
// is registered, so that the NIC's attachment, pins and maps of it are in
// the module's pin ledger (mr_cache_stat --exports / --check). Used when
// /dev/hmemreg is there with HMEMREG_CAP_EXPORT_DMABUF and
// HMEMREG_WRAP_DMABUF allows it (on by default).
//
// One wrapper per inner buffer at a time, process-wide: registrations of
// the same buffer (every rail's cache, a registration after an eviction)
// share it, so only the first pays the EXPORT ioctl. Registrations hold it
// (WrapperRef); the last one to let go closes it. The NIC's attachment
// keeps what it registered either way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "unique_fd.hpp"

namespace hmemreg::mr {

// Wrap all of the DMA-BUF `fd`: 0 with the wrapper's fd in `out` (offsets
// into it are those of `fd`), or -HMEMREG_* with `why` saying why not
// (setting off, module absent or too old, the module's refusal). Each call
// is an EXPORT ioctl: a new wrapper.
int wrap_dmabuf(int fd, UniqueFd &out, std::string &why);

// What identifies an inner buffer while a wrapper of it lives: the
// DMA-BUF's file (its inode, which the wrapper's reference keeps taken), or
// a CUDA allocation (device, base address, buffer ID: a free and a new
// allocation at the same address is another buffer).
struct WrapKey {
	enum Kind : uint32_t { file, cuda_allocation };
	Kind kind = file;
	uint64_t a = 0, b = 0, c = 0;
	auto operator<=>(const WrapKey &) const = default;
};

// A wrapper shared by the registrations of one inner buffer.
class Wrapper {
public:
	Wrapper(const WrapKey &key, UniqueFd fd) : key_(key), fd_(std::move(fd)) {}
	~Wrapper();
	Wrapper(const Wrapper &) = delete;
	Wrapper &operator=(const Wrapper &) = delete;
	int fd() const { return fd_.get(); }

private:
	WrapKey key_;
	UniqueFd fd_;
};
using WrapperRef = std::shared_ptr<const Wrapper>;

// The wrapper of the caller's DMA-BUF `fd` (which stays the caller's): the
// live one of the same buffer, else a new one. 0, or wrap_dmabuf()'s error.
int shared_wrapper(int fd, WrapperRef &out, std::string &why);

// The wrapper of a CUDA allocation's DMA-BUF: the live one of `key`, else
// `export_inner` exports the allocation (0 or -HMEMREG_*, with why) and the
// export is wrapped, then closed (the wrapper holds the buffer). Not called
// when the module cannot wrap. 0, or the export's or wrap_dmabuf()'s error.
int shared_wrapper(const WrapKey &key, const std::function<int(UniqueFd &, std::string &)> &export_inner,
		   WrapperRef &out, std::string &why);

// Wrappers alive in this process (tests).
size_t live_wrappers();

} // namespace hmemreg::mr
