// SPDX-License-Identifier: MIT
// Two "hosts": this process in one network namespace, fabric_peer in another,
// joined by a veth pair; tcp;ofi_rxm over the veth addresses. The namespaces
// are set up by tests/host.d/40-fabric.sh, which passes them in:
//   HMEMREG_NETNS_PEER  namespace of the peer     HMEMREG_NETNS_ADDR  our address
//   HMEMREG_NETNS_PEER_ADDR  the peer's address
#include <cstdlib>

#include "peer_process.hpp"

using namespace fx;

static const char *env(const char *n)
{
	const char *v = std::getenv(n);
	if (!v || !*v)
		cr_skip_test("needs %s: run by tests/host.d/40-fabric.sh (root, ip netns)", n);
	return v;
}

Test(netns, write_and_send_across_veth, .timeout = 120)
{
	const char *ns = env("HMEMREG_NETNS_PEER");
	const char *mine = env("HMEMREG_NETNS_ADDR");
	const char *theirs = env("HMEMREG_NETNS_PEER_ADDR");
	const size_t size = 16 << 20;
	PeerProcess peer({"ip", "netns", "exec", ns, FABRIC_PEER, "tcp;ofi_rxm", theirs, std::to_string(size)});
	Config c = loopback("tcp;ofi_rxm");
	c.node = mine;
	Facade a(c);
	cr_assert(a.caps().fabric.find(mine) != std::string::npos || a.caps().fabric.find("/") != std::string::npos,
		  "%s", a.caps().describe().c_str());
	PeerId p = a.add_peer(peer.address, true);
	Buffer src(size);
	fill(src.data(), size, 99);
	auto rs = a.register_region(src.data(), size);
	// 1024 chunks of 16 KiB, destination order reversed.
	std::vector<Chunk> ch;
	for (size_t k = 0; k < 1024; k++)
		ch.push_back({rs.get(), k << 14, 1 << 14, (1023 - k) << 14});
	auto t = a.write(p, ch, peer.descriptor, 5);
	cr_assert(a.wait(*t, 60s));
	cr_assert_eq(t->status(), 0, "%s", t->error().c_str());
	// What the peer must hold: chunk k at slot 1023-k.
	Buffer want(size);
	for (size_t k = 0; k < 1024; k++)
		std::memcpy(want.data() + ((1023 - k) << 14), src.data() + (k << 14), 1 << 14);
	char line[128];
	std::snprintf(line, sizeof(line), "NOTE 5 %zu %016llx", size,
		      static_cast<unsigned long long>(fnv1a(want.data(), size)));
	std::string got = peer.line();
	cr_assert_eq(got, std::string(line), "peer in %s saw '%s', want '%s'", ns, got.c_str(), line);
	uint8_t hello[5] = {'h', 'e', 'l', 'l', 'o'};
	auto m = a.send(p, hello);
	cr_assert(a.wait(*m, 20s) && m->status() == 0, "%s", m->error().c_str());
	cr_assert_eq(peer.line(), std::string("MSG 5"));
}
