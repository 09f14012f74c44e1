// SPDX-License-Identifier: MIT
// RAII handle on /dev/hmemreg.
#pragma once

#include "hmemreg/hmemreg.h"
#include "unique_fd.hpp"

namespace hmemreg {

class KmodDevice {
public:
	// 0 or -HMEMREG_ENODEV / -HMEMREG_EACCES / -HMEMREG_ESYS.
	static int open(KmodDevice &out);
	int query(hmemreg_kmod_info &info) const;
	int fd() const { return fd_.get(); }

private:
	UniqueFd fd_;
};

} // namespace hmemreg
