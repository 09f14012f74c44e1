// SPDX-License-Identifier: MIT
// A program of an outside user, built against the installed headers and
// libhmemreg.so alone (tests/host.d/13-public-headers.sh): two engines of
// one process over shm, through the C++ wrappers (hmemreg/engine.hpp over
// the C API). A scattered write lands and notifies the target with the
// writer's engine id and tag, a gathered message arrives whole, the
// engine's info, texts and region info say what they should, a bad call
// throws hmemreg::Error with the C API's code and a message, and the C
// config's size rule holds. Prints one line per check; exit 0 when all hold.
#include <hmemreg/engine.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const std::string &what)
{
	std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
	failures += !ok;
}

template <class F> bool eventually(F f)
{
	for (int i = 0; i < 10000 && !f(); i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	return f();
}

} // namespace

int main()
{
	try {
		hmemreg::EngineConfig cfg;
		cfg.provider = "shm";
		hmemreg::Engine a(cfg), b(cfg);
		check(a.caps().provider == "shm", "info: provider " + a.caps().provider);
		check(a.caps().raw.rails == 1 && a.caps().rail_domains.size() == 1, "info: one rail");
		check(a.id() != 0 && a.id() != b.id(), "info: engine ids differ");
		check(hmemreg::Engine::peer_engine_id(b.address()) == b.id(), "the id inside b's address is b's");
		check(a.describe().find("provider shm") != std::string::npos, "describe names the provider");

		std::atomic<uint64_t> tag{0}, sender{0}, bytes{0};
		std::string message;
		std::atomic<bool> got_message{false};
		b.on_notify([&](const hmemreg::Notification &n) {
			sender = n.sender;
			bytes = n.bytes;
			tag = n.tag;
		});
		b.on_message([&](const hmemreg::Message &m) {
			message.assign(m.data.begin(), m.data.end());
			got_message = true;
		});
		hmemreg::PeerId peer = a.add_peer(b.address(), true);

		constexpr size_t n = 1 << 20;
		std::vector<uint8_t> src(n), dst(n, 0);
		for (size_t i = 0; i < n; i++)
			src[i] = static_cast<uint8_t>(i * 7 + 1);
		hmemreg::RegionRef rs = a.register_region(src.data(), n), rd = b.register_region(dst.data(), n);
		const hmemreg_region_info ri = rs->info();
		check(ri.iface == HMEMREG_IFACE_HOST && ri.device == -1 && !(ri.flags & HMEMREG_REGION_STAGED) &&
			      ri.addr == src.data() && ri.length == n,
		      "region info: host memory, not staged, its address and length");
		const hmemreg::Chunk chunks[2] = {{rs->handle(), 0, n / 2, n / 2}, {rs->handle(), n / 2, n / 2, 0}};
		hmemreg::TransferRef t = a.write(peer, chunks, b.descriptor(*rd), 77);
		check(a.wait(*t, std::chrono::seconds(20)) && t->status() == 0, "the write completes: " + t->error());
		check(eventually([&] { return tag.load() == 77; }), "the target is notified with the tag");
		check(sender.load() == a.id() && bytes.load() == n, "... with the writer's engine id and the bytes");
		check(std::memcmp(dst.data(), src.data() + n / 2, n / 2) == 0 &&
			      std::memcmp(dst.data() + n / 2, src.data(), n / 2) == 0,
		      "every byte landed where its chunk said");

		std::atomic<int> sent{1};
		const std::string head = "head:", body = "and body";
		a.send(peer, {reinterpret_cast<const uint8_t *>(head.data()), head.size()},
		       {reinterpret_cast<const uint8_t *>(body.data()), body.size()},
		       [&](const hmemreg::Transfer &x) { sent = x.status(); });
		const bool arrived = eventually([&] { return got_message.load(); });
		check(arrived && message == "head:and body", "a gathered message arrives whole: '" + message + "'");
		check(eventually([&] { return sent.load() == 0; }), "its callback says it completed");
		const struct hmemreg_engine_path_stats ps = a.path_stats();
		check(ps.direct_writes == 1 && ps.staged_writes == 0, "path stats: one direct write");

		// Errors: a clear code and message, nothing posted.
		try {
			a.write(peer + 1000, chunks, b.descriptor(*rd), 1);
			check(false, "a write to an unknown peer throws");
		} catch (const hmemreg::Error &e) {
			check(e.code() == HMEMREG_ENOENT && std::strlen(e.what()) > 0,
			      std::string("a write to an unknown peer: ") + hmemreg_strerror(e.code()) + ": " + e.what());
		}
		try {
			a.text(HMEMREG_ENGINE_TEXT_RAIL_DOMAIN, 5);
			check(false, "rail 5's domain throws");
		} catch (const hmemreg::Error &e) {
			check(e.code() == HMEMREG_ENOENT, std::string("rail 5's domain: ") + e.what());
		}
		rs.reset(); // while nothing uses it; b's region goes with b
		a.remove_peer(peer);
	} catch (const hmemreg::Error &e) {
		check(false, std::string("unexpected: ") + hmemreg_strerror(e.code()) + ": " + e.what());
	}

	// The C config: a size below the first version's, and unknown nonzero
	// bytes past the library's struct, are refused with a message.
	struct {
		hmemreg_engine_config c;
		uint64_t newer;
	} big;
	hmemreg_engine_config_init(&big.c);
	big.c.provider = "shm";
	big.c.size = 8;
	hmemreg_engine_t *e = nullptr;
	int rc = hmemreg_engine_create(&big.c, &e);
	check(rc == -HMEMREG_EINVAL && !e, std::string("config size 8: ") + hmemreg_engine_last_error());
	big.c.size = sizeof(big);
	big.newer = 1;
	rc = hmemreg_engine_create(&big.c, &e);
	check(rc == -HMEMREG_ENOTSUP && !e, std::string("a field this library does not know: ") + hmemreg_engine_last_error());
	big.newer = 0;
	rc = hmemreg_engine_create(&big.c, &e);
	check(rc == 0 && e, "a larger config whose unknown tail is zero is taken");
	hmemreg_engine_destroy(e);
	std::printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
