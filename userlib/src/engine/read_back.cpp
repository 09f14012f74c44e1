// SPDX-License-Identifier: MIT
#include "engine/read_back.hpp"

#include "fabric/error.hpp"

namespace hmemreg::engine {

void ReadBack::rail_done(int err, const std::string &why)
{
	int first = 0;
	{
		std::lock_guard l(mu_);
		if (err && !first_error_) {
			first_error_ = fabric::to_hmemreg_code(-err);
			why_ = why;
		}
		first = first_error_;
	}
	if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1)
		status_.store(first ? -first : 0, std::memory_order_release);
}

} // namespace hmemreg::engine
