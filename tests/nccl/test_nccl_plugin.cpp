// SPDX-License-Identifier: MIT
// libnccl-net-hmemreg.so driven through its tables as NCCL drives it, with
// two ranks (processes) over tcp;ofi_rxm on loopback.
#include <sched.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>
#include <vector>

#include "plugin_pair.hpp"

using namespace np;

Test(nccl_plugin, table_and_properties)
{
	Plugin p;
	CHECK(std::strcmp(p.v11->name, "hmemreg") == 0);
	CHECK(std::strcmp(p.v10->name, "hmemreg") == 0);
	int n = -1;
	CHECK_RC(p.v11->devices(&n), ncclInternalError); // before init: an error, not a crash
	OK(p.init());
	OK(p.v11->devices(&n));
	CHECK(n == 1);
	ncclNetProperties_v11_t props;
	OK(p.v11->getProperties(0, &props));
	CHECK(props.name && std::strstr(props.name, "tcp"));
	// libfabric 1.17 here has no FI_HMEM and the engine registers host
	// memory only: host pointers, nothing else.
	CHECK(props.ptrSupport == NCCL_PTR_HOST);
	CHECK(props.maxRecvs == 1 && props.maxMultiRequestSize == 1);
	CHECK(props.speed > 0 && props.maxComms > 0 && props.regIsGlobal == 1);
	// tcp on loopback names no NIC: NCCL Socket's 10 Gbps, so that NCCL's
	// tuner picks protocols as it does for Socket (port_speed.hpp).
	if (!std::getenv("HMEMREG_NCCL_SPEED_MBPS"))
		CHECK(props.speed == 10000);
	CHECK(props.netDeviceType == NCCL_NET_DEVICE_HOST);
	CHECK(props.maxP2pBytes >= (1u << 30));
	ncclNetProperties_v10_t p10;
	OK(p.v10->getProperties(0, &p10));
	CHECK(p10.ptrSupport == props.ptrSupport && p10.speed == props.speed && p10.maxRecvs == 1);
	CHECK_RC(p.v11->getProperties(1, &props), ncclInvalidArgument);
	CHECK_RC(p.v11->getProperties(-1, &props), ncclInvalidArgument);
	CHECK(p.v11->makeVDevice == nullptr && p.v11->getDeviceMr == nullptr);
	// A second communicator's init shares the engine; finalize both.
	void *ctx2 = nullptr;
	ncclNetCommConfig_t cfg{-1};
	OK(p.v11->init(&ctx2, 0x5678, &cfg, nullptr, nullptr));
	CHECK(ctx2 == p.ctx);
	OK(p.v11->finalize(ctx2));
	OK(p.v11->finalize(p.ctx));
	CHECK_RC(p.v11->finalize(p.ctx), ncclInternalError);
	CHECK_RC(p.v11->devices(&n), ncclInternalError);
}

Test(nccl_plugin, bad_configuration_fails_init)
{
	setenv("HMEMREG_NCCL_RAILS", "many", 1);
	Plugin p;
	CHECK_RC(p.init(), ncclInvalidUsage);
	setenv("HMEMREG_NCCL_RAILS", "1", 1);
	setenv("HMEMREG_NCCL_PROVIDER", "no-such-provider", 1);
	CHECK_RC(p.init(), ncclSystemError);
	// Sizes take k/m/g: 256k parses (init then fails on the provider only).
	setenv("HMEMREG_NCCL_MAX_WRITE", "256k", 1);
	CHECK_RC(p.init(), ncclSystemError);
	setenv("HMEMREG_NCCL_MAX_WRITE", "256q", 1);
	CHECK_RC(p.init(), ncclInvalidUsage);
	unsetenv("HMEMREG_NCCL_MAX_WRITE");
}

