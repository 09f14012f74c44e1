// SPDX-License-Identifier: MIT
#include "export_path.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <hmemreg/hmemreg.h>

namespace {

std::atomic<uint64_t> g_notes{0};

void on_notify(void *, uint64_t, uint64_t, uint64_t)
{
	g_notes.fetch_add(1);
}

int bail(const char *what, int rc)
{
	std::fprintf(stderr, "hmemreg_demo: dma-buf path: %s: %s (%s%s%s)\n", what, hmemreg_strerror(rc),
		     hmemreg_export_last_error(), *hmemreg_engine_last_error() ? "; " : "",
		     hmemreg_engine_last_error());
	return 1;
}

// The describe() line that says how exports register here.
std::string export_line(hmemreg_engine_t *e)
{
	std::vector<char> d(8192);
	hmemreg_engine_describe(e, d.data(), d.size());
	std::string s(d.data());
	size_t at = s.find("hmemreg.ko exports:");
	return at == std::string::npos ? s : s.substr(at, s.find('\n', at) - at);
}

} // namespace

int demo_export_path(const char *provider, const char *node, size_t mib, const char *stat)
{
	const uint32_t api = hmemreg_fabric_api_version();
	std::printf("dma-buf path: libfabric API %u.%u, provider %s\n", api >> 16, api & 0xffff, provider);
	hmemreg_engine_config c;
	hmemreg_engine_config_init(&c);
	c.provider = provider;
	c.node = node;
	hmemreg_engine_t *a = nullptr, *b = nullptr;
	int rc;
	if ((rc = hmemreg_engine_create(&c, &a)) || (rc = hmemreg_engine_create(&c, &b)))
		return bail("engine", rc);
	std::printf("  %s\n", export_line(a).c_str());
	hmemreg_engine_set_callbacks(b, on_notify, nullptr, nullptr);
	char addr[512];
	size_t alen = sizeof(addr);
	uint64_t b_at_a = 0, a_at_b = 0;
	if ((rc = hmemreg_engine_address(b, addr, &alen)) || (rc = hmemreg_engine_add_peer(a, addr, alen, 1, &b_at_a)))
		return bail("peer", rc);
	alen = sizeof(addr);
	if ((rc = hmemreg_engine_address(a, addr, &alen)) || (rc = hmemreg_engine_add_peer(b, addr, alen, 1, &a_at_b)))
		return bail("peer", rc);

	const size_t len = mib << 20;
	hmemreg_export_t *src = nullptr, *dst = nullptr;
	if ((rc = hmemreg_export_devmem(len, &src)) || (rc = hmemreg_export_devmem(len, &dst)))
		return bail("device memory export", rc);
	auto *s = static_cast<unsigned char *>(hmemreg_export_addr(src));
	for (size_t i = 0; i < len; i++)
		s[i] = static_cast<unsigned char>(i * 7 + (i >> 12));
	std::printf("  device memory: exports %llu (A) and %llu (B), %zu MiB each, filled through the CPU mapping\n",
		    static_cast<unsigned long long>(hmemreg_export_id(src)),
		    static_cast<unsigned long long>(hmemreg_export_id(dst)), mib);
	hmemreg_region_t *rs = nullptr, *rd = nullptr;
	if ((rc = hmemreg_engine_reg_export(a, src, 0, len, &rs)) || (rc = hmemreg_engine_reg_export(b, dst, 0, len, &rd)))
		return bail("registering the exports", rc);
	char desc[256];
	size_t dlen = sizeof(desc);
	if ((rc = hmemreg_region_descriptor(rd, desc, &dlen)))
		return bail("descriptor", rc);
	// 1 MiB chunks, the second half first: a scattered write.
	std::vector<hmemreg_chunk> ch;
	const size_t piece = std::min<size_t>(len, 1u << 20);
	for (size_t off = 0; off < len; off += piece)
		ch.push_back({rs, off, piece, off});
	std::rotate(ch.begin(), ch.begin() + ch.size() / 2, ch.end());
	const uint64_t want = g_notes.load() + 1;
	auto t0 = std::chrono::steady_clock::now();
	hmemreg_xfer_t *x = nullptr;
	if ((rc = hmemreg_engine_write(a, b_at_a, ch.data(), ch.size(), desc, dlen, 1, nullptr, nullptr, &x)) ||
	    (rc = hmemreg_xfer_wait(a, x, 60000)))
		return bail("write", rc);
	hmemreg_xfer_release(x);
	for (int i = 0; i < 60000 && g_notes.load() < want; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
	const int same = std::memcmp(hmemreg_export_addr(dst), s, len) == 0 && g_notes.load() >= want;
	struct hmemreg_engine_path_stats ps{};
	ps.size = sizeof(ps); // (without it the call refused and the line said 0 writes)
	if ((rc = hmemreg_engine_path_stats(a, &ps)))
		return bail("path stats", rc);
	std::printf("  write: devmem (A) -> devmem (B), %zu chunks, %zu MiB in %.1f ms, %llu direct RDMA write(s), "
		    "%llu staged: %s through B's devmem mapping\n",
		    ch.size(), mib, ms, static_cast<unsigned long long>(ps.direct_writes),
		    static_cast<unsigned long long>(ps.staged_writes), same ? "bytes verified" : "BYTES DIFFER");
	std::printf("  the module's ledger while registered (the NIC's importer pins both exports):\n");
	std::fflush(stdout);
	std::string cmd = std::string(stat) + " --kernel";
	if (std::system(cmd.c_str()) != 0)
		std::printf("  (%s failed)\n", cmd.c_str());
	hmemreg_region_release(rs);
	hmemreg_region_release(rd);
	// Freed while cached: the caches drop the registrations (the NIC unpins)
	// before the memory goes back to the pool.
	int f1 = hmemreg_export_free(src), f2 = hmemreg_export_free(dst);
	std::printf("  exports freed (%s, %s): cached registrations dropped first, the NIC unpinned\n",
		    hmemreg_strerror(f1), hmemreg_strerror(f2));
	hmemreg_engine_destroy(a);
	hmemreg_engine_destroy(b);
	return same && !f1 && !f2 ? 0 : 1;
}
