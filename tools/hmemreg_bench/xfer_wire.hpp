// SPDX-License-Identifier: MIT
// hmemreg_bench xfer: the private wire format between the writer and its
// targets (a child process over a socket pair, a bench server over TCP).
// The target protocol: one request, one reply, each a message framed by
// its 32-bit length on a stream socket (a socket pair with the child, TCP
// with a server). Requests: 'M' make, 'P' add peer, 'C' clear, 'N'
// notifications so far, 'Z' zero a region, 'V' verify a region, 'I' start
// iperf3 servers, 'Q' goodbye (the writer is done: a connection that ends
// without one broke). Replies: 'K' and what was asked for, or 'E' and the
// error's text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include <hmemreg/engine.hpp>

namespace hmemreg::bench::wire {

class Message {
public:
	Message() = default;
	explicit Message(std::string b) : b_(std::move(b)) {}
	template <class T> Message &put(const T &v)
	{
		b_.append(reinterpret_cast<const char *>(&v), sizeof(v));
		return *this;
	}
	Message &put_bytes(const void *p, size_t n)
	{
		put(static_cast<uint64_t>(n));
		b_.append(static_cast<const char *>(p), n);
		return *this;
	}
	Message &put_string(const std::string &s) { return put_bytes(s.data(), s.size()); }
	template <class T> T get()
	{
		T v;
		need(sizeof(v));
		std::memcpy(&v, b_.data() + at_, sizeof(v));
		at_ += sizeof(v);
		return v;
	}
	std::string get_string()
	{
		size_t n = get<uint64_t>();
		need(n);
		std::string s = b_.substr(at_, n);
		at_ += n;
		return s;
	}
	// A count of items of at least `each` bytes that follow, checked against
	// what is left (a bad count is an error, not a huge allocation).
	size_t get_count(size_t each)
	{
		const uint64_t n = get<uint64_t>();
		if (n > (b_.size() - at_) / each)
			throw Error(HMEMREG_EINVAL, "xfer: bad count in a message between bench processes");
		return static_cast<size_t>(n);
	}
	Bytes get_bytes()
	{
		std::string s = get_string();
		return Bytes(s.begin(), s.end());
	}
	const std::string &data() const { return b_; }
	// All read: bytes left over mean the two sides frame a request
	// differently (bench builds of different versions), not a request.
	void end() const
	{
		if (at_ != b_.size())
			throw Error(HMEMREG_EINVAL, "xfer: " + std::to_string(b_.size() - at_) +
							    " bytes too many in a message between bench processes"
							    " (both sides the same build?)");
	}

private:
	void need(size_t n) const
	{
		if (b_.size() - at_ < n)
			throw Error(HMEMREG_EINVAL, "xfer: short message between bench processes");
	}
	std::string b_;
	size_t at_ = 0;
};

constexpr size_t kMaxMessage = 1 << 16;

// Control connections over TCP: a peer that dies or a network that splits
// ends them within bounded time instead of leaving recv() blocked forever.
// Keepalive probes an idle connection (first after 5 s, then every second);
// TCP_USER_TIMEOUT drops it once data or probes stay unacknowledged for
// 10 s; a reply not there after kReplySeconds, or a request after
// kIdleSeconds (the client measures references between requests), is
// given up on.
constexpr int kUserTimeoutMs = 10'000;
constexpr int kReplySeconds = 60;
constexpr int kIdleSeconds = 120;

// Keepalive and the timeouts above on a control connection over TCP;
// recv_seconds: how long a receive waits.
void harden_control_socket(int fd, int recv_seconds);
// One message, framed.
void send_message(int fd, const Message &m);
// One message's bytes; empty when the other side is gone.
std::string recv_message(int fd);
// An error's text without its "xfer: ", to be quoted after another.
std::string unprefixed(const std::string &what);
// An engine configuration on the wire and back (the fields the bench sets).
void put_config(Message &m, const EngineConfig &c);
EngineConfig get_config(Message &m);
// "host:port", "[v6]:port", ":port" or "port" (any host for a server,
// this host for a client).
std::pair<std::string, std::string> split_host_port(const std::string &hp);
// A connected (or, with `listen`, listening) TCP socket for HOST:PORT.
int tcp_socket(const std::string &host_port, bool listen);

} // namespace hmemreg::bench::wire
