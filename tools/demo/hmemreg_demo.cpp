// SPDX-License-Identifier: MIT
// hmemreg_demo: two "hosts" move a large scattered transfer through the
// engine, from host memory into emulated device memory exported by
// hmemreg.ko, with the registration cache warm; the bytes are verified.
//
//   hmemreg_demo [--provider P] [--node-a IP --node-b IP] [--domain-a D
//                --domain-b D] [--mib N] [--chunk-kib K] [--iters I]
//                [--stat PATH]
//
// Host B (a child process) allocates N MiB of emulated device memory
// (HMEMREG_IOC_DEVMEM_ALLOC), exports it as a DMA-BUF, maps that DMA-BUF and
// registers it; host A exports its own host buffer too (so both providers
// show in the kernel ledger), then writes the whole buffer as chunks placed
// in a shuffled order on B, I times. B verifies every byte. While both still
// hold their memory, A runs mr_cache_stat (processes and kernel ledger).
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/hmemreg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <hmemreg/engine.hpp>
#include <hmemreg/hmemreg.h>

#include "export_path.h"

using namespace hmemreg;

namespace {

struct Options {
	std::string provider = "tcp;ofi_rxm";
	std::string node_a, node_b, domain_a, domain_b;
	size_t mib = 64;
	size_t chunk_kib = 64;
	int iters = 8;
	std::string stat = "mr_cache_stat";
};

[[noreturn]] void die(const std::string &what)
{
	std::fprintf(stderr, "hmemreg_demo: %s\n", what.c_str());
	std::exit(1);
}

// Length-prefixed messages over the socketpair between A and B.
void send_blob(int fd, const void *p, uint32_t n)
{
	if (write(fd, &n, sizeof(n)) != sizeof(n) || write(fd, p, n) != static_cast<ssize_t>(n))
		die("control channel write failed");
}

Bytes recv_blob(int fd)
{
	uint32_t n = 0;
	if (read(fd, &n, sizeof(n)) != sizeof(n))
		die("control channel closed");
	Bytes b(n);
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, b.data() + got, n - got);
		if (r <= 0)
			die("control channel closed");
		got += static_cast<size_t>(r);
	}
	return b;
}

uint8_t pattern(size_t i)
{
	return static_cast<uint8_t>((i * 2654435761u) >> 13);
}

int kmod_open()
{
	int fd = open(HMEMREG_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die(std::string("open " HMEMREG_DEVICE_PATH ": ") + strerror(errno) + " (is hmemreg.ko loaded?)");
	return fd;
}

// Export [addr, addr + len) of `provider`; returns the DMA-BUF fd.
int kmod_export(int dev, uint32_t provider, uint64_t addr, uint64_t len, uint64_t handle, uint64_t cookie)
{
	hmemreg_export ex{};
	ex.size = sizeof(ex);
	ex.provider = provider;
	ex.flags = HMEMREG_EXPORT_WRITE;
	ex.addr = addr;
	ex.len = len;
	ex.handle = handle;
	ex.cookie = cookie;
	if (ioctl(dev, HMEMREG_IOC_EXPORT, &ex))
		die(std::string("HMEMREG_IOC_EXPORT: ") + strerror(errno));
	return ex.fd;
}

EngineConfig engine_config(const Options &o, const std::string &node, const std::string &domain)
{
	EngineConfig c;
	c.provider = o.provider;
	c.node = node;
	c.domain = domain;
	return c;
}

// Host B: emulated device memory as the target.
int run_b(const Options &o, int ctl)
{
	const size_t len = o.mib << 20;
	int dev = kmod_open();
	hmemreg_devmem_alloc al{};
	al.size = sizeof(al);
	al.len = len;
	if (ioctl(dev, HMEMREG_IOC_DEVMEM_ALLOC, &al))
		die(std::string("HMEMREG_IOC_DEVMEM_ALLOC: ") + strerror(errno) + " (load with devmem_mb >= " +
		    std::to_string(o.mib) + ")");
	int buf_fd = kmod_export(dev, HMEMREG_PROVIDER_DEVMEM, 0, len, al.handle, 0xB);
	auto *mem = static_cast<uint8_t *>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, buf_fd, 0));
	if (mem == MAP_FAILED)
		die(std::string("mmap of the device-memory DMA-BUF: ") + strerror(errno));

	Engine eng(engine_config(o, o.node_b, o.domain_b));
	uint64_t notified = 0, bytes = 0;
	eng.on_notify([&](const Notification &n) {
		notified++;
		bytes += n.bytes;
	});
	RegionRef region = eng.register_region(mem, len);
	Bytes addr = eng.address(), desc = eng.descriptor(*region);
	send_blob(ctl, addr.data(), static_cast<uint32_t>(addr.size()));
	send_blob(ctl, desc.data(), static_cast<uint32_t>(desc.size()));

	// The chunk permutation comes from A once it is done writing.
	Bytes perm_blob = recv_blob(ctl);
	auto t_end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	while (notified < static_cast<uint64_t>(o.iters) && std::chrono::steady_clock::now() < t_end)
		eng.progress();
	std::vector<uint32_t> perm(perm_blob.size() / sizeof(uint32_t));
	std::memcpy(perm.data(), perm_blob.data(), perm.size() * sizeof(uint32_t));
	const size_t chunk = o.chunk_kib << 10;
	size_t bad = 0;
	for (size_t j = 0; j < perm.size(); j++)
		for (size_t k = 0; k < chunk; k++)
			bad += mem[perm[j] * chunk + k] != pattern(j * chunk + k);
	std::printf("[host B] %llu notifications, %llu bytes landed in emulated device memory; verify: %s\n",
		    (unsigned long long)notified, (unsigned long long)bytes,
		    bad ? ("FAILED, " + std::to_string(bad) + " bytes differ").c_str() : "all bytes match");
	std::fflush(stdout);
	uint8_t verdict = bad || notified != static_cast<uint64_t>(o.iters) ? 1 : 0;
	send_blob(ctl, &verdict, 1);
	recv_blob(ctl); // A has shown mr_cache_stat; now let go
	region.reset();
	munmap(mem, len);
	close(buf_fd);
	close(dev);
	return verdict;
}

