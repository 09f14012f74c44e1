// SPDX-License-Identifier: MIT
// A minimal test runner for the GPU suites.
//
// Each GPU test runs in a plain fork()ed child (CUDA is never initialised in
// the parent, so every test starts from a clean driver state) and reports
// like Criterion: PASS/FAIL per test, a synthesis line, non-zero exit status
// on any failure; a crash prints a backtrace. Filter with argv[1] (substring
// of the name). History: this replaced Criterion after its workers crashed on
// the GPU machine; the crash was later traced to our CUDA loader resolving
// cuCtxGetDevice to the _v2 ABI (fixed), so Criterion may well work there
// again; not re-checked.
#pragma once

#include <execinfo.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace gpu_test {

struct Case {
	const char *name;
	void (*fn)();
};

inline std::vector<Case> &cases()
{
	static std::vector<Case> c;
	return c;
}

struct Register {
	Register(const char *name, void (*fn)()) { cases().push_back({name, fn}); }
};

[[noreturn]] inline void fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	std::fflush(stdout); // what the test logged comes before the failure
	va_start(ap, fmt);
	std::fprintf(stderr, "  %s:%d: ", file, line);
	std::vfprintf(stderr, fmt, ap);
	std::fprintf(stderr, "\n");
	va_end(ap);
	std::fflush(stderr);
	std::_Exit(1);
}

// A crash in a test prints where it happened before the child dies.
inline void on_crash(int sig)
{
	void *frames[48];
	int n = backtrace(frames, 48);
	std::fprintf(stderr, "  signal %d, backtrace:\n", sig);
	backtrace_symbols_fd(frames, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

inline int run_all(int argc, char **argv)
{
	int pass = 0, failed = 0;
	for (const auto &c : cases()) {
		if (argc > 1 && !std::strstr(c.name, argv[1]))
			continue;
		std::fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			signal(SIGSEGV, on_crash);
			signal(SIGBUS, on_crash);
			c.fn();
			std::fflush(stdout);
			std::_Exit(0);
		}
		int st = 0;
		waitpid(pid, &st, 0);
		bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!ok && WIFSIGNALED(st))
			std::fprintf(stderr, "  killed by signal %d\n", WTERMSIG(st));
		std::printf("[%s] %s\n", ok ? "PASS" : "FAIL", c.name);
		(ok ? pass : failed)++;
	}
	std::printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d\n", pass + failed, pass, failed);
	return failed ? 1 : 0;
}

} // namespace gpu_test

#define GPU_TEST(suite, name)                                                                      \
	static void suite##_##name();                                                              \
	static gpu_test::Register suite##_##name##_reg(#suite "::" #name, suite##_##name);         \
	static void suite##_##name()

#define GPU_ASSERT(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond))                                                                       \
			gpu_test::fail(__FILE__, __LINE__, "assertion failed: " #cond " " __VA_ARGS__); \
	} while (0)

#define GPU_LOG(...) (std::printf("  " __VA_ARGS__), std::printf("\n"))

#define GPU_TEST_MAIN()                                                                            \
	int main(int argc, char **argv) { return gpu_test::run_all(argc, argv); }
