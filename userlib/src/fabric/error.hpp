// SPDX-License-Identifier: MIT
// Errors of the libfabric layer: one exception type that carries both the
// libfabric return code and the hmemreg code the C API hands out.
#pragma once

#include <stdexcept>
#include <string>

#include <rdma/fi_errno.h>

#include "hmemreg/common.h"

namespace hmemreg {

// Thrown by the fabric and engine layers; the C API turns it into -code().
class Error : public std::runtime_error {
public:
	Error(int hmemreg_code, const std::string &what) : std::runtime_error(what), code_(hmemreg_code) {}
	int code() const { return code_; }

private:
	int code_; // positive HMEMREG_E* value
};

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
