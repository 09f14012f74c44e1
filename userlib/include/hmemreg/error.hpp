// SPDX-License-Identifier: MIT
// libhmemreg: the exception the C++ wrappers over the C API throw
// (hmemreg/engine.hpp), and that the library throws inside itself: a
// positive HMEMREG_E* code and the message that says what was wrong.
#pragma once

#include <stdexcept>
#include <string>

#include <hmemreg/common.h>

namespace hmemreg {

class Error : public std::runtime_error {
public:
	Error(int hmemreg_code, const std::string &what) : std::runtime_error(what), code_(hmemreg_code) {}
	int code() const { return code_; } // positive HMEMREG_E* value

private:
	int code_;
};

} // namespace hmemreg
