// SPDX-License-Identifier: MIT
#include "engine/delivery.hpp"

#include "hmem/cuda_copy.hpp"

namespace hmemreg::engine {

void Delivery::set_on_message(std::function<void(const Message &)> fn)
{
	auto h = fn ? std::make_shared<const MessageFn>(std::move(fn)) : nullptr;
	std::lock_guard l(mu_);
	on_message_ = std::move(h);
}

void Delivery::set_on_notify(std::function<void(const Notification &)> fn)
{
	auto h = fn ? std::make_shared<const NotifyFn>(std::move(fn)) : nullptr;
	std::lock_guard l(mu_);
	on_notify_ = std::move(h);
}

void Delivery::message(const Message &m)
{
	std::shared_ptr<const MessageFn> fn;
	{
		std::lock_guard l(mu_);
		fn = on_message_;
	}
	if (fn)
		(*fn)(m);
}

void Delivery::notify(std::span<const Notification> notes)
{
	if (notes.empty())
		return;
	if (uint64_t devs = direct_devices_.load(std::memory_order_relaxed))
		for (int d = 0; d < 64; d++)
			if (devs & (1ULL << d))
				cuda::finish_legacy_copies(d); // errors: the copy's own failure shows elsewhere
	std::shared_ptr<const NotifyFn> fn;
	{
		std::lock_guard l(mu_);
		fn = on_notify_;
	}
	if (fn)
		for (const auto &n : notes)
			(*fn)(n);
}

void Delivery::direct_device(int device)
{
	if (device >= 0 && device < 64)
		direct_devices_.fetch_or(1ULL << device);
}

} // namespace hmemreg::engine
