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
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "engine/engine.hpp"

using namespace hmemreg::engine;

static void print_hex(const char *what, const Bytes &b)
{
	std::printf("%s ", what);
	for (uint8_t c : b)
		std::printf("%02x", c);
	std::printf("\n");
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		std::fprintf(stderr, "usage: fabric_peer PROVIDER NODE|- SIZE\n");
		return 2;
	}
	try {
		Config c;
		c.provider = argv[1];
		if (std::strcmp(argv[2], "-"))
			c.node = argv[2];
		size_t size = std::strtoull(argv[3], nullptr, 0);
		void *mem = nullptr;
		if (posix_memalign(&mem, 4096, size))
			return 1;
		std::memset(mem, 0, size);
		auto *buf = static_cast<uint8_t *>(mem);
		Engine e(c);
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
		std::string line;
		while (std::getline(std::cin, line) && line != "QUIT") {
		}
		return 0;
	} catch (const hmemreg::Error &ex) {
		std::fprintf(stderr, "fabric_peer: %s\n", ex.what());
		return 1;
	}
}
