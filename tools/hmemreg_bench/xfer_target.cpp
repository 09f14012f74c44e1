// SPDX-License-Identifier: MIT
#include "xfer_target.hpp"

#include <cstdio>
#include <cstring>
#include <deque>
#include <string>

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace hmemreg::bench {
namespace {

using engine::Bytes;
using engine::Config;
using engine::Engine;
using engine::RegionRef;

// Engines and regions of one process's targets. Counters first: they
// outlive the engines' notification callbacks.
class Served {
public:
	explicit Served(std::atomic<size_t> *counters, size_t ncounters) : counters_(counters), ncounters_(ncounters) {}
	~Served() { clear(); }

	TargetEngine make(const Config &cfg, std::span<const Targets::Span> regions)
	{
		const unsigned slot = static_cast<unsigned>(engines_.size());
		std::atomic<size_t> *c;
		if (counters_) {
			if (slot >= ncounters_)
				throw Error(HMEMREG_ENOMEM, "xfer: more than " + std::to_string(ncounters_) + " target engines");
			c = &counters_[slot];
			c->store(0);
		} else {
			c = &own_.emplace_back(0);
		}
		auto e = std::make_unique<Engine>(cfg);
		e->on_notify([c](const engine::Notification &) { c->fetch_add(1, std::memory_order_relaxed); });
		TargetEngine t{slot, e->address(), {}, c};
		// Kept only once all are registered: a failure midway drops this
		// engine's regions (before it) and leaves the others as they were.
		std::vector<RegionRef> regs;
		for (const auto &[p, n] : regions) {
			regs.push_back(e->register_region(p, n));
			t.descriptors.push_back(e->descriptor(*regs.back()));
			t.staged = t.staged || regs.back()->staged();
		}
		regions_.reserve(regions_.size() + regs.size());
		engines_.reserve(engines_.size() + 1);
		regions_.insert(regions_.end(), regs.begin(), regs.end());
		engines_.push_back(std::move(e));
		return t;
	}
	void add_peer(unsigned slot, const Bytes &writer)
	{
		if (slot >= engines_.size())
			throw Error(HMEMREG_EINVAL, "xfer: no target engine " + std::to_string(slot));
		engines_[slot]->add_peer(writer);
	}
	void clear() noexcept
	{
		regions_.clear(); // registrations go before their engines
		engines_.clear();
		own_.clear();
	}

private:
	std::atomic<size_t> *counters_;
	size_t ncounters_;
	std::deque<std::atomic<size_t>> own_;
	std::vector<std::unique_ptr<Engine>> engines_;
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

// ---- the child's protocol: one request, one reply, each a datagram of a
// socket pair. Requests: 'M' make, 'P' add peer, 'C' clear. Replies: 'K'
// and what was asked for, or 'E' and the error's text.

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

void send_message(int fd, const Message &m)
{
	if (m.data().size() > kMaxMessage)
		throw Error(HMEMREG_EINVAL, "xfer: a message of " + std::to_string(m.data().size()) +
						    " bytes for the other bench process (at most " +
						    std::to_string(kMaxMessage) + ")");
	if (::send(fd, m.data().data(), m.data().size(), MSG_NOSIGNAL) != static_cast<ssize_t>(m.data().size()))
		throw Error(HMEMREG_ESYS, std::string("xfer: cannot reach the target process: ") + std::strerror(errno));
}

// Empty when the other side is gone.
std::string recv_message(int fd)
{
	std::string b(kMaxMessage, '\0');
	ssize_t n;
	do // MSG_TRUNC: the datagram's real length, so a cut one is not parsed
		n = ::recv(fd, b.data(), b.size(), MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n > static_cast<ssize_t>(kMaxMessage))
		throw Error(HMEMREG_EINVAL, "xfer: a message of " + std::to_string(n) +
						    " bytes between bench processes (at most " +
						    std::to_string(kMaxMessage) + ")");
	b.resize(n > 0 ? static_cast<size_t>(n) : 0);
	return b;
}

// The fields of Config the bench sets, on the wire.
void put_config(Message &m, const Config &c)
{
	m.put_string(c.provider).put_string(c.node);
	m.put(c.rails).put(c.progress_threads).put(c.notify).put(c.imm_data_bytes);
	m.put(c.write_iov).put(c.max_write).put(c.post_more);
}

Config get_config(Message &m)
{
	Config c;
	c.provider = m.get_string();
	c.node = m.get_string();
	c.rails = m.get<decltype(c.rails)>();
	c.progress_threads = m.get<decltype(c.progress_threads)>();
	c.notify = m.get<decltype(c.notify)>();
	c.imm_data_bytes = m.get<decltype(c.imm_data_bytes)>();
	c.write_iov = m.get<decltype(c.write_iov)>();
	c.max_write = m.get<decltype(c.max_write)>();
	c.post_more = m.get<decltype(c.post_more)>();
	return c;
}

// The child's whole life: it never returns, so nothing it throws can unwind
// into the parent's code (which would run the bench a second time here).
[[noreturn]] void serve(int fd, std::atomic<size_t> *counters, size_t ncounters) noexcept
{
	try {
		Served s(counters, ncounters);
		for (;;) {
			Message req(recv_message(fd));
			if (req.data().empty())
				break; // the writer is done (or gone)
			Message rep;
			try {
				const char op = req.get<char>();
				if (op == 'M') {
					Config cfg = get_config(req);
					const size_t nregions = req.get_count(sizeof(uintptr_t) + sizeof(uint64_t));
					std::vector<Targets::Span> regions(nregions);
					for (auto &r : regions)
						r = {reinterpret_cast<void *>(req.get<uintptr_t>()), req.get<uint64_t>()};
					TargetEngine t = s.make(cfg, regions);
					rep.put('K').put(t.slot).put(t.staged).put_bytes(t.address.data(), t.address.size());
					for (const Bytes &d : t.descriptors)
						rep.put_bytes(d.data(), d.size());
				} else if (op == 'P') {
					unsigned slot = req.get<unsigned>();
					s.add_peer(slot, req.get_bytes());
					rep.put('K');
				} else if (op == 'C') {
					s.clear();
					rep.put('K');
				} else {
					throw Error(HMEMREG_EINVAL, std::string("xfer: unknown request '") + op + "'");
				}
			} catch (const std::exception &e) {
				rep = Message();
				rep.put('E').put_string(e.what());
			}
			try {
				send_message(fd, rep);
			} catch (const Error &) {
				break;
			}
		}
	} catch (const std::exception &e) {
		std::fprintf(stderr, "xfer: target process: %s\n", e.what());
		::_exit(1);
	}
	::_exit(0);
}

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
		if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
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
			serve(sv[1], counters_, kCounters);
		}
		::close(sv[1]);
		fd_ = sv[0];
		if (pid_ < 0) {
			::close(fd_);
			unmap(c);
			throw Error(HMEMREG_ESYS, std::string("xfer: fork: ") + std::strerror(errno));
		}
	}
	~ChildProcess() override
	{
		finish();
		unmap(counters_);
	}
	bool finish() noexcept override
	{
		if (fd_ < 0)
			return ok_;
		::close(fd_); // the child sees the end and exits
		fd_ = -1;
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
		Message m;
		m.put('M');
		put_config(m, cfg);
		m.put(static_cast<uint64_t>(regions.size()));
		for (const auto &[p, n] : regions) {
			if (static_cast<char *>(p) < static_cast<char *>(shared_) ||
			    static_cast<char *>(p) + n > static_cast<char *>(shared_) + shared_len_)
				throw Error(HMEMREG_EINVAL, "xfer: a target region outside the memory shared with the target process");
			m.put(reinterpret_cast<uintptr_t>(p)).put(static_cast<uint64_t>(n));
		}
		Message rep = call(m);
		TargetEngine t;
		t.slot = rep.get<unsigned>();
		t.staged = rep.get<bool>();
		t.address = rep.get_bytes();
		for (size_t i = 0; i < regions.size(); i++)
			t.descriptors.push_back(rep.get_bytes());
		t.notes = &counters_[t.slot];
		return t;
	}
	void add_peer(unsigned slot, const Bytes &writer) override
	{
		Message m;
		m.put('P').put(slot).put_bytes(writer.data(), writer.size());
		call(m);
	}
	void clear() noexcept override
	{
		try {
			Message m;
			m.put('C');
			call(m);
		} catch (const Error &e) {
			std::fprintf(stderr, "%s\n", e.what());
		}
	}
	void *shared() const override { return shared_; }
	const char *where() const override { return "in a child process"; }

private:
	static constexpr size_t kCounters = 256;
	// The counters are shared by two processes: only a lock-free atomic
	// lives wholly in its bytes (no lock of one process's own).
	static_assert(std::atomic<size_t>::is_always_lock_free);

	Message call(const Message &m)
	{
		send_message(fd_, m);
		Message rep(recv_message(fd_));
		if (rep.data().empty())
			throw Error(HMEMREG_ESYS, "xfer: the target process is gone");
		if (rep.get<char>() == 'E')
			throw Error(HMEMREG_EFABRIC, "xfer: target process: " + rep.get_string());
		return rep;
	}
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
	int fd_ = -1;
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

} // namespace hmemreg::bench