// What the plugin logs (init's "using ...; <settings>" INFO line, a comm's close line).
std::string g_plugin_log;
void capture_log(ncclDebugLogLevel, unsigned long, const char *, int, const char *fmt, ...)
{
	char b[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	g_plugin_log += b;
	g_plugin_log += '\n';
}

// The clause of a close line in g_plugin_log that contains `words` (from
// just after the comma before it), or null.
const char *close_clause(const char *words)
{
	const char *at = std::strstr(g_plugin_log.c_str(), words);
	while (at && at > g_plugin_log.c_str() && at[-1] != ',')
		at--;
	return at;
}

std::string init_settings(Plugin &p)
{
	g_plugin_log.clear();
	ncclNetCommConfig_t cfg{-1};
	void *ctx = nullptr;
	OK(p.v11->init(&ctx, 0x2345, &cfg, capture_log, nullptr));
	OK(p.v11->finalize(ctx));
	return g_plugin_log;
}

// This process confined to the first n CPUs of `from`; false where `from`
// has fewer.
static bool confine_to_cpus(const cpu_set_t &from, int n)
{
	cpu_set_t want;
	CPU_ZERO(&want);
	for (int c = 0; c < CPU_SETSIZE && CPU_COUNT(&want) < n; c++)
		if (CPU_ISSET(c, &from))
			CPU_SET(c, &want);
	return CPU_COUNT(&want) == n && sched_setaffinity(0, sizeof(want), &want) == 0;
}

// tcp: 4 rails (one TCP stream each) where the process may use 8 CPUs or
// more, else 1; a progress thread per rail, but one CPU left for NCCL's
// own thread; the settings win. (Criterion forks each test: the affinity
// set here ends with it.)
Test(nccl_plugin, rail_and_thread_defaults)
{
	Plugin p;
	unsetenv("HMEMREG_NCCL_RAILS");
	unsetenv("HMEMREG_NCCL_PROGRESS_THREADS");
	cpu_set_t all;
	CHECK(sched_getaffinity(0, sizeof(all), &all) == 0);
	CHECK(confine_to_cpus(all, 1));
	CHECK(init_settings(p).find("rails=1 progress_threads=0 cpus=1 ") != std::string::npos);
	if (confine_to_cpus(all, 2)) {
		CHECK(init_settings(p).find("rails=1 progress_threads=1 cpus=2 ") != std::string::npos);
		setenv("HMEMREG_NCCL_RAILS", "2", 1);
		CHECK(init_settings(p).find("rails=2 progress_threads=1 cpus=2 ") != std::string::npos);
		setenv("HMEMREG_NCCL_PROGRESS_THREADS", "2", 1);
		CHECK(init_settings(p).find("rails=2 progress_threads=2 cpus=2 ") != std::string::npos);
		setenv("HMEMREG_NCCL_PROGRESS_THREADS", "0", 1);
		CHECK(init_settings(p).find("rails=2 progress_threads=0 cpus=2 ") != std::string::npos);
		unsetenv("HMEMREG_NCCL_RAILS");
		unsetenv("HMEMREG_NCCL_PROGRESS_THREADS");
	} else {
		std::printf("rail_and_thread_defaults: one CPU here, the 2-CPU defaults not checked\n");
	}
	if (confine_to_cpus(all, 8))
		CHECK(init_settings(p).find("rails=4 progress_threads=4 cpus=8 ") != std::string::npos);
	else
		std::printf("rail_and_thread_defaults: fewer than 8 CPUs here, the 4-rail default not checked\n");
}

// PEER_TIMEOUT_MS: the engine's default unless set, 0 = never, a bad value
// fails init.
Test(nccl_plugin, peer_timeout_setting)
{
	Plugin p;
	unsetenv("HMEMREG_NCCL_PEER_TIMEOUT_MS");
	CHECK(init_settings(p).find("peer_timeout=engine's") != std::string::npos);
	setenv("HMEMREG_NCCL_PEER_TIMEOUT_MS", "2500", 1);
	CHECK(init_settings(p).find("peer_timeout=2500ms") != std::string::npos);
	setenv("HMEMREG_NCCL_PEER_TIMEOUT_MS", "0", 1);
	CHECK(init_settings(p).find("peer_timeout=never") != std::string::npos);
	for (const char *bad : {"soon", "-1", "86400001"}) {
		setenv("HMEMREG_NCCL_PEER_TIMEOUT_MS", bad, 1);
		CHECK_RC(p.init(), ncclInvalidUsage);
	}
	unsetenv("HMEMREG_NCCL_PEER_TIMEOUT_MS");
}

// One transfer per size, 0 B .. 64 MiB, receive buffers larger than the
// sends so test() must report the real size.
Test(nccl_plugin, sizes_up_to_64MiB, .timeout = 90)
{
	static const size_t sizes[] = {0, 1, 7, 4095, 4096, 65537, 1 << 20, (16 << 20) + 3, 64 << 20};
	const size_t cap = (64 << 20) + 8192;
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(cap);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (size_t i = 0; i < std::size(sizes); i++) {
				const size_t off = (i * 64) % 4096; // unaligned receive buffers too
				void *req = post_recv(p, rc, buf.data() + off, cap - 4096, 7, mh);
				int got = -1;
				OK(wait(p, req, &got));
				CHECK(got == static_cast<int>(sizes[i]));
				CHECK(verify(buf.data() + off, sizes[i], 1000 + i));
			}
			auto s = p.counters();
			CHECK(s.requests_live == 0);
			OK(p.closeRecv()(rc));
			OK(p.deregMr()(nullptr, mh));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(64 << 20);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (size_t i = 0; i < std::size(sizes); i++) {
				fill(buf.data(), sizes[i], 1000 + i);
				void *req = post_send(p, sc, buf.data(), sizes[i], 7, mh);
				int got = -1;
				OK(wait(p, req, &got));
				CHECK(got == static_cast<int>(sizes[i]));
			}
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(nullptr, mh));
			c.signal();
		});
}

