// SPDX-License-Identifier: MIT
// Error texts of the C API and the library version.
#include <array>
#include <cstdlib>

#include "hmemreg/hmemreg.h"

namespace {

constexpr std::array<const char *, HMEMREG_ERROR_MAX> kErrorText = {
	"success",
	"invalid argument",
	"out of memory",
	"hmemreg kernel module not loaded (/dev/hmemreg absent)",
	"permission denied on /dev/hmemreg (members of group hmemreg may open it: udev rule 99-hmemreg.rules)",
	"kernel module ABI incompatible with this library",
	"system call failed (see errno)",
	"operation not supported for this memory or provider",
	"no such entry",
	"object in use",
	"libfabric call failed",
	"resource temporarily unavailable, try again",
	"memory behind the handle was invalidated",
};

} // namespace

extern "C" const char *hmemreg_strerror(int code)
{
	unsigned int c = static_cast<unsigned int>(std::abs(code));
	if (c >= kErrorText.size())
		return "unknown hmemreg error";
	return kErrorText[c];
}

extern "C" uint32_t hmemreg_library_version(void)
{
	return (HMEMREG_VERSION_MAJOR << 16) | HMEMREG_VERSION_MINOR;
}
