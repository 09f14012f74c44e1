// SPDX-License-Identifier: MIT
#include "xfer_server.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "reference_tools.hpp"
#include "xfer_payload.hpp"
#include "xfer_served.hpp"
#include "xfer_wire.hpp"

namespace hmemreg::bench {

using Config = EngineConfig;
using wire::Message;

namespace {

// One request. `node`: the fabric address of this side's engines (a server
// on another host has its own; empty: the writer's, as both are local).
// `remote`: the writer is across TCP, so it has no say in this process's
// addresses: every region is allocated here.
void handle(Served &s, Spawned &iperf, const std::string &node, bool remote, Message &req, Message &rep)
{
	const char op = req.get<char>();
	if (op == 'M') {
		Config cfg = wire::get_config(req);
		if (!node.empty())
			cfg.node = node;
		const size_t nregions = req.get_count(sizeof(uintptr_t) + sizeof(uint64_t));
		constexpr size_t kMaxRegions = 8;
		if (nregions == 0 || nregions > kMaxRegions)
			throw Error(HMEMREG_EINVAL, "xfer: a target engine with " + std::to_string(nregions) +
							    " regions (1 to " + std::to_string(kMaxRegions) + ")");
		std::vector<Targets::Span> regions(nregions);
		for (auto &r : regions) {
			const uintptr_t p = req.get<uintptr_t>();
			const uint64_t n = req.get<uint64_t>();
			if (remote && p)
				throw Error(HMEMREG_EINVAL, "xfer: a region at an address a remote writer chose (the server allocates its buffers)");
			r = {reinterpret_cast<void *>(p), static_cast<size_t>(n)};
		}
		req.end();
		TargetEngine t = s.make(cfg, regions);
		rep.put('K').put(t.slot).put(static_cast<uint8_t>(t.staged)).put_bytes(t.address.data(), t.address.size());
		for (const Bytes &d : t.descriptors)
			rep.put_bytes(d.data(), d.size());
	} else if (op == 'P') {
		const unsigned slot = req.get<unsigned>();
		const Bytes writer = req.get_bytes();
		req.end();
		s.add_peer(slot, writer);
		rep.put('K');
	} else if (op == 'C') {
		req.end();
		s.clear();
		rep.put('K');
	} else if (op == 'N') {
		const unsigned slot = req.get<unsigned>();
		req.end();
		rep.put('K').put(static_cast<uint64_t>(s.notes(slot)));
	} else if (op == 'Z' || op == 'V') {
		const unsigned slot = req.get<unsigned>(), i = req.get<unsigned>();
		const uint64_t size = req.get<uint64_t>();
		// The bench verifies chunks of 64 bytes or more; more chunks would
		// cost more memory than the region (placements()).
		const uint64_t nchunks = op == 'V' ? req.get<uint64_t>() : 0;
		req.end();
		std::span<uint8_t> r = s.region(slot, i);
		if (size > r.size())
			throw Error(HMEMREG_EINVAL, "xfer: " + std::to_string(size) + " bytes of a target region of " +
							    std::to_string(r.size()));
		if (op == 'Z') {
			std::memset(r.data(), 0, size);
		} else {
			if (nchunks == 0 || nchunks > size / 64)
				throw Error(HMEMREG_EINVAL, "xfer: verify " + std::to_string(nchunks) + " chunks of " +
								    std::to_string(size) + " bytes");
			std::vector<uint8_t> want = expected_target(size, nchunks);
			auto at = std::mismatch(want.begin(), want.end(), r.begin()).first;
			if (at != want.end())
				throw Error(HMEMREG_EFABRIC, "xfer: the target's bytes differ from offset " +
								     std::to_string(at - want.begin()));
		}
		rep.put('K');
	} else if (op == 'Q') {
		req.end();
		rep.put('K');
	} else if (op == 'I') {
		const int port0 = req.get<int>();
		const unsigned streams = req.get<unsigned>();
		req.end();
		if (streams == 0 || streams > 64 || port0 <= 0 || port0 + static_cast<int>(streams) > 65536)
			throw Error(HMEMREG_EINVAL, "xfer: iperf3 servers: bad ports");
		iperf.stop(); // the previous row's
		start_iperf3_servers(iperf, port0, streams, node);
		rep.put('K').put_string(node); // bound there if not empty
	} else {
		throw Error(HMEMREG_EINVAL, std::string("xfer: unknown request '") + op + "'");
	}
}

// Requests from one writer until it says goodbye ('Q'). Throws when the
// connection fails or ends without one (the writer died, or the network
// broke).
void serve_connection(int fd, Served &s, const std::string &node, bool remote)
{
	Spawned iperf; // iperf3 servers the writer asked for
	for (;;) {
		Message req(wire::recv_message(fd));
		if (req.data().empty())
			throw Error(HMEMREG_ESYS, "xfer: the writer's connection ended without its goodbye "
						  "(it died, or the connection broke)");
		const bool bye = req.data()[0] == 'Q';
		Message rep;
		try {
			handle(s, iperf, node, remote, req, rep);
		} catch (const std::exception &e) {
			rep = Message();
			rep.put('E').put_string(e.what());
		}
		wire::send_message(fd, rep);
		if (bye && rep.data()[0] == 'K')
			return;
	}
}

} // namespace

[[noreturn]] void serve_child(int fd, std::atomic<size_t> *counters, size_t ncounters) noexcept
{
	try {
		Served s(counters, ncounters);
		serve_connection(fd, s, {}, false);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "xfer: target process: %s\n", wire::unprefixed(e.what()).c_str());
		::_exit(1);
	}
	::_exit(0);
}

int serve(const std::string &host_port, const std::string &node)
{
	const int lfd = wire::tcp_socket(host_port, true);
	// The address bound, port 0 resolved: a script may pick no port itself
	// and read it here.
	std::string bound = host_port;
	sockaddr_storage sa{};
	socklen_t salen = sizeof(sa);
	char h[NI_MAXHOST], p[NI_MAXSERV];
	if (::getsockname(lfd, reinterpret_cast<sockaddr *>(&sa), &salen) == 0 &&
	    ::getnameinfo(reinterpret_cast<sockaddr *>(&sa), salen, h, sizeof(h), p, sizeof(p),
			  NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		bound = (sa.ss_family == AF_INET6 ? "[" + std::string(h) + "]" : std::string(h)) + ":" + p;
	std::fprintf(stderr, "xfer: serving target engines on %s%s%s\n", bound.c_str(),
		     node.empty() ? "" : ", fabric address ", node.c_str());
	if (node.empty())
		std::fprintf(stderr, "xfer: --serve without --node: the engines take the client's fabric address, "
				     "right only with the client on this host\n");
	int fd;
	do
		fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	::close(lfd);
	if (fd < 0)
		throw Error(HMEMREG_ESYS, std::string("xfer: accept: ") + std::strerror(errno));
	int one = 1;
	::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int rc = 0;
	{
		Served s(nullptr, 0);
		try {
			wire::harden_control_socket(fd, wire::kIdleSeconds);
			serve_connection(fd, s, node, true);
		} catch (const Error &e) {
			std::fprintf(stderr, "%s\n", e.what());
			rc = 1;
		}
	}
	::close(fd);
	if (rc)
		std::fprintf(stderr, "xfer: the bench server ends with exit 1: its client's connection broke\n");
	return rc;
}

} // namespace hmemreg::bench
