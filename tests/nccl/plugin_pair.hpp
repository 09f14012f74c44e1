// SPDX-License-Identifier: MIT
// Harness of the plugin suite: load the built plugin the way NCCL does
// (dlopen + the versioned table symbol), and run two "ranks" as two
// processes joined by a socketpair that carries the listen handle and
// small sync words, like NCCL's bootstrap would.
#pragma once

#include <criterion/criterion.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <memory>
#include <thread>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hmemreg/stats.h"
#include "nccl_abi.h"
#include "test_bytes.hpp"

namespace np {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline bool g_child = false;

[[noreturn]] inline void fail_here(const char *file, int line, const char *what)
{
	if (g_child) {
		std::fprintf(stderr, "rank 1: %s:%d: check failed: %s\n", file, line, what);
		std::fflush(stderr);
		_exit(1);
	}
	cr_assert_fail("rank 0: %s:%d: check failed: %s", file, line, what);
	std::abort();
}

#define CHECK(c)                                                                                                     \
	do {                                                                                                         \
		if (!(c))                                                                                            \
			::np::fail_here(__FILE__, __LINE__, #c);                                                     \
	} while (0)
#define CHECK_RC(call, want)                                                                                         \
	do {                                                                                                         \
		ncclResult_t rc_ = (call);                                                                           \
		if (rc_ != (want)) {                                                                                 \
			char m_[256];                                                                                \
			std::snprintf(m_, sizeof(m_), "%s returned %d, expected %d", #call, rc_, (want));            \
			::np::fail_here(__FILE__, __LINE__, m_);                                                     \
		}                                                                                                    \
	} while (0)
#define OK(call) CHECK_RC(call, ncclSuccess)

// The plugin as NCCL sees it: v11 (or v10) table; `net` holds the entries
// both versions share.
struct Plugin {
	void *lib = nullptr;
	ncclNet_v11_t *v11 = nullptr;
	ncclNet_v10_t *v10 = nullptr;
	int (*stats)(hmemreg_nccl_counters *) = nullptr;
	void *ctx = nullptr;
	bool use_v10 = false;
	ncclDebugLogger_t logger = nullptr; // what init (v11) passes

	explicit Plugin(bool v10_table = false) : use_v10(v10_table)
	{
		// Loopback tcp unless the caller chose otherwise.
		setenv("HMEMREG_NCCL_PROVIDER", "tcp;ofi_rxm", 0);
		setenv("HMEMREG_NCCL_NODE", "127.0.0.1", 0);
		lib = dlopen(HMEMREG_NCCL_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
		CHECK(lib != nullptr);
		v11 = static_cast<ncclNet_v11_t *>(dlsym(lib, "ncclNetPlugin_v11"));
		v10 = static_cast<ncclNet_v10_t *>(dlsym(lib, "ncclNetPlugin_v10"));
		stats = reinterpret_cast<int (*)(hmemreg_nccl_counters *)>(dlsym(lib, "hmemreg_nccl_stats"));
		CHECK(v11 && v10 && stats);
	}
	ncclResult_t init()
	{
		if (use_v10)
			return v10->init(nullptr, nullptr);
		ncclNetCommConfig_t cfg{-1};
		return v11->init(&ctx, 0x1234, &cfg, logger, nullptr);
	}
	ncclResult_t listen(void *handle, void **lc)
	{
		return use_v10 ? v10->listen(0, handle, lc) : v11->listen(ctx, 0, handle, lc);
	}
	ncclResult_t connect(void *handle, void **sc)
	{
		ncclNetDeviceHandle_t *dev = nullptr;
		if (use_v10) {
			ncclNetCommConfig_t cfg{-1};
			return v10->connect(0, &cfg, handle, sc, &dev);
		}
		return v11->connect(ctx, 0, handle, sc, &dev);
	}
	// Entries with the same signature in both versions.
	template <typename F> F pick(F ncclNet_v11_t::*a, F ncclNet_v10_t::*b) const { return use_v10 ? v10->*b : v11->*a; }
#define NP_ENTRY(name) auto name() const { return pick(&ncclNet_v11_t::name, &ncclNet_v10_t::name); }
	NP_ENTRY(accept)
	NP_ENTRY(regMr)
	NP_ENTRY(regMrDmaBuf)
	NP_ENTRY(deregMr)
	NP_ENTRY(isend)
	NP_ENTRY(irecv)
	NP_ENTRY(iflush)
	NP_ENTRY(test)
	NP_ENTRY(closeSend)
	NP_ENTRY(closeRecv)
	NP_ENTRY(closeListen)
#undef NP_ENTRY
	hmemreg_nccl_counters counters() const
	{
		hmemreg_nccl_counters s{};
		CHECK(stats(&s) == 0);
		return s;
	}
};

// Socketpair end with bounded blocking reads.
struct Chan {
	int fd = -1;
	void put(const void *p, size_t n) const { CHECK(write(fd, p, n) == static_cast<ssize_t>(n)); }
	void get(void *p, size_t n, int timeout_ms = 60000) const
	{
		auto *b = static_cast<uint8_t *>(p);
		size_t got = 0;
		while (got < n) {
			pollfd pfd{fd, POLLIN, 0};
			CHECK(::poll(&pfd, 1, timeout_ms) == 1);
			ssize_t r = read(fd, b + got, n - got);
			CHECK(r > 0);
			got += static_cast<size_t>(r);
		}
	}
	void signal(uint32_t v = 0) const { put(&v, sizeof(v)); }
	uint32_t wait() const
	{
		uint32_t v;
		get(&v, sizeof(v));
		return v;
	}
};

// Wait for the peer's signal while driving progress through test() on a
// request that stays pending, as NCCL's proxy thread keeps testing.
inline uint32_t wait_progressing(const Plugin &p, const Chan &c, void *pending_req)
{
	auto deadline = Clock::now() + 30s;
	for (;;) {
		pollfd pfd{c.fd, POLLIN, 0};
		if (::poll(&pfd, 1, 0) == 1)
			return c.wait();
		int done = 0;
		CHECK(p.test()(pending_req, &done, nullptr) == ncclSuccess && !done);
		CHECK(Clock::now() < deadline);
		std::this_thread::sleep_for(100us);
	}
}

// Rank 0 runs in this (Criterion) process, rank 1 in a forked child; the
// child's failure fails the test.
inline void run_pair(const std::function<void(Chan &)> &rank0, const std::function<void(Chan &)> &rank1)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		g_child = true;
		close(sv[0]);
		Chan c{sv[1]};
		rank1(c);
		_exit(0);
	}
	close(sv[1]);
	Chan c{sv[0]};
	rank0(c);
	int status = 0;
	auto deadline = Clock::now() + 60s;
	pid_t w;
	while ((w = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline)
		std::this_thread::sleep_for(5ms);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		cr_assert_fail("rank 1 did not finish within 60 s");
	}
	close(sv[0]);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 1 failed (status %#x)", status);
}

// Receiver side of a connection: listen, hand the handle over, accept.
inline void *accept_conn(Plugin &p, Chan &c, void **listen_comm = nullptr)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = nullptr, *rc = nullptr;
	OK(p.listen(handle, &lc));
	CHECK(lc != nullptr);
	c.put(handle, sizeof(handle));
	auto deadline = Clock::now() + 20s;
	ncclNetDeviceHandle_t *dev = nullptr;
	while (!rc) {
		OK(p.accept()(lc, &rc, &dev));
		CHECK(Clock::now() < deadline);
	}
	if (listen_comm)
		*listen_comm = lc;
	else
		OK(p.closeListen()(lc));
	return rc;
}

inline void *connect_conn(Plugin &p, Chan &c)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	c.get(handle, sizeof(handle));
	void *sc = nullptr;
	auto deadline = Clock::now() + 20s;
	while (!sc) {
		OK(p.connect(handle, &sc));
		CHECK(Clock::now() < deadline);
	}
	return sc;
}

// Until the request completes; returns test()'s result, fills *size.
inline ncclResult_t wait(const Plugin &p, void *req, int *size = nullptr, std::chrono::seconds limit = 30s)
{
	auto deadline = Clock::now() + limit;
	int done = 0, sz = -1;
	for (;;) {
		ncclResult_t r = p.test()(req, &done, &sz);
		if (r != ncclSuccess)
			return r;
		if (done) {
			if (size)
				*size = sz;
			return ncclSuccess;
		}
		CHECK(Clock::now() < deadline);
	}
}

// isend/irecv until the plugin accepts the request (NULL = try again).
inline void *post_send(const Plugin &p, void *sc, void *data, size_t n, int tag, void *mh)
{
	void *req = nullptr;
	auto deadline = Clock::now() + 30s;
	while (!req) {
		OK(p.isend()(sc, data, n, tag, mh, nullptr, &req));
		CHECK(Clock::now() < deadline);
	}
	return req;
}

// isend until the plugin accepts or refuses it, then wait: the send's result.
inline ncclResult_t send_result(const Plugin &p, void *sc, void *data, size_t n, int tag, void *mh)
{
	auto deadline = Clock::now() + 20s;
	for (;;) {
		void *req = nullptr;
		ncclResult_t r = p.isend()(sc, data, n, tag, mh, nullptr, &req);
		if (r != ncclSuccess || req)
			return req ? wait(p, req) : r;
		CHECK(Clock::now() < deadline);
	}
}

inline void *post_recv(const Plugin &p, void *rc, void *data, size_t n, int tag, void *mh)
{
	void *req = nullptr;
	size_t sizes[1] = {n};
	int tags[1] = {tag};
	void *datas[1] = {data};
	void *mhs[1] = {mh};
	auto deadline = Clock::now() + 30s;
	while (!req) {
		OK(p.irecv()(rc, 1, datas, sizes, tags, mhs, nullptr, &req));
		CHECK(Clock::now() < deadline);
	}
	return req;
}

// This process's registration caches (the engine keeps one per rail
// domain), summed from the stats block they publish in /dev/shm.
struct CacheTotals {
	int caches = 0;
	uint64_t hits = 0, misses = 0, registrations = 0, deregistrations = 0;
	std::string monitor, registrar;
};

inline CacheTotals cache_totals()
{
	CacheTotals t;
	char name[64];
	std::snprintf(name, sizeof(name), "%s%d", HMEMREG_STATS_SHM_PREFIX, getpid());
	int fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return t;
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= sizeof(hmemreg_stats_block));
	void *m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	CHECK(m != MAP_FAILED);
	const auto *b = static_cast<const hmemreg_stats_block *>(m);
	CHECK(hmemreg_stats_block_check(b, static_cast<size_t>(st.st_size)) == 0);
	for (uint32_t i = 0; i < b->max_caches && i < HMEMREG_STATS_MAX_CACHES; i++) {
		if (b->caches[i].state != 1)
			continue;
		hmemreg_cache_stats s{};
		hmemreg_stats_sum(&b->caches[i], &s);
		t.caches++;
		t.hits += s.hits;
		t.misses += s.misses;
		t.registrations += s.registrations;
		t.deregistrations += s.deregistrations;
		t.monitor = s.monitor;
		t.registrar = s.registrar;
	}
	munmap(m, static_cast<size_t>(st.st_size));
	return t;
}

using Buf = test_bytes::PageBuffer;
using test_bytes::fill;
using test_bytes::pattern;
inline bool verify(const uint8_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pattern(seed, i)) {
			std::fprintf(stderr, "byte %zu of %zu differs (seed %llu)\n", i, n, static_cast<unsigned long long>(seed));
			return false;
		}
	return true;
}

} // namespace np
