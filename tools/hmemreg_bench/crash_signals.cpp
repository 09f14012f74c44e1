// SPDX-License-Identifier: MIT
// Crashes that look like crashes. libpsm2 and libpsm_infinipath (through
// libinfinipath), which Debian's libfabric links, install handlers for SIGSEGV, SIGBUS, SIGILL,
// SIGABRT, SIGINT and SIGTERM from their constructors, whether or not their
// provider is used: on a crash they print a backtrace, write a .btr file into
// the working directory and exit(1); on SIGTERM/SIGINT they exit(1), running
// atexit handlers from the signal handler. A segfault then reads as a plain
// failure, and a terminated process as one that ended itself.
#include <csignal>
#include <cstring>

#include <dlfcn.h>

#include "bench.hpp"

namespace hmemreg::bench {

namespace {

// Whether `fn` lives in one of the PSM libraries.
bool in_psm(void *fn)
{
	Dl_info info{};
	if (!dladdr(fn, &info) || !info.dli_fname)
		return false;
	return std::strstr(info.dli_fname, "libpsm") || std::strstr(info.dli_fname, "libinfinipath");
}

} // namespace

int restore_crash_signals()
{
	// Under a sanitizer its own handler came first and PSM's passes crashes on
	// to it: keep those (the report is what matters), end the exit(1)s on
	// termination only.
	const bool sanitizer = dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init");
	int reset = 0;
	for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT, SIGTERM}) {
		if (sanitizer && sig != SIGINT && sig != SIGTERM)
			continue;
		struct sigaction now {};
		if (sigaction(sig, nullptr, &now) != 0)
			continue;
		void *fn = (now.sa_flags & SA_SIGINFO) ? reinterpret_cast<void *>(now.sa_sigaction)
						       : reinterpret_cast<void *>(now.sa_handler);
		if (fn == reinterpret_cast<void *>(SIG_DFL) || fn == reinterpret_cast<void *>(SIG_IGN) || !in_psm(fn))
			continue;
		struct sigaction dfl {};
		dfl.sa_handler = SIG_DFL;
		sigemptyset(&dfl.sa_mask);
		if (sigaction(sig, &dfl, nullptr) == 0)
			reset++;
	}
	return reset;
}

} // namespace hmemreg::bench