// Many receives and sends in flight at once, distinct tags and sizes, for
// several rounds; receives tested in reverse order.
Test(nccl_plugin, many_outstanding_with_tags, .timeout = 60)
{
	constexpr int kReqs = 32, kRounds = 4;
	constexpr size_t kSlot = 256 << 10;
	auto size_of = [](int round, int i) { return static_cast<size_t>((i * 7919 + round * 104729) % kSlot) + (i == 0 ? 0 : 1); };
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(kSlot * kReqs);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int round = 0; round < kRounds; round++) {
				std::vector<void *> reqs;
				for (int i = 0; i < kReqs; i++)
					reqs.push_back(post_recv(p, rc, buf.data() + i * kSlot, kSlot, 100 + i, mh));
				for (int i = kReqs - 1; i >= 0; i--) {
					int got = -1;
					OK(wait(p, reqs[i], &got));
					CHECK(got == static_cast<int>(size_of(round, i)));
					CHECK(verify(buf.data() + i * kSlot, size_of(round, i), round * 1000 + i));
				}
			}
			OK(p.closeRecv()(rc));
			OK(p.deregMr()(rc, mh));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(kSlot * kReqs);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int round = 0; round < kRounds; round++) {
				std::vector<void *> reqs;
				for (int i = 0; i < kReqs; i++) {
					fill(buf.data() + i * kSlot, size_of(round, i), round * 1000 + i);
					reqs.push_back(post_send(p, sc, buf.data() + i * kSlot, size_of(round, i), 100 + i, mh));
				}
				CHECK(p.counters().requests_live == kReqs);
				for (int i = 0; i < kReqs; i++) {
					int got = -1;
					OK(wait(p, reqs[i], &got));
					CHECK(got == static_cast<int>(size_of(round, i)));
				}
			}
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// regMr shares one registration between handles of the same pages, on any
// comm, and releases it with the last deregMr.
Test(nccl_plugin, registrations_are_shared_and_released, .timeout = 60)
{
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(1 << 20);
			void *a = nullptr, *b = nullptr, *sub = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &a));
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &b));
			OK(p.regMr()(rc, buf.data() + 4096, 8192, NCCL_PTR_HOST, &sub));
			auto s = p.counters();
			CHECK(a != b && s.mhandles_live == 3);
			CHECK(s.region_misses == 1 && s.region_hits == 2 && s.regions_live == 1);
			// The first handle goes; the others still work for a transfer.
			OK(p.deregMr()(rc, a));
			CHECK(p.counters().regions_live == 1);
			void *req = post_recv(p, rc, buf.data() + 4096, 8192, 1, sub);
			int got = -1;
			OK(wait(p, req, &got));
			CHECK(got == 8192 && verify(buf.data() + 4096, 8192, 77));
			OK(p.deregMr()(rc, b));
			OK(p.deregMr()(rc, sub));
			s = p.counters();
			CHECK(s.regions_live == 0 && s.mhandles_live == 0);
			// Released: the next regMr makes a new engine region, which the
			// engine's registration cache serves from its LRU (a hit, no new
			// provider registration) unless no memory monitor is available.
			CacheTotals before = cache_totals();
			CHECK(before.caches >= 1 && before.registrar.rfind("libfabric", 0) == 0);
			CHECK(before.misses >= 1 && before.registrations >= 1);
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &a));
			CHECK(p.counters().region_misses == 2);
			CacheTotals after = cache_totals();
			CHECK(after.hits + after.misses > before.hits + before.misses);
			if (before.monitor != "unavailable" && before.monitor != "none")
				CHECK(after.hits > before.hits && after.registrations == before.registrations);
			OK(p.deregMr()(rc, a));
			CHECK_RC(p.deregMr()(rc, a), ncclInternalError); // twice
			OK(p.closeRecv()(rc));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(8192);
			fill(buf.data(), 8192, 77);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			OK(wait(p, post_send(p, sc, buf.data(), 8192, 1, mh)));
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// Handles NCCL never made, memory it never registered, unsupported kinds:
// clean errors and nothing else.
Test(nccl_plugin, bad_input_is_an_error, .timeout = 60)
{
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			int junk[16] = {};
			void *req = nullptr, *mh = nullptr;
			int done = 0;
			ncclNetDeviceHandle_t *dev = nullptr;
			void *out = nullptr;
			CHECK_RC(p.test()(junk, &done, nullptr), ncclInternalError);
			CHECK_RC(p.closeRecv()(junk), ncclInternalError);
			CHECK_RC(p.closeListen()(junk), ncclInternalError);
			CHECK_RC(p.closeSend()(rc), ncclInternalError); // a recv comm is not a send comm
			CHECK_RC(p.accept()(rc, &out, &dev), ncclInternalError);
			CHECK_RC(p.regMr()(junk, junk, sizeof(junk), NCCL_PTR_HOST, &mh), ncclInternalError);
			CHECK_RC(p.deregMr()(rc, junk), ncclInternalError);
			CHECK_RC(p.isend()(rc, junk, 4, 0, nullptr, nullptr, &req), ncclInternalError);
			Buf buf(1 << 16);
			// Device memory is not offered (ptrSupport HOST), nor registered
			// by a DMA-BUF fd that is no hmemreg.ko export.
			CHECK_RC(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_CUDA, &mh), ncclInvalidUsage);
			CHECK(mh == nullptr);
			CHECK_RC(p.regMrDmaBuf()(rc, buf.data(), buf.len, NCCL_PTR_CUDA, 0, 3, &mh), ncclInvalidUsage);
			OK(p.regMr()(rc, buf.data() + 4096, 4096, NCCL_PTR_HOST, &mh));
			// Receive into memory outside the registration / without one / grouped.
			size_t sizes[2] = {8192, 8};
			int tags[2] = {0, 0};
			void *datas[2] = {buf.data() + 4096, buf.data()};
			void *mhs[2] = {mh, mh};
			CHECK_RC(p.irecv()(rc, 1, datas, sizes, tags, mhs, nullptr, &req), ncclInternalError);
			void *none[1] = {nullptr};
			CHECK_RC(p.irecv()(rc, 1, datas, sizes, tags, none, nullptr, &req), ncclInternalError);
			CHECK_RC(p.irecv()(rc, 2, datas, sizes, tags, mhs, nullptr, &req), ncclInternalError);
			CHECK(p.counters().requests_live == 0);
			// Still usable after all that.
			void *r = post_recv(p, rc, buf.data() + 4096, 4096, 3, mh);
			int got = -1;
			OK(wait(p, r, &got));
			CHECK(got == 4096 && verify(buf.data() + 4096, 4096, 5));
			OK(p.deregMr()(rc, mh));
			OK(p.closeRecv()(rc));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(1 << 16);
			fill(buf.data(), buf.len, 5);
			void *mh = nullptr, *req = nullptr;
			OK(p.regMr()(sc, buf.data(), 4096, NCCL_PTR_HOST, &mh));
			CHECK_RC(p.isend()(sc, buf.data(), 8192, 3, mh, nullptr, &req), ncclInternalError); // beyond the handle
			CHECK_RC(p.isend()(sc, buf.data(), 4096, 3, nullptr, nullptr, &req), ncclInternalError); // no handle
			CHECK_RC(p.isend()(sc, buf.data() + 8192, 16, 3, mh, nullptr, &req), ncclInternalError);
			CHECK(req == nullptr);
			OK(wait(p, post_send(p, sc, buf.data(), 4096, 3, mh)));
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// A send larger than the posted receive (or with another tag) fails on
// both sides with ncclInvalidUsage; the connection carries on. Eager sends
// (next test) are off here: without the receive's Cts the sender cannot check.
Test(nccl_plugin, send_larger_than_receive_fails_both_sides, .timeout = 60)
{
	setenv("HMEMREG_NCCL_EAGER_MAX", "0", 1);
	setenv("HMEMREG_NCCL_INLINE_MAX", "0", 1); // the Cts path: inline sends fail only the receive
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(1 << 16);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			CHECK_RC(wait(p, post_recv(p, rc, buf.data(), 1024, 9, mh)), ncclInvalidUsage);
			CHECK_RC(wait(p, post_recv(p, rc, buf.data(), 4096, 9, mh)), ncclInvalidUsage); // tag mismatch
			int got = -1;
			OK(wait(p, post_recv(p, rc, buf.data(), 8192, 9, mh), &got));
			CHECK(got == 4096 && verify(buf.data(), 4096, 11));
			OK(p.deregMr()(rc, mh));
			OK(p.closeRecv()(rc));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(1 << 16);
			fill(buf.data(), 4096, 11);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			auto send_rc = [&](size_t n, int tag) { return send_result(p, sc, buf.data(), n, tag, mh); };
			CHECK_RC(send_rc(4096, 9), ncclInvalidUsage);
			CHECK_RC(send_rc(4096, 10), ncclInvalidUsage);
			OK(send_rc(4096, 9));
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// Sends whose receive is not posted yet go into the receiver's eager slots
// (16 by default) instead of waiting for its Cts; once the slots are taken
// a send waits. Each receive then completes at once with the right bytes.
// An eager send larger than its receive fails that receive.
static constexpr int kSlots = 16;         // the plugin's default EAGER_SLOTS
static constexpr size_t kMax = 512 << 10; // EAGER_MAX as these tests set it (not the default)

// NCCL closes a send comm once its sends completed, and eager sends complete
// before their receives are posted (a broadcast's root finishes first, seen
// on two H200s with 48 slots): those receives still get their data, and only
// a receive beyond the sender's last send fails.
Test(nccl_plugin, eager_slots_outlive_the_senders_close, .timeout = 60)
{
	setenv("HMEMREG_NCCL_INLINE_MAX", "0", 1); // the slots alone (small sends would go inline)
	setenv("HMEMREG_NCCL_EAGER_MAX", "512k", 1);
	constexpr int kSends = 6;
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(kMax * (kSends + 1));
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			c.wait(); // every send completed, then the send comm closed
			auto until = Clock::now() + 20s; // the Close is in (progress threads)
			while (p.counters().peer_closes == 0) {
				CHECK(Clock::now() < until);
				std::this_thread::sleep_for(1ms);
			}
			for (int i = 0; i < kSends; i++) {
				int got = -1;
				OK(wait(p, post_recv(p, rc, buf.data() + i * kMax, kMax, i, mh), &got));
				CHECK(got == 1000 + i && verify(buf.data() + i * kMax, 1000 + i, 40 + i));
			}
			void *req = nullptr;
			size_t sizes[1] = {kMax};
			int tags[1] = {kSends};
			void *datas[1] = {buf.data() + kSends * kMax};
			void *mhs[1] = {mh};
			CHECK_RC(p.irecv()(rc, 1, datas, sizes, tags, mhs, nullptr, &req), ncclRemoteError);
			CHECK(req == nullptr);
			OK(p.closeRecv()(rc));
			OK(p.deregMr()(rc, mh));
			CHECK(p.counters().requests_live == 0);
			c.signal();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(kMax * kSends);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			std::vector<void *> reqs;
			for (int i = 0; i < kSends; i++) { // no receive is posted: all eager
				fill(buf.data() + i * kMax, 1000 + i, 40 + i);
				reqs.push_back(post_send(p, sc, buf.data() + i * kMax, 1000 + i, i, mh));
			}
			for (void *r : reqs)
				OK(wait(p, r));
			OK(p.closeSend()(sc));
			c.signal();
			c.wait();
			OK(p.deregMr()(nullptr, mh));
		});
}

