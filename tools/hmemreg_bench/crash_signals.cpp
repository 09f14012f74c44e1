// SPDX-License-Identifier: MIT
// Crashes that look like crashes. libpsm2 and libpsm_infinipath (through
// libinfinipath), which Debian's libfabric links, install handlers for SIGSEGV, SIGBUS, SIGILL,
// SIGABRT, SIGINT and SIGTERM from their constructors, whether or not their
// provider is used: on a crash they print a backtrace, write a .btr file into
// the working directory and exit(1); on SIGTERM/SIGINT they exit(1), running
// atexit handlers from the signal handler. A segfault then reads as a plain
// failure, and a terminated process as one that ended itself.
#include <csignal>
#include <cstdio>
#include <cstring>

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

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

namespace {

void say(const char *s)
{
	for (size_t n = std::strlen(s); n > 0;) {
		ssize_t w = ::write(STDERR_FILENO, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= static_cast<size_t>(w);
	}
}

// Only async-signal-safe calls (backtrace() was warmed up at install, so it
// does not load libgcc here); the signal, raised again, is delivered with its
// default action when the handler returns.
void on_crash(int sig, siginfo_t *si, void *)
{
	char head[160];
	std::snprintf(head, sizeof(head), "hmemreg_bench: pid %d: SIG%s (address %p); backtrace:\n",
		      static_cast<int>(::getpid()), sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", si->si_addr);
	say(head);
	void *frames[48];
	backtrace_symbols_fd(frames, backtrace(frames, 48), STDERR_FILENO);
	::raise(sig);
}

} // namespace

void report_crashes()
{
	if (dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init"))
		return; // the sanitizer's report is better
	restore_crash_signals();
	void *warm[1];
	backtrace(warm, 1);
	for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
		struct sigaction sa {};
		sa.sa_sigaction = on_crash;
		sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
		sigemptyset(&sa.sa_mask);
		sigaction(sig, &sa, nullptr);
	}
}

} // namespace hmemreg::bench