// Host A: host memory as the source.
int run_a(const Options &o, int ctl, pid_t b)
{
	const size_t len = o.mib << 20, chunk = o.chunk_kib << 10, n = len / chunk;
	auto *src = static_cast<uint8_t *>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	if (src == MAP_FAILED)
		die("mmap");
	for (size_t i = 0; i < len; i++)
		src[i] = pattern(i);
	int dev = kmod_open();
	int host_fd = kmod_export(dev, HMEMREG_PROVIDER_HOST, reinterpret_cast<uint64_t>(src), len, 0, 0xA);

	Engine eng(engine_config(o, o.node_a, o.domain_a));
	std::printf("[host A] %s\n", eng.describe().c_str());
	Bytes b_addr = recv_blob(ctl), b_desc = recv_blob(ctl);
	PeerId peer = eng.add_peer(b_addr, true);

	std::vector<uint32_t> perm(n);
	std::iota(perm.begin(), perm.end(), 0);
	std::shuffle(perm.begin(), perm.end(), std::mt19937(2026));
	double best = 0, total_s = 0;
	for (int it = 0; it < o.iters; it++) {
		// Registering on every iteration is what an application does; the
		// cache makes all but the first one a hit.
		RegionRef region = eng.register_region(src, len);
		std::vector<Chunk> chunks(n);
		for (size_t j = 0; j < n; j++)
			chunks[j] = Chunk{region->handle(), j * chunk, chunk, perm[j] * chunk};
		auto t0 = std::chrono::steady_clock::now();
		TransferRef t = eng.write(peer, chunks, b_desc, static_cast<uint64_t>(it + 1));
		if (!eng.wait(*t, std::chrono::seconds(60)) || t->status() != 0)
			die("transfer failed: " + t->error());
		double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
		total_s += s;
		best = std::max(best, static_cast<double>(len) / s / 1e6);
	}
	std::printf("[host A] %d x %zu MiB in %zu chunks of %zu KiB, shuffled: %.1f MB/s mean, %.1f MB/s best\n",
		    o.iters, o.mib, n, o.chunk_kib, static_cast<double>(len) * o.iters / total_s / 1e6, best);
	std::fflush(stdout);
	send_blob(ctl, perm.data(), static_cast<uint32_t>(perm.size() * sizeof(uint32_t)));
	Bytes verdict = recv_blob(ctl);

	std::printf("\n[host A] mr_cache_stat while both hosts hold their memory:\n");
	std::fflush(stdout);
	std::string cmd = o.stat + " 2>&1";
	if (std::system(cmd.c_str()) != 0)
		std::printf("(mr_cache_stat failed)\n");
	std::fflush(stdout);
	send_blob(ctl, "x", 1);
	int st = 0;
	waitpid(b, &st, 0);
	close(host_fd);
	close(dev);
	return verdict[0] || !WIFEXITED(st) || WEXITSTATUS(st) ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
	// hmemreg_demo --exports PROVIDER NODE MIB STAT: the DMA-BUF path
	// (export_path.cpp, public C API only).
	if (argc == 6 && !std::strcmp(argv[1], "--exports"))
		return demo_export_path(argv[2], argv[3], std::strtoul(argv[4], nullptr, 10), argv[5]);
	Options o;
	for (int i = 1; i + 1 < argc; i += 2) {
		std::string k = argv[i], v = argv[i + 1];
		if (k == "--provider") o.provider = v;
		else if (k == "--node-a") o.node_a = v;
		else if (k == "--node-b") o.node_b = v;
		else if (k == "--domain-a") o.domain_a = v;
		else if (k == "--domain-b") o.domain_b = v;
		else if (k == "--mib") o.mib = std::strtoul(v.c_str(), nullptr, 10);
		else if (k == "--chunk-kib") o.chunk_kib = std::strtoul(v.c_str(), nullptr, 10);
		else if (k == "--iters") o.iters = std::atoi(v.c_str());
		else if (k == "--stat") o.stat = v;
		else die("unknown option " + k);
	}
	if (argc % 2 == 0 || !o.mib || !o.chunk_kib || (o.mib << 20) % (o.chunk_kib << 10) || o.iters <= 0)
		die("usage: hmemreg_demo [--provider P] [--node-a IP --node-b IP] [--domain-a D --domain-b D] "
		    "[--mib N] [--chunk-kib K] [--iters I] [--stat PATH]");
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
		die("socketpair");
	std::fflush(stdout);
	pid_t b = fork();
	try {
		if (b == 0) {
			close(sp[0]);
			std::_Exit(run_b(o, sp[1]));
		}
		close(sp[1]);
		return run_a(o, sp[0], b);
	} catch (const Error &e) {
		die(std::string(b == 0 ? "host B: " : "host A: ") + e.what());
	}
}