Test(nccl_plugin, sends_before_their_receive_go_eager, .timeout = 60)
{
	setenv("HMEMREG_NCCL_INLINE_MAX", "0", 1); // the slots alone (small sends would go inline)
	setenv("HMEMREG_NCCL_EAGER_MAX", "512k", 1);
	setenv("HMEMREG_NCCL_EAGER_BUSY_MAX", "512k", 1); // every size eager, outstanding sends or not
	auto size_of = [](int i) { return std::min<size_t>(kMax, (size_t(1) << (i + 4)) + i); };
	run_pair(
		[&](Chan &c) {
			Plugin p;
			p.logger = capture_log;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(kMax * (kSlots + 1));
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			c.wait(); // the sender has 16 sends posted and one refused
			std::vector<void *> reqs;
			for (int i = 0; i <= kSlots; i++)
				reqs.push_back(post_recv(p, rc, buf.data() + i * kMax, kMax, i, mh));
			for (int i = 0; i <= kSlots; i++) {
				int got = -1;
				OK(wait(p, reqs[i], &got));
				CHECK(got == static_cast<int>(size_of(i)));
				CHECK(verify(buf.data() + i * kMax, size_of(i), 500 + i));
			}
			uint64_t eager = p.counters().eager_receives;
			CHECK(eager == kSlots || eager == kSlots + 1);
			c.signal();
			// 8 KiB sent to a 4 KiB receive: if it went eager only this side
			// can tell; either way the receive fails.
			CHECK_RC(wait(p, post_recv(p, rc, buf.data(), 4096, 0, mh)), ncclInvalidUsage);
			int got = -1;
			OK(wait(p, post_recv(p, rc, buf.data(), kMax, 0, mh), &got));
			CHECK(got == 1000 && verify(buf.data(), 1000, 7));
			eager = p.counters().eager_receives;
			g_plugin_log.clear();
			OK(p.closeRecv()(rc));
			// The close line counts the comm's eager receives and their copies' time.
			unsigned long long landed = 0;
			double copy_us = -1;
			const char *line = close_clause(" from eager slots (");
			CHECK(line != nullptr);
			CHECK(std::sscanf(line, " %llu from eager slots (%lf us each", &landed, &copy_us) == 2);
			CHECK(landed == eager && copy_us > 0 && copy_us < 1e6);
			OK(p.deregMr()(rc, mh));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(kMax * (kSlots + 1));
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int i = 0; i <= kSlots; i++)
				fill(buf.data() + i * kMax, size_of(i), 500 + i);
			std::vector<void *> reqs;
			for (int i = 0; i < kSlots; i++) // no receive is posted: eager or nothing
				reqs.push_back(post_send(p, sc, buf.data() + i * kMax, size_of(i), i, mh));
			auto until = Clock::now() + 300ms;
			while (Clock::now() < until) { // every slot is taken: the 17th waits
				void *req = nullptr;
				OK(p.isend()(sc, buf.data() + kSlots * kMax, size_of(kSlots), kSlots, mh, nullptr, &req));
				CHECK(req == nullptr);
			}
			c.signal();
			// (Without progress threads the receiver reads the data only now.)
			for (void *r : reqs)
				OK(wait(p, r));
			OK(wait(p, post_send(p, sc, buf.data() + kSlots * kMax, size_of(kSlots), kSlots, mh)));
			c.wait();
			ncclResult_t r = send_result(p, sc, buf.data(), 8192, 0, mh); // its receive is 4 KiB
			CHECK(r == ncclSuccess || r == ncclInvalidUsage); // eager, or refused with the Cts
			fill(buf.data(), 1000, 7);
			OK(wait(p, post_send(p, sc, buf.data(), 1000, 0, mh)));
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// While a send is outstanding, a larger one than EAGER_BUSY_MAX (64k by
// default) waits for its receive's Cts instead of taking a slot (the
// receiver would copy it once more); the first, on an idle comm, goes eager.
Test(nccl_plugin, large_sends_wait_while_others_are_outstanding, .timeout = 60)
{
	setenv("HMEMREG_NCCL_INLINE_MAX", "0", 1);
	setenv("HMEMREG_NCCL_EAGER_MAX", "512k", 1);
	unsetenv("HMEMREG_NCCL_EAGER_BUSY_MAX");
	constexpr size_t kLen = 256 << 10;
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(kLen * 2);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			c.wait(); // the first send is posted, the second refused for a while
			void *r0 = post_recv(p, rc, buf.data(), kLen, 0, mh);
			void *r1 = post_recv(p, rc, buf.data() + kLen, kLen, 1, mh);
			int got = -1;
			OK(wait(p, r0, &got));
			CHECK(got == static_cast<int>(kLen) && verify(buf.data(), kLen, 70));
			OK(wait(p, r1, &got));
			CHECK(got == static_cast<int>(kLen) && verify(buf.data() + kLen, kLen, 71));
			CHECK(p.counters().eager_receives == 1);
			c.signal();
			c.wait();
			OK(p.closeRecv()(rc));
			OK(p.deregMr()(rc, mh));
		},
		[&](Chan &c) {
			Plugin p;
			p.logger = capture_log;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(kLen * 2);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			fill(buf.data(), kLen, 70);
			fill(buf.data() + kLen, kLen, 71);
			// The first waits for the receiver's eager slots (EagerRing),
			// then goes eager: no receive is posted.
			void *s0 = post_send(p, sc, buf.data(), kLen, 0, mh);
			const auto held = 300ms;
			auto until = Clock::now() + held;
			while (Clock::now() < until) { // s0 not tested yet: outstanding, so no slot for s1
				void *req = nullptr;
				OK(p.isend()(sc, buf.data() + kLen, kLen, 1, mh, nullptr, &req));
				CHECK(req == nullptr);
			}
			c.signal();
			void *s1 = post_send(p, sc, buf.data() + kLen, kLen, 1, mh); // once its Cts came
			OK(wait(p, s0));
			OK(wait(p, s1));
			c.wait();
			g_plugin_log.clear();
			OK(p.closeSend()(sc));
			// The close line: s1 waited the whole time the receiver held
			// its receives back, and only a moment of it after its Cts came.
			unsigned waited = 0;
			double each_us = -1, after_us = -1;
			const char *line = close_clause("waited for the receiver's buffer");
			CHECK(line != nullptr);
			CHECK(std::sscanf(line, " %u waited for the receiver's buffer (%lf us each on average, %lf us",
					  &waited, &each_us, &after_us) == 3);
			const double held_us = std::chrono::duration<double, std::micro>(held).count();
			CHECK(waited >= 1 && each_us * waited >= held_us);
			CHECK(after_us >= 0 && after_us * waited < held_us / 2);
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// Slots come back without any receive advertised ahead: each round of 16
// sends is posted while the receiver posts nothing, so every round after
// the first needs the credit its receives returned (a Credit message when
// they were all served from slots and sent no Cts).
Test(nccl_plugin, eager_slots_come_back_to_the_sender, .timeout = 60)
{
	setenv("HMEMREG_NCCL_INLINE_MAX", "0", 1); // the slots alone (small sends would go inline)
	setenv("HMEMREG_NCCL_EAGER_MAX", "512k", 1);
	constexpr int kRounds = 3;
	constexpr size_t kLen = 64 << 10;
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(kLen * kSlots);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int round = 0; round < kRounds; round++) {
				c.wait(); // the sender posted this round's sends
				std::vector<void *> reqs;
				for (int i = 0; i < kSlots; i++)
					reqs.push_back(post_recv(p, rc, buf.data() + i * kLen, kLen, 0, mh));
				for (int i = 0; i < kSlots; i++) {
					int got = -1;
					OK(wait(p, reqs[i], &got));
					CHECK(got == static_cast<int>(kLen) && verify(buf.data() + i * kLen, kLen, round * 100 + i));
				}
				c.signal();
			}
			CHECK(p.counters().eager_receives >= kSlots);
			OK(p.closeRecv()(rc));
			OK(p.deregMr()(rc, mh));
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(kLen * kSlots);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int round = 0; round < kRounds; round++) {
				std::vector<void *> reqs;
				for (int i = 0; i < kSlots; i++) {
					fill(buf.data() + i * kLen, kLen, round * 100 + i);
					reqs.push_back(post_send(p, sc, buf.data() + i * kLen, kLen, 0, mh));
				}
				c.signal();
				for (void *r : reqs)
					OK(wait(p, r));
				c.wait(); // received: the buffers may be refilled
			}
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}

// Sends of at most INLINE_MAX (8 KiB here) go in one control message: they
// complete with no receive posted and take no eager slot (more of them than
// there are slots), each receive then completes at once with its bytes. With
// no Cts to check against, a tag or size mismatch fails only the receive.
Test(nccl_plugin, small_sends_go_inline, .timeout = 60)
{
	setenv("HMEMREG_NCCL_INLINE_MAX", "8k", 1);
	constexpr int kSends = 3 * kSlots;
	auto size_of = [](int i) { return size_t(1) + (size_t(i) * 173) % (8 << 10); };
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(size_t(8 << 10) * kSends);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			c.wait(); // every send completed
			for (int i = 0; i < kSends; i++) {
				int got = -1;
				OK(wait(p, post_recv(p, rc, buf.data() + i * (8 << 10), 8 << 10, i, mh), &got));
				CHECK(got == static_cast<int>(size_of(i)) && verify(buf.data() + i * (8 << 10), size_of(i), 900 + i));
			}
			CHECK(p.counters().eager_receives == 0);
			CHECK_RC(wait(p, post_recv(p, rc, buf.data(), 4096, 1, mh)), ncclInvalidUsage); // sent with tag 2
			CHECK_RC(wait(p, post_recv(p, rc, buf.data(), 1024, 3, mh)), ncclInvalidUsage); // 2 KiB sent
			int got = -1;
			OK(wait(p, post_recv(p, rc, buf.data(), 4096, 4, mh), &got));
			CHECK(got == 100 && verify(buf.data(), 100, 44));
			c.signal();
			OK(p.deregMr()(rc, mh));
			OK(p.closeRecv()(rc));
			c.wait();
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(size_t(8 << 10) * kSends);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int i = 0; i < kSends; i++) {
				fill(buf.data() + i * (8 << 10), size_of(i), 900 + i);
				OK(wait(p, post_send(p, sc, buf.data() + i * (8 << 10), size_of(i), i, mh)));
			}
			c.signal();
			OK(wait(p, post_send(p, sc, buf.data(), 64, 2, mh)));
			OK(wait(p, post_send(p, sc, buf.data(), 2048, 3, mh)));
			fill(buf.data(), 100, 44);
			OK(wait(p, post_send(p, sc, buf.data(), 100, 4, mh)));
			c.wait();
			OK(p.deregMr()(sc, mh));
			OK(p.closeSend()(sc));
			c.signal();
		});
}

