// SPDX-License-Identifier: MIT
#include "xfer_wire.hpp"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <vector>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace hmemreg::bench::wire {

using Config = EngineConfig;

namespace {

void set_timeout(int fd, int optname, int seconds)
{
	timeval tv{seconds, 0};
	if (::setsockopt(fd, SOL_SOCKET, optname, &tv, sizeof(tv)) < 0)
		throw Error(HMEMREG_ESYS, std::string("xfer: setsockopt(SO_RCVTIMEO/SO_SNDTIMEO): ") +
						  std::strerror(errno));
}

} // namespace

void harden_control_socket(int fd, int recv_seconds)
{
	const int one = 1, idle = 5, interval = 1, probes = 5, user = kUserTimeoutMs;
	if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0 ||
	    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) < 0 ||
	    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval)) < 0 ||
	    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes)) < 0 ||
	    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user)) < 0)
		throw Error(HMEMREG_ESYS, std::string("xfer: control connection keepalive: ") + std::strerror(errno));
	set_timeout(fd, SO_RCVTIMEO, recv_seconds);
	set_timeout(fd, SO_SNDTIMEO, kReplySeconds);
}

void send_message(int fd, const Message &m)
{
	if (m.data().size() > kMaxMessage)
		throw Error(HMEMREG_EINVAL, "xfer: a message of " + std::to_string(m.data().size()) +
						    " bytes for the other bench process (at most " +
						    std::to_string(kMaxMessage) + ")");
	const uint32_t len = static_cast<uint32_t>(m.data().size());
	std::string frame(reinterpret_cast<const char *>(&len), sizeof(len));
	frame += m.data();
	for (size_t at = 0; at < frame.size();) {
		ssize_t n = ::send(fd, frame.data() + at, frame.size() - at, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			throw Error(HMEMREG_ESYS, std::string("xfer: cannot send to the other bench process: ") +
							  (errno == EAGAIN || errno == EWOULDBLOCK
								   ? std::string("timed out")
								   : std::string(std::strerror(errno))));
		at += static_cast<size_t>(n);
	}
}

namespace {

// False at a clean end of the stream before the first byte.
bool recv_exactly(int fd, char *p, size_t len)
{
	for (size_t at = 0; at < len;) {
		ssize_t n = ::recv(fd, p + at, len - at, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && at == 0)
			return false;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			throw Error(HMEMREG_ESYS, "xfer: the other bench process sent nothing within the control "
						  "connection's timeout (gone, or the network split)");
		if (n < 0)
			throw Error(HMEMREG_ESYS, std::string("xfer: from the other bench process: ") + std::strerror(errno) +
							  (errno == ETIMEDOUT ? " (no answer to keepalive or data: gone, or the network split)"
									      : ""));
		if (n == 0)
			throw Error(HMEMREG_ESYS, "xfer: the other bench process left in the middle of a message");
		at += static_cast<size_t>(n);
	}
	return true;
}

} // namespace

std::string recv_message(int fd)
{
	uint32_t len;
	if (!recv_exactly(fd, reinterpret_cast<char *>(&len), sizeof(len)))
		return {};
	if (len == 0 || len > kMaxMessage)
		throw Error(HMEMREG_EINVAL, "xfer: a message of " + std::to_string(len) +
						    " bytes between bench processes (1 to " +
						    std::to_string(kMaxMessage) + ")");
	std::string b(len, '\0');
	if (!recv_exactly(fd, b.data(), len))
		throw Error(HMEMREG_ESYS, "xfer: the other bench process left in the middle of a message");
	return b;
}

std::string unprefixed(const std::string &what)
{
	return what.rfind("xfer: ", 0) == 0 ? what.substr(6) : what;
}

// The fields of Config the bench sets, on the wire (their widths fixed:
// 64-bit imm_data_bytes, write_iov and max_write, one byte for post_more).
void put_config(Message &m, const Config &c)
{
	m.put_string(c.provider).put_string(c.node);
	m.put(c.rails).put(c.progress_threads).put(c.notify).put(static_cast<uint64_t>(c.imm_data_bytes));
	m.put(static_cast<uint64_t>(c.write_iov)).put(c.max_write);
	m.put(static_cast<uint8_t>((c.flags & HMEMREG_ENGINE_POST_MORE) != 0));
}

Config get_config(Message &m)
{
	Config c;
	c.provider = m.get_string();
	c.node = m.get_string();
	c.rails = m.get<decltype(c.rails)>();
	c.progress_threads = m.get<decltype(c.progress_threads)>();
	c.notify = m.get<decltype(c.notify)>();
	const uint64_t imm = m.get<uint64_t>(), iov = m.get<uint64_t>();
	c.max_write = m.get<decltype(c.max_write)>();
	if (m.get<uint8_t>() != 0) // any byte is a valid one, not so a bool
		c.flags |= HMEMREG_ENGINE_POST_MORE;
	if (imm > UINT32_MAX || iov > UINT32_MAX)
		throw Error(HMEMREG_EINVAL, "xfer: imm_data_bytes " + std::to_string(imm) + ", write_iov " +
						    std::to_string(iov) + " (at most 32 bits each)");
	c.imm_data_bytes = static_cast<uint32_t>(imm);
	c.write_iov = static_cast<uint32_t>(iov);
	// Threads and endpoints a client may make this side open: bounded.
	constexpr unsigned kMaxRails = 64;
	if (c.rails > kMaxRails || c.progress_threads > kMaxRails)
		throw Error(HMEMREG_EINVAL, "xfer: " + std::to_string(c.rails) + " rails, " +
						    std::to_string(c.progress_threads) + " progress threads (at most " +
						    std::to_string(kMaxRails) + ")");
	if (c.notify != Config::Notify::Auto && c.notify != Config::Notify::Immediate &&
	    c.notify != Config::Notify::Message)
		throw Error(HMEMREG_EINVAL, "xfer: unknown notification mode");
	return c;
}

std::pair<std::string, std::string> split_host_port(const std::string &hp)
{
	if (!hp.empty() && hp.find_first_not_of("0123456789") == std::string::npos)
		return {"", hp}; // a port alone
	const size_t colon = hp.rfind(':');
	if (colon == std::string::npos || colon + 1 == hp.size())
		throw Error(HMEMREG_EINVAL, "xfer: '" + hp + "' is not HOST:PORT");
	std::string host = hp.substr(0, colon);
	if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2);
	return {host, hp.substr(colon + 1)};
}

