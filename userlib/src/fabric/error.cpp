// SPDX-License-Identifier: MIT
#include "fabric/error.hpp"

#include <cstdlib>

#include <rdma/fabric.h>

namespace hmemreg::fabric {

int to_hmemreg_code(int fi_rc)
{
	switch (std::abs(fi_rc)) {
	case FI_EAGAIN:
		return HMEMREG_EAGAIN;
	case FI_ENOMEM:
		return HMEMREG_ENOMEM;
	case FI_EINVAL:
		return HMEMREG_EINVAL;
	case FI_ENOSYS:
	case FI_EOPNOTSUPP:
	case FI_ENODATA:
		return HMEMREG_ENOTSUP;
	case FI_ENOENT:
		return HMEMREG_ENOENT;
	case FI_EBUSY:
		return HMEMREG_EBUSY;
	default:
		return HMEMREG_EFABRIC;
	}
}

int check(int rc, const char *what)
{
	if (rc >= 0)
		return rc;
	throw Error(to_hmemreg_code(rc), std::string(what) + ": " + fi_strerror(-rc) + " (" + std::to_string(rc) + ")");
}

} // namespace hmemreg::fabric
