// SPDX-License-Identifier: MIT
#include "xfer_target.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace hmemreg::bench {

uint8_t pattern(size_t i)
{
	return static_cast<uint8_t>(i * 131 + 7 + (i >> 12));
}

std::vector<Placement> placements(size_t size, size_t nchunks)
{
	std::vector<Placement> v;
	const size_t per = size / nchunks;
	for (size_t k = 0; k < nchunks; k++) {
		const size_t len = k + 1 == nchunks ? size - per * k : per;
		v.push_back({per * k, len, nchunks == 1 ? 0 : size - per * k - len});
	}
	return v;
}

std::vector<uint8_t> expected_target(size_t size, size_t nchunks)
{
	std::vector<uint8_t> want(size);
	for (const Placement &c : placements(size, nchunks))
		for (size_t i = 0; i < c.len; i++)
			want[c.remote + i] = pattern(c.local + i);
	return want;
}

pid_t spawn_quiet(std::vector<std::string> args)
{
	posix_spawn_file_actions_t fa;
	if (int e = posix_spawn_file_actions_init(&fa))
		throw Error(HMEMREG_ESYS, std::string("xfer: posix_spawn: ") + std::strerror(e));
	std::unique_ptr<posix_spawn_file_actions_t, int (*)(posix_spawn_file_actions_t *)> hold(
		&fa, posix_spawn_file_actions_destroy);
	int e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (!e)
		e = posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (e)
		throw Error(HMEMREG_ESYS, std::string("xfer: posix_spawn: ") + std::strerror(e));
	std::vector<char *> argv;
	for (std::string &a : args)
		argv.push_back(a.data());
	argv.push_back(nullptr);
	pid_t pid;
	if ((e = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ)))
		throw Error(HMEMREG_ESYS, "xfer: cannot start " + args[0] + ": " + std::strerror(e));
	return pid;
}

void Spawned::start(std::vector<std::string> argv)
{
	pids_.push_back(spawn_quiet(std::move(argv)));
}