// Closing comms with requests in flight: no crash, no leftover requests,
// the peer learns it (its next isend fails with ncclRemoteError), and new
// connections work.
Test(nccl_plugin, close_with_requests_in_flight, .timeout = 60)
{
	run_pair(
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			Buf buf(8 << 20);
			void *rc = accept_conn(p, c);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			void *last = nullptr;
			for (int i = 0; i < 8; i++)
				last = post_recv(p, rc, buf.data() + (size_t(i) << 20), 1 << 20, i, mh);
			wait_progressing(p, c, last); // the sender posted 4 sends and did not wait
			c.signal(); // only now may it send more: the 8th receive stayed pending
			OK(p.closeRecv()(rc));
			CHECK(p.counters().requests_live == 0);
			// A new connection on the same engine works (accepting it
			// drives progress: the sender learns of the close meanwhile).
			void *rc2 = accept_conn(p, c);
			int got = -1;
			OK(wait(p, post_recv(p, rc2, buf.data(), 1 << 20, 0, mh), &got));
			CHECK(got == (1 << 20) && verify(buf.data(), 1 << 20, 3));
			OK(p.closeRecv()(rc2));
			OK(p.deregMr()(nullptr, mh));
			auto s = p.counters();
			CHECK(s.requests_live == 0 && s.mhandles_live == 0 && s.regions_live == 0 && s.comms_live == 0);
			c.signal();
			c.wait();
			OK(p.v11->finalize(p.ctx));
		},
		[&](Chan &c) {
			Plugin p;
			OK(p.init());
			Buf buf(8 << 20);
			fill(buf.data(), 1 << 20, 3);
			void *sc = connect_conn(p, c);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			for (int i = 0; i < 4; i++)
				post_send(p, sc, buf.data() + (size_t(i) << 20), 1 << 20, i, mh);
			c.signal();
			c.wait();
			// Keep sending until the close is seen: a request may still
			// complete (its buffer was advertised) but then isend fails.
			auto deadline = Clock::now() + 20s;
			ncclResult_t r = ncclSuccess;
			for (int seq = 4; r == ncclSuccess; seq++) {
				void *req = nullptr;
				r = p.isend()(sc, buf.data(), 4096, seq, mh, nullptr, &req);
				CHECK(Clock::now() < deadline);
				if (req) {
					ncclResult_t t = wait(p, req);
					CHECK(t == ncclSuccess || t == ncclRemoteError);
				} else if (r == ncclSuccess) {
					seq--; // not advertised: same sequence again
				}
			}
			CHECK(r == ncclRemoteError);
			OK(p.closeSend()(sc)); // with up to 4 sends never tested
			CHECK(p.counters().requests_live == 0);
			void *sc2 = connect_conn(p, c);
			OK(wait(p, post_send(p, sc2, buf.data(), 1 << 20, 0, mh)));
			c.wait();
			OK(p.closeSend()(sc2));
			OK(p.deregMr()(sc2, mh));
			c.signal();
		});
}

