// SPDX-License-Identifier: MIT
#include "engine/rxm_queues.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include <dlfcn.h>
#include <infiniband/verbs.h>

namespace hmemreg::engine {
namespace {

std::atomic<bool> initialized{false};

size_t env_size(const char *name, size_t dflt)
{
	const char *v = std::getenv(name);
	return v && *v ? std::strtoull(v, nullptr, 0) : dflt;
}

// Smallest max_cqe over the verbs devices, via libibverbs loaded at run time
// (no link dependency); 0 when unknown.
int smallest_max_cqe(std::string &dev_name)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 0;
	using list_fn = ibv_device **(*)(int *);
	using free_fn = void (*)(ibv_device **);
	using open_fn = ibv_context *(*)(ibv_device *);
	using close_fn = int (*)(ibv_context *);
	using query_fn = int (*)(ibv_context *, ibv_device_attr *);
	using name_fn = const char *(*)(ibv_device *);
	auto list = reinterpret_cast<list_fn>(dlsym(h, "ibv_get_device_list"));
	auto free_list = reinterpret_cast<free_fn>(dlsym(h, "ibv_free_device_list"));
	auto open = reinterpret_cast<open_fn>(dlsym(h, "ibv_open_device"));
	auto close = reinterpret_cast<close_fn>(dlsym(h, "ibv_close_device"));
	auto query = reinterpret_cast<query_fn>(dlsym(h, "ibv_query_device"));
	auto name = reinterpret_cast<name_fn>(dlsym(h, "ibv_get_device_name"));
	int best = 0;
	if (list && free_list && open && close && query && name) {
		int n = 0;
		ibv_device **devs = list(&n);
		for (int i = 0; devs && i < n; i++) {
			ibv_context *ctx = open(devs[i]);
			if (!ctx)
				continue;
			ibv_device_attr a{};
			if (query(ctx, &a) == 0 && a.max_cqe > 0 && (best == 0 || a.max_cqe < best)) {
				best = a.max_cqe;
				dev_name = name(devs[i]);
			}
			close(ctx);
		}
		if (devs)
			free_list(devs);
	}
	dlclose(h);
	return best;
}

} // namespace

void note_fabric_initialized()
{
	initialized.store(true);
}

std::string fit_rxm_queues(const std::string &provider)
{
	if (provider.find("verbs") == std::string::npos || std::getenv("FI_UNIVERSE_SIZE"))
		return "";
	static std::mutex mu;
	std::lock_guard l(mu);
	if (std::getenv("FI_UNIVERSE_SIZE"))
		return "";
	if (initialized.load())
		return "libfabric was initialized before this verbs engine: FI_UNIVERSE_SIZE not adjusted "
		       "(set it if fi_enable fails with 'Unable to create verbs CQ')";
	std::string dev;
	int max_cqe = smallest_max_cqe(dev);
	if (max_cqe <= 0)
		return "";
	size_t per_peer = env_size("FI_OFI_RXM_MSG_TX_SIZE", 128) + env_size("FI_OFI_RXM_MSG_RX_SIZE", 128);
	size_t fit = std::clamp<size_t>(static_cast<size_t>(max_cqe) / per_peer, 1, 256);
	if (fit >= 256)
		return "";
	setenv("FI_UNIVERSE_SIZE", std::to_string(fit).c_str(), 0);
	return "capped ofi_rxm's universe size to " + std::to_string(fit) + " (FI_UNIVERSE_SIZE): " + dev +
	       " allows " + std::to_string(max_cqe) + " CQ entries, rxm wants " + std::to_string(per_peer) +
	       " per peer";
}

} // namespace hmemreg::engine
