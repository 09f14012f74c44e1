// SPDX-License-Identifier: MIT
// Errors of the libfabric layer: one exception type that carries both the
// libfabric return code and the hmemreg code the C API hands out.
#pragma once

#include <string>

#include <rdma/fi_errno.h>

#include "hmemreg/error.hpp" // hmemreg::Error, also what the public wrappers throw

namespace hmemreg {

namespace fabric {

// hmemreg code for a (negative) libfabric return code.
int to_hmemreg_code(int fi_rc);

// Throws Error with "<what>: <fi_strerror> (<rc>)" when rc < 0; returns rc otherwise.
int check(int rc, const char *what);
inline long check(long rc, const char *what)
{
	return rc < 0 ? check(static_cast<int>(rc), what) : rc;
}

} // namespace fabric
} // namespace hmemreg
