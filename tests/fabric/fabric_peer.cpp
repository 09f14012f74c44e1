// SPDX-License-Identifier: MIT
// A peer in another process (or network namespace) for the fabric suites.
//
//   fabric_peer PROVIDER NODE|- SIZE
//
// Opens an engine, registers SIZE zeroed bytes, prints
//   ADDR <hex address blob>
//   DESC <hex region descriptor>
// then for every transfer written into it: NOTE <tag> <bytes> <fnv1a64 of [0,bytes)>,
// and for every control message: MSG <len>. Exits on "QUIT" or end of stdin.
// "PEER <hex address>" adds that engine as a peer and prints PEERED (a writer
// with 4-byte immediate keys gets its index from a target that added it).
//
// As a writer (the engine's notify mode is the optional 4th argument:
// immediate, immediate4 for 4-byte keys, or message), on
// "WRITE <hex address> <hex descriptor> N CHUNK":
// splits its region into N slots, fills slot t with test_bytes::pattern(t + 1, i),
// writes each slot to the same slot of the target in CHUNK-byte chunks (tag
// t), all N transfers at once, and prints POSTED N. With 4-byte keys it
// first waits up to 10 s for the target's writer index.
//
// With FABRIC_PEER_CALLER_PROGRESS=1 the engine is driven from the main loop
// (no progress thread), and "DIE" exits at once between two progress calls:
// a crash that never leaves a provider lock held. libfabric 1.17's shm
// provider keeps a spin lock in each endpoint's shared region and takes it
// on every progress call; a process killed holding it makes every later send
// to it spin forever inside fi_sendmsg/fi_writemsg.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <csignal>

#include <poll.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <vector>

#include "engine/facade.hpp"
#include "test_bytes.hpp"

using namespace hmemreg::engine;

static void print_hex(const char *what, const Bytes &b)
{
	std::printf("%s ", what);
	for (uint8_t c : b)
		std::printf("%02x", c);
	std::printf("\n");
}

static Bytes unhex(const std::string &h)
{
	Bytes v;
	for (size_t i = 0; i + 1 < h.size(); i += 2)
		v.push_back(static_cast<uint8_t>(std::stoul(h.substr(i, 2), nullptr, 16)));
	return v;
}

static std::vector<TransferRef> write_slots(Facade &e, const Region &r, uint8_t *buf, size_t size,
					    const std::string &args)
{
	std::istringstream in(args);
	std::string addr, desc;
	size_t n = 0, chunk = 0;
	in >> addr >> desc >> n >> chunk;
	if (n == 0 || chunk == 0 || size / n == 0)
		throw hmemreg::Error(HMEMREG_EINVAL, "WRITE: bad slot count or chunk size");
	PeerId p = e.add_peer(unhex(addr), true);
	for (int i = 0; i < 10000 && e.caps().imm_key_bytes == 4 && !e.immediate_to(p); i++) {
		if (e.caps().progress.find("caller") != std::string::npos)
			e.progress();
		usleep(1000);
	}
	Bytes d = unhex(desc);
	const size_t slot = size / n;
	for (size_t t = 0; t < n; t++)
		test_bytes::fill(buf + t * slot, slot, t + 1);
	std::vector<TransferRef> v;
	for (size_t t = 0; t < n; t++) {
		std::vector<Chunk> ch;
		for (size_t off = 0; off < slot; off += chunk)
			ch.push_back({&r, t * slot + off, std::min(chunk, slot - off), t * slot + off});
		v.push_back(e.write(p, ch, d, t));
	}
	std::printf("POSTED %zu\n", n);
	std::fflush(stdout);
	return v;
}

int main(int argc, char **argv)
{
	// Never outlive the test process, also one that crashed while this one
	// was frozen (SIGSTOP): SIGKILL reaches a stopped process.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return 1;
	if (argc != 4 && argc != 5) {
		std::fprintf(stderr, "usage: fabric_peer PROVIDER NODE|- SIZE [immediate|immediate4|message]\n");
		return 2;
	}
	try {
		Config c;
		c.provider = argv[1];
		if (std::strcmp(argv[2], "-"))
			c.node = argv[2];
		size_t size = std::strtoull(argv[3], nullptr, 0);
		if (argc == 5) {
			c.notify = std::strcmp(argv[4], "message") ? Config::Notify::Immediate : Config::Notify::Message;
			if (!std::strcmp(argv[4], "immediate4"))
				c.imm_data_bytes = 4;
		}
		if (const char *v = std::getenv("FABRIC_PEER_CALLER_PROGRESS"); v && *v == '1')
			c.progress_threads = 0;
		void *mem = nullptr;
		if (posix_memalign(&mem, 4096, size))
			return 1;
		std::memset(mem, 0, size);
		std::unique_ptr<void, void (*)(void *)> hold(mem, std::free); // outlives the engine below
		auto *buf = static_cast<uint8_t *>(mem);
		Facade e(c);
		auto r = e.register_region(buf, size);
		e.on_notify([&](const Notification &n) {
			uint64_t h = 0xcbf29ce484222325ull;
			for (uint64_t i = 0; i < n.bytes && i < size; i++)
				h = (h ^ buf[i]) * 0x100000001b3ull;
			std::printf("NOTE %" PRIu64 " %" PRIu64 " %016" PRIx64 "\n", n.tag, n.bytes, h);
			std::fflush(stdout);
		});
		e.on_message([](const Message &m) {
			std::printf("MSG %zu\n", m.data.size());
			std::fflush(stdout);
		});
		print_hex("ADDR", e.address());
		print_hex("DESC", e.descriptor(*r));
		std::fflush(stdout);
		std::vector<TransferRef> writes;
		auto command = [&](const std::string &line) {
			if (line == "DIE")
				_exit(0); // a crash, but never inside a provider call (see the top)
			if (line.rfind("WRITE ", 0) == 0)
				writes = write_slots(e, *r, buf, size, line.substr(6));
			if (line.rfind("PEER ", 0) == 0) {
				e.add_peer(unhex(line.substr(5)));
				std::printf("PEERED\n");
				std::fflush(stdout);
			}
			return line != "QUIT";
		};
		std::string line;
		if (c.progress_threads) {
			while (std::getline(std::cin, line) && command(line)) {
			}
			return 0;
		}
		// Caller-driven: progress between non-blocking reads of stdin.
		std::string pending;
		for (;;) {
			e.progress();
			pollfd pf{0, POLLIN, 0};
			if (poll(&pf, 1, 0) <= 0)
				continue;
			char b[4096];
			ssize_t n = read(0, b, sizeof(b));
			if (n <= 0)
				return 0;
			pending.append(b, static_cast<size_t>(n));
			for (size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
				line = pending.substr(0, nl);
				pending.erase(0, nl + 1);
				if (!command(line))
					return 0;
			}
		}
	} catch (const hmemreg::Error &ex) {
		std::fprintf(stderr, "fabric_peer: %s\n", ex.what());
		return 1;
	}
}