// The older table (NCCL < 2.28) moves data the same way.
Test(nccl_plugin, v10_table_transfers, .timeout = 60)
{
	run_pair(
		[&](Chan &c) {
			Plugin p(true);
			OK(p.init());
			void *rc = accept_conn(p, c);
			Buf buf(4 << 20);
			void *mh = nullptr;
			OK(p.regMr()(rc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			int got = -1;
			OK(wait(p, post_recv(p, rc, buf.data(), buf.len, 5, mh), &got));
			CHECK(got == (3 << 20) && verify(buf.data(), 3 << 20, 21));
			void *flush = &got;
			int fsz[1] = {got};
			void *datas[1] = {buf.data()};
			void *mhs[1] = {mh};
			OK(p.iflush()(rc, 1, datas, fsz, mhs, &flush));
			CHECK(flush == nullptr); // host memory: nothing to flush
			OK(p.closeRecv()(rc));
			OK(p.deregMr()(rc, mh));
			c.signal();
			c.wait();
		},
		[&](Chan &c) {
			Plugin p(true);
			OK(p.init());
			void *sc = connect_conn(p, c);
			Buf buf(3 << 20);
			fill(buf.data(), buf.len, 21);
			void *mh = nullptr;
			OK(p.regMr()(sc, buf.data(), buf.len, NCCL_PTR_HOST, &mh));
			OK(wait(p, post_send(p, sc, buf.data(), buf.len, 5, mh)));
			c.wait();
			OK(p.closeSend()(sc));
			OK(p.deregMr()(sc, mh));
			c.signal();
		});
}