int tcp_socket(const std::string &host_port, bool listen)
{
	auto [host, port] = split_host_port(host_port);
	addrinfo hints{};
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = listen ? AI_PASSIVE : 0;
	addrinfo *res = nullptr;
	int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
	if (rc != 0)
		throw Error(HMEMREG_EINVAL, "xfer: " + host_port + ": " + ::gai_strerror(rc));
	std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(res, ::freeaddrinfo);
	// Any host: IPv6's any address first, which takes IPv4 clients too
	// (0.0.0.0, first in getaddrinfo's list, would shut out IPv6 ones).
	std::vector<addrinfo *> order;
	for (addrinfo *a = res; a; a = a->ai_next)
		order.push_back(a);
	if (listen && host.empty())
		std::stable_partition(order.begin(), order.end(), [](addrinfo *a) { return a->ai_family == AF_INET6; });
	int err = 0;
	for (addrinfo *a : order) {
		int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); // small request/reply
		if (listen)
			::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!listen) {
			timeval tv{30, 0}; // connect() gives up after this (a host that never answers)
			::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		}
		if (listen && a->ai_family == AF_INET6) {
			int zero = 0; // IPv4 too, whatever net.ipv6.bindv6only says
			::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
		if (listen ? ::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1) == 0
			   : ::connect(fd, a->ai_addr, a->ai_addrlen) == 0)
			return fd;
		err = errno;
		::close(fd);
	}
	throw Error(HMEMREG_ESYS, "xfer: cannot " + std::string(listen ? "listen on " : "connect to ") + host_port +
					  ": " + std::strerror(err));
}

} // namespace hmemreg::bench::wire