void Spawned::stop() noexcept
{
	for (pid_t pid : pids_) {
		::kill(pid, SIGTERM); // a server that got no client would wait forever
		int st;
		while (::waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	pids_.clear();
}

void start_iperf3_servers(Spawned &s, int port0, unsigned streams, const std::string &bind)
{
	for (unsigned i = 0; i < streams; i++) {
		std::vector<std::string> args{"iperf3", "-s", "-1", "-p", std::to_string(port0 + static_cast<int>(i))};
		if (!bind.empty())
			args.insert(args.end(), {"-B", bind});
		s.start(std::move(args));
	}
}

void Targets::zero(unsigned, unsigned, size_t)
{
	throw Error(HMEMREG_ENOTSUP, "xfer: only a remote target zeroes its buffers");
}

bool Targets::verify(unsigned, unsigned, size_t, size_t, std::string &)
{
	throw Error(HMEMREG_ENOTSUP, "xfer: only a remote target verifies its buffers");
}

std::string Targets::start_iperf3(int, unsigned)
{
	throw Error(HMEMREG_ENOTSUP, "xfer: only a remote target starts iperf3 servers");
}

namespace {

using Config = EngineConfig;

struct FreeDeleter {
	void operator()(void *p) const { std::free(p); }
};

// Engines and regions of one process's targets. Counters first: they
// outlive the engines' notification callbacks.
class Served {
public:
	explicit Served(std::atomic<size_t> *counters, size_t ncounters) : counters_(counters), ncounters_(ncounters) {}
	~Served() { clear(); }

	// A region whose address is null is allocated here (page-aligned, zeroed).
	TargetEngine make(const Config &cfg, std::span<const Targets::Span> regions)
	{
		const unsigned slot = static_cast<unsigned>(engines_.size());
		if (slot >= (counters_ ? ncounters_ : kMaxEngines))
			throw Error(HMEMREG_ENOMEM, "xfer: more than " +
							    std::to_string(counters_ ? ncounters_ : kMaxEngines) +
							    " target engines");
		// What this side allocates: bounded, whoever asks (a remote client
		// may be anything that reached the port).
		size_t alloc = 0;
		for (const auto &[p, n] : regions)
			if (!p && (n == 0 || n > max_owned() - owned_ - alloc))
				throw Error(HMEMREG_ENOMEM, "xfer: a target buffer of " + std::to_string(n) +
								    " bytes (" + std::to_string(owned_ + alloc) +
								    " held, at most " + std::to_string(max_owned()) +
								    ": half this host's memory)");
			else if (!p)
				alloc += n;
		if (!counters_ && own_.size() <= slot)
			own_.emplace_back(0); // kept by a failed make(), for the next one
		std::atomic<size_t> *c = counters_ ? &counters_[slot] : &own_[slot];
		c->store(0);
		auto e = std::make_unique<Engine>(cfg);
		e->on_notify([c](const Notification &) { c->fetch_add(1, std::memory_order_relaxed); });
		TargetEngine t{slot, e->address(), {}, [c] { return c->load(); }};
		// Kept only once all are registered: a failure midway drops this
		// engine's regions (before it) and leaves the others as they were.
		std::vector<std::unique_ptr<void, FreeDeleter>> mem;
		std::vector<Targets::Span> spans;
		std::vector<RegionRef> regs;
		for (auto [p, n] : regions) {
			if (!p) {
				if (posix_memalign(&p, 4096, n))
					throw Error(HMEMREG_ENOMEM, "xfer: cannot allocate a target buffer of " +
									    std::to_string(n) + " bytes");
				mem.emplace_back(p);
				std::memset(p, 0, n);
			}
			spans.push_back({p, n});
			regs.push_back(e->register_region(p, n));
			t.descriptors.push_back(e->descriptor(*regs.back()));
			t.staged = t.staged || regs.back()->staged();
		}
		regions_.reserve(regions_.size() + regs.size());
		engines_.reserve(engines_.size() + 1);
		spans_.reserve(spans_.size() + 1);
		mem_.reserve(mem_.size() + mem.size());
		regions_.insert(regions_.end(), regs.begin(), regs.end());
		for (auto &m : mem)
			mem_.push_back(std::move(m));
		spans_.push_back(std::move(spans));
		engines_.push_back(std::move(e));
		owned_ += alloc;
		return t;
	}
	void add_peer(unsigned slot, const Bytes &writer) { engine(slot).add_peer(writer); }
	size_t notes(unsigned slot)
	{
		engine(slot);
		return counters_ ? counters_[slot].load() : own_[slot].load();
	}
	std::span<uint8_t> region(unsigned slot, unsigned i)
	{
		engine(slot);
		if (i >= spans_[slot].size())
			throw Error(HMEMREG_EINVAL, "xfer: target engine " + std::to_string(slot) + " has no region " +
							    std::to_string(i));
		return {static_cast<uint8_t *>(spans_[slot][i].first), spans_[slot][i].second};
	}
	void clear() noexcept
	{
		regions_.clear(); // registrations go before their engines, buffers after
		engines_.clear();
		spans_.clear();
		mem_.clear();
		own_.clear();
		owned_ = 0;
	}

private:
	Engine &engine(unsigned slot)
	{
		if (slot >= engines_.size())
			throw Error(HMEMREG_EINVAL, "xfer: no target engine " + std::to_string(slot));
		return *engines_[slot];
	}

	static constexpr size_t kMaxEngines = 256;
	static size_t max_owned()
	{
		const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		return pages > 0 && page > 0 ? static_cast<size_t>(pages) / 2 * static_cast<size_t>(page) : size_t{1} << 30;
	}

	std::atomic<size_t> *counters_;
	size_t ncounters_;
	size_t owned_ = 0; // bytes of mem_
	std::deque<std::atomic<size_t>> own_;
	std::vector<std::unique_ptr<void, FreeDeleter>> mem_;
	std::vector<std::unique_ptr<Engine>> engines_;
	std::vector<std::vector<Targets::Span>> spans_; // per engine
	std::vector<RegionRef> regions_;
};

class InProcess final : public Targets {
public:
	TargetEngine make(const Config &cfg, std::span<const Span> regions) override { return s_.make(cfg, regions); }
	void add_peer(unsigned slot, const Bytes &writer) override { s_.add_peer(slot, writer); }
	void clear() noexcept override { s_.clear(); }
	const char *where() const override { return "in this process"; }

private:
	Served s_{nullptr, 0};
};

// ---- the target protocol: one request, one reply, each a message framed by
// its 32-bit length on a stream socket (a socket pair with the child, TCP
// with a server). Requests: 'M' make, 'P' add peer, 'C' clear, 'N'
// notifications so far, 'Z' zero a region, 'V' verify a region, 'I' start
// iperf3 servers, 'Q' goodbye (the writer is done: a connection that ends
// without one broke). Replies: 'K' and what was asked for, or 'E' and the
// error's text.

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

void set_timeout(int fd, int optname, int seconds)
{
	timeval tv{seconds, 0};
	if (::setsockopt(fd, SOL_SOCKET, optname, &tv, sizeof(tv)) < 0)
		throw Error(HMEMREG_ESYS, std::string("xfer: setsockopt(SO_RCVTIMEO/SO_SNDTIMEO): ") +
						  std::strerror(errno));
}

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

// Empty when the other side is gone.
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

// An error's text without its "xfer: ", to be quoted after another.
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

// One request. `node`: the fabric address of this side's engines (a server
// on another host has its own; empty: the writer's, as both are local).
// `remote`: the writer is across TCP, so it has no say in this process's
// addresses: every region is allocated here.
void handle(Served &s, Spawned &iperf, const std::string &node, bool remote, Message &req, Message &rep)
{
	const char op = req.get<char>();
	if (op == 'M') {
		Config cfg = get_config(req);
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
		Message req(recv_message(fd));
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
		send_message(fd, rep);
		if (bye && rep.data()[0] == 'K')
			return;
	}
}

// The child's whole life: it never returns, so nothing it throws can unwind
// into the parent's code (which would run the bench a second time here).
[[noreturn]] void serve_child(int fd, std::atomic<size_t> *counters, size_t ncounters) noexcept
{
	try {
		Served s(counters, ncounters);
		serve_connection(fd, s, {}, false);
	} catch (const std::exception &e) {
		std::fprintf(stderr, "xfer: target process: %s\n", unprefixed(e.what()).c_str());
		::_exit(1);
	}
	::_exit(0);
}

// The writer's side of the protocol, over a connected stream socket.
class Client {
public:
	explicit Client(int fd) : fd_(fd) {}
	Message call(const Message &m)
	{
		if (broken_)
			throw Error(HMEMREG_ESYS, "xfer: the connection to the target broke earlier");
		Message rep;
		try {
			send_message(fd_, m);
			rep = Message(recv_message(fd_));
		} catch (const Error &) {
			broken_ = true;
			throw;
		}
		if (rep.data().empty()) {
			broken_ = true;
			throw Error(HMEMREG_ESYS, "xfer: the target is gone");
		}
		if (rep.get<char>() == 'E')
			throw Error(HMEMREG_EFABRIC, "xfer: target: " + unprefixed(rep.get_string()));
		return rep;
	}
	TargetEngine make(const Config &cfg, std::span<const Targets::Span> regions)
	{
		Message m;
		m.put('M');
		put_config(m, cfg);
		m.put(static_cast<uint64_t>(regions.size()));
		for (const auto &[p, n] : regions)
			m.put(reinterpret_cast<uintptr_t>(p)).put(static_cast<uint64_t>(n));
		Message rep = call(m);
		TargetEngine t;
		t.slot = rep.get<unsigned>();
		t.staged = rep.get<uint8_t>() != 0;
		t.address = rep.get_bytes();
		for (size_t i = 0; i < regions.size(); i++)
			t.descriptors.push_back(rep.get_bytes());
		return t;
	}
	void add_peer(unsigned slot, const Bytes &writer)
	{
		Message m;
		m.put('P').put(slot).put_bytes(writer.data(), writer.size());
		call(m);
	}
	void clear() noexcept
	{
		try {
			Message m;
			m.put('C');
			call(m);
		} catch (const Error &e) {
			std::fprintf(stderr, "%s\n", e.what());
		}
	}
	int fd() const { return fd_; }
	// Says goodbye (the server's exit status tells a writer that finished
	// from one that died) and closes; false (with a message) when the target
	// did not answer. Idempotent.
	bool close() noexcept
	{
		if (fd_ < 0)
			return true;
		bool ok = !broken_; // else: already said why
		try {
			Message m;
			m.put('Q');
			if (ok)
				call(m);
		} catch (const Error &e) {
			std::fprintf(stderr, "%s\n", e.what());
			ok = false;
		}
		::close(fd_);
		fd_ = -1;
		return ok;
	}

private:
	int fd_;
	bool broken_ = false;
};

class ChildProcess final : public Targets {
public:
	explicit ChildProcess(size_t shared_bytes)
	{
		const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
		shared_len_ = (shared_bytes + page - 1) / page * page;
		counters_len_ = kCounters * sizeof(std::atomic<size_t>);
		shared_ = ::mmap(nullptr, shared_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		void *c = ::mmap(nullptr, counters_len_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (shared_ == MAP_FAILED || c == MAP_FAILED) {
			unmap(c);
			throw Error(HMEMREG_ENOMEM, "xfer: cannot map memory shared with the target process");
		}
		counters_ = new (c) std::atomic<size_t>[kCounters]();
		int sv[2];
		if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			unmap(c);
			throw Error(HMEMREG_ESYS, std::string("xfer: socketpair: ") + std::strerror(errno));
		}
		std::fflush(nullptr); // the child must not print the parent's buffered rows again
		const pid_t parent = ::getpid();
		pid_ = ::fork();
		if (pid_ == 0) {
			::close(sv[0]);
			// Never outlive the writer, even one that died before this line.
			if (::prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || ::getppid() != parent)
				::_exit(1);
			serve_child(sv[1], counters_, kCounters);
		}
		::close(sv[1]);
		if (pid_ < 0) {
			::close(sv[0]);
			unmap(c);
			throw Error(HMEMREG_ESYS, std::string("xfer: fork: ") + std::strerror(errno));
		}
		c_ = std::make_unique<Client>(sv[0]);
	}
	~ChildProcess() override
	{
		finish();
		unmap(counters_);
	}
	bool finish() noexcept override
	{
		if (c_->fd() < 0)
			return ok_;
		c_->close(); // the child sees the end and exits
		int st = 0;
		while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR)
			;
		// A target that crashed while tearing its engines down is a failed run.
		ok_ = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!ok_ && WIFSIGNALED(st))
			std::fprintf(stderr, "xfer: the target process died of signal %d\n", WTERMSIG(st));
		else if (!ok_)
			std::fprintf(stderr, "xfer: the target process exited with %d\n", WEXITSTATUS(st));
		return ok_;
	}

	TargetEngine make(const Config &cfg, std::span<const Span> regions) override
	{
		for (const auto &[p, n] : regions)
			if (static_cast<char *>(p) < static_cast<char *>(shared_) ||
			    static_cast<char *>(p) + n > static_cast<char *>(shared_) + shared_len_)
				throw Error(HMEMREG_EINVAL, "xfer: a target region outside the memory shared with the target process");
		TargetEngine t = c_->make(cfg, regions);
		t.notes = [c = &counters_[t.slot]] { return c->load(); };
		return t;
	}
	void add_peer(unsigned slot, const Bytes &writer) override { c_->add_peer(slot, writer); }
	void clear() noexcept override { c_->clear(); }
	void *shared() const override { return shared_; }
	const char *where() const override { return "in a child process"; }

private:
	static constexpr size_t kCounters = 256;
	// The counters are shared by two processes: only a lock-free atomic
	// lives wholly in its bytes (no lock of one process's own).
	static_assert(std::atomic<size_t>::is_always_lock_free);

	void unmap(void *counters)
	{
		if (shared_ != MAP_FAILED)
			::munmap(shared_, shared_len_);
		if (counters && counters != MAP_FAILED)
			::munmap(counters, counters_len_);
	}

	void *shared_ = MAP_FAILED;
	size_t shared_len_ = 0, counters_len_ = 0;
	std::atomic<size_t> *counters_ = nullptr;
	pid_t pid_ = -1;
	std::unique_ptr<Client> c_;
	bool ok_ = true;
};

// "host:port", "[v6]:port", ":port" or "port" (any host for a server,
// this host for a client).
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

// A connected (or, with `listen`, listening) TCP socket for HOST:PORT.
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

class Remote final : public Targets {
public:
	explicit Remote(const std::string &host_port)
		: host_(split_host_port(host_port).first), where_("at " + host_port),
		  c_(tcp_socket(host_port, false))
	{
		try {
			harden_control_socket(c_.fd(), kReplySeconds);
		} catch (...) {
			::close(c_.fd());
			throw;
		}
	}
	~Remote() override { finish(); }
	bool finish() noexcept override
	{
		if (c_.fd() >= 0)
			ok_ = c_.close();
		return ok_;
	}

	TargetEngine make(const Config &cfg, std::span<const Span> regions) override
	{
		std::vector<Span> sizes;
		for (const auto &[p, n] : regions)
			sizes.push_back({nullptr, n}); // the server allocates them
		TargetEngine t = c_.make(cfg, sizes);
		t.notes = [this, slot = t.slot] {
			Message m;
			m.put('N').put(slot);
			return static_cast<size_t>(c_.call(m).get<uint64_t>());
		};
		return t;
	}
	void add_peer(unsigned slot, const Bytes &writer) override { c_.add_peer(slot, writer); }
	void clear() noexcept override { c_.clear(); }
	const char *where() const override { return where_.c_str(); }
	bool remote_buffers() const override { return true; }
	void zero(unsigned slot, unsigned region, size_t n) override
	{
		Message m;
		m.put('Z').put(slot).put(region).put(static_cast<uint64_t>(n));
		c_.call(m);
	}
	bool verify(unsigned slot, unsigned region, size_t size, size_t nchunks, std::string &why) override
	{
		Message m;
		m.put('V').put(slot).put(region).put(static_cast<uint64_t>(size)).put(static_cast<uint64_t>(nchunks));
		try {
			c_.call(m);
		} catch (const Error &e) {
			why = unprefixed(e.what());
			return false;
		}
		return true;
	}
	std::string start_iperf3(int port0, unsigned streams) override
	{
		Message m;
		m.put('I').put(port0).put(streams);
		// Where the server bound them (its fabric address), else the host
		// this connection reached (no host: this one).
		std::string host = c_.call(m).get_string();
		if (host.empty())
			host = !host_.empty() ? host_ : "localhost";
		// It goes into iperf3's command line.
		if (host.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.:-_%") !=
		    std::string::npos)
			throw Error(HMEMREG_EINVAL, "xfer: the target's iperf3 host '" + host + "' is not a host name");
		return host;
	}

private:
	std::string host_, where_;
	Client c_;
	bool ok_ = true;
};

} // namespace

std::unique_ptr<Targets> Targets::in_process()
{
	return std::make_unique<InProcess>();
}

std::unique_ptr<Targets> Targets::child_process(size_t shared_bytes)
{
	return std::make_unique<ChildProcess>(shared_bytes);
}

std::unique_ptr<Targets> Targets::remote(const std::string &host_port)
{
	return std::make_unique<Remote>(host_port);
}

int serve(const std::string &host_port, const std::string &node)
{
	const int lfd = tcp_socket(host_port, true);
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
			harden_control_socket(fd, kIdleSeconds);
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
