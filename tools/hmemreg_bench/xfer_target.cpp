// SPDX-License-Identifier: MIT
#include "xfer_target.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xfer_served.hpp"
#include "xfer_server.hpp"
#include "xfer_wire.hpp"

namespace hmemreg::bench {

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
using wire::Message;

class InProcess final : public Targets {
public:
	TargetEngine make(const Config &cfg, std::span<const Span> regions) override { return s_.make(cfg, regions); }
	void add_peer(unsigned slot, const Bytes &writer) override { s_.add_peer(slot, writer); }
	void clear() noexcept override { s_.clear(); }
	const char *where() const override { return "in this process"; }

private:
	Served s_{nullptr, 0};
};

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
			wire::send_message(fd_, m);
			rep = Message(wire::recv_message(fd_));
		} catch (const Error &) {
			broken_ = true;
			throw;
		}
		if (rep.data().empty()) {
			broken_ = true;
			throw Error(HMEMREG_ESYS, "xfer: the target is gone");
		}
		if (rep.get<char>() == 'E')
			throw Error(HMEMREG_EFABRIC, "xfer: target: " + wire::unprefixed(rep.get_string()));
		return rep;
	}
	TargetEngine make(const Config &cfg, std::span<const Targets::Span> regions)
	{
		Message m;
		m.put('M');
		wire::put_config(m, cfg);
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

class Remote final : public Targets {
public:
	explicit Remote(const std::string &host_port)
		: host_(wire::split_host_port(host_port).first), where_("at " + host_port),
		  c_(wire::tcp_socket(host_port, false))
	{
		try {
			wire::harden_control_socket(c_.fd(), wire::kReplySeconds);
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
			why = wire::unprefixed(e.what());
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

} // namespace hmemreg::bench
