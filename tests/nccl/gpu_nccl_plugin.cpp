// SPDX-License-Identifier: MIT
// GPU machine: NCCL really loads libnccl-net-hmemreg.so, and the plugin's
// init/devices/getProperties/regMr behave on CUDA memory. No nccl.h, no CUDA
// headers: libnccl.so.2 and libcuda.so.1 are dlopened and the few entry
// points used are declared here. Runs under tests/gpu/gpu_test.hpp (one
// fork per test), not Criterion (CUDA in Criterion workers crashes there).
//
// Environment (tests/gpu.d/30-nccl-plugin.sh sets it): LD_LIBRARY_PATH holds
// the plugin's directory, NCCL_NET_PLUGIN=hmemreg, HMEMREG_NCCL_PLUGIN_PATH
// the plugin file.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_test.hpp"
#include "nccl_abi.h"

namespace {

// ---- the slice of the CUDA driver API used here
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUdeviceptr = unsigned long long;

struct Cuda {
	CUresult (*cuInit)(unsigned);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
};

Cuda cuda_open()
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	GPU_ASSERT(lib != nullptr, "(libcuda.so.1: %s)", dlerror());
	Cuda c{};
	auto sym = [&](const char *name) {
		void *p = dlsym(lib, name);
		GPU_ASSERT(p != nullptr, "(%s missing)", name);
		return p;
	};
	c.cuInit = reinterpret_cast<decltype(c.cuInit)>(sym("cuInit"));
	c.cuDeviceGet = reinterpret_cast<decltype(c.cuDeviceGet)>(sym("cuDeviceGet"));
	c.cuDevicePrimaryCtxRetain = reinterpret_cast<decltype(c.cuDevicePrimaryCtxRetain)>(sym("cuDevicePrimaryCtxRetain"));
	c.cuCtxSetCurrent = reinterpret_cast<decltype(c.cuCtxSetCurrent)>(sym("cuCtxSetCurrent"));
	c.cuMemAlloc = reinterpret_cast<decltype(c.cuMemAlloc)>(sym("cuMemAlloc_v2"));
	c.cuMemFree = reinterpret_cast<decltype(c.cuMemFree)>(sym("cuMemFree_v2"));
	c.cuMemcpyHtoD = reinterpret_cast<decltype(c.cuMemcpyHtoD)>(sym("cuMemcpyHtoD_v2"));
	c.cuMemcpyDtoH = reinterpret_cast<decltype(c.cuMemcpyDtoH)>(sym("cuMemcpyDtoH_v2"));
	GPU_ASSERT(c.cuInit(0) == 0);
	CUdevice dev;
	CUcontext ctx;
	GPU_ASSERT(c.cuDeviceGet(&dev, 0) == 0);
	GPU_ASSERT(c.cuDevicePrimaryCtxRetain(&ctx, dev) == 0);
	GPU_ASSERT(c.cuCtxSetCurrent(ctx) == 0);
	return c;
}

// ---- the slice of NCCL's public API used here
struct UniqueId {
	char internal[128];
};
using Comm = void *;

std::string slurp(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream s;
	s << f.rdbuf();
	return s.str();
}

const char *plugin_path()
{
	const char *p = std::getenv("HMEMREG_NCCL_PLUGIN_PATH");
	GPU_ASSERT(p && *p, "(set HMEMREG_NCCL_PLUGIN_PATH to the built plugin)");
	return p;
}

} // namespace

// NCCL, initialising a 1-rank communicator with NCCL_NET_PLUGIN=hmemreg,
// loads our table (v11 on 2.28), initialises it and logs through our logger.
GPU_TEST(nccl_plugin, nccl_loads_the_plugin)
{
	char log[128];
	std::snprintf(log, sizeof(log), "/tmp/hmemreg-nccl-%d.log", getpid());
	setenv("NCCL_DEBUG", "INFO", 1);
	setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV", 1);
	setenv("NCCL_DEBUG_FILE", log, 1);
	if (!std::getenv("NCCL_NET_PLUGIN"))
		setenv("NCCL_NET_PLUGIN", "hmemreg", 1);
	void *nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
	GPU_ASSERT(nccl != nullptr, "(libnccl.so.2: %s)", dlerror());
	auto get_version = reinterpret_cast<int (*)(int *)>(dlsym(nccl, "ncclGetVersion"));
	auto get_id = reinterpret_cast<int (*)(UniqueId *)>(dlsym(nccl, "ncclGetUniqueId"));
	auto init_rank = reinterpret_cast<int (*)(Comm *, int, UniqueId, int)>(dlsym(nccl, "ncclCommInitRank"));
	auto destroy = reinterpret_cast<int (*)(Comm)>(dlsym(nccl, "ncclCommDestroy"));
	auto err_str = reinterpret_cast<const char *(*)(int)>(dlsym(nccl, "ncclGetErrorString"));
	GPU_ASSERT(get_version && get_id && init_rank && destroy && err_str);
	int version = 0;
	GPU_ASSERT(get_version(&version) == 0);
	GPU_LOG("NCCL %d", version);
	cuda_open(); // NCCL uses device 0 of this process
	UniqueId id;
	GPU_ASSERT(get_id(&id) == 0);
	Comm comm = nullptr;
	int rc = init_rank(&comm, 1, id, 0);
	GPU_ASSERT(rc == 0, "(ncclCommInitRank: %s)", err_str(rc));
	GPU_ASSERT(destroy(comm) == 0);
	std::string text = slurp(log);
	unlink(log);
	auto has = [&](const char *what) { return text.find(what) != std::string::npos; };
	if (!has("Loaded net plugin hmemreg"))
		std::fprintf(stderr, "---- NCCL log:\n%s\n----\n", text.c_str());
	GPU_ASSERT(has("Loaded net plugin hmemreg"), "(NCCL's log does not show our table being loaded)");
	if (version >= 22800)
		GPU_ASSERT(has("Loaded net plugin hmemreg (v11)"), "(NCCL 2.28 should take the v11 table)");
	GPU_ASSERT(has("NET/hmemreg: using"), "(our init did not log through NCCL's logger)");
	GPU_ASSERT(has("Initialized NET plugin hmemreg") || has("Using network hmemreg"),
		   "(NCCL did not initialise/select the plugin)");
}

// The plugin table itself, as NCCL calls it, on cuMemAlloc memory: regMr
// with NCCL_PTR_CUDA works exactly when getProperties says CUDA is
// supported, and fails cleanly otherwise. The connection's peer is a child
// forked before CUDA is touched.
GPU_TEST(nccl_plugin, regmr_on_cuda_memory_matches_ptr_support)
{
	int sv[2];
	GPU_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	void *lib = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
	GPU_ASSERT(lib != nullptr, "(%s)", dlerror());
	auto *net = static_cast<ncclNet_v11_t *>(dlsym(lib, "ncclNetPlugin_v11"));
	GPU_ASSERT(net != nullptr);
	ncclNetCommConfig_t cfg{-1};
	pid_t peer = fork();
	GPU_ASSERT(peer >= 0);
	if (peer == 0) { // listener: never touches CUDA
		close(sv[0]);
		void *ctx = nullptr, *lc = nullptr, *rc = nullptr;
		char handle[NCCL_NET_HANDLE_MAXSIZE];
		ncclNetDeviceHandle_t *dev = nullptr;
		if (net->init(&ctx, 2, &cfg, nullptr, nullptr) || net->listen(ctx, 0, handle, &lc))
			_exit(2);
		if (write(sv[1], handle, sizeof(handle)) != sizeof(handle))
			_exit(3);
		for (int i = 0; i < 10000000 && !rc; i++)
			if (net->accept(lc, &rc, &dev))
				_exit(4);
		char bye;
		if (!rc || read(sv[1], &bye, 1) != 1) // until the test is done
			_exit(5);
		net->closeRecv(rc);
		net->closeListen(lc);
		net->finalize(ctx);
		_exit(0);
	}
	close(sv[1]);
	Cuda cu = cuda_open();
	void *ctx = nullptr;
	GPU_ASSERT(net->init(&ctx, 1, &cfg, nullptr, nullptr) == ncclSuccess);
	int ndev = 0;
	GPU_ASSERT(net->devices(&ndev) == ncclSuccess && ndev == 1);
	ncclNetProperties_v11_t props;
	GPU_ASSERT(net->getProperties(0, &props) == ncclSuccess);
	GPU_LOG("device %s: ptrSupport %#x, speed %d Mbps, maxRecvs %d", props.name, props.ptrSupport, props.speed,
		props.maxRecvs);
	GPU_ASSERT(props.ptrSupport & NCCL_PTR_HOST);
	GPU_ASSERT(props.name != nullptr && props.maxRecvs >= 1 && props.speed > 0);
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	pollfd pfd{sv[0], POLLIN, 0};
	GPU_ASSERT(poll(&pfd, 1, 30000) == 1);
	GPU_ASSERT(read(sv[0], handle, sizeof(handle)) == sizeof(handle));
	void *sc = nullptr;
	ncclNetDeviceHandle_t *dev = nullptr;
	for (int i = 0; i < 1000000 && !sc; i++)
		GPU_ASSERT(net->connect(ctx, 0, handle, &sc, &dev) == ncclSuccess);
	GPU_ASSERT(sc != nullptr);

	CUdeviceptr d = 0;
	const size_t len = 4 << 20;
	GPU_ASSERT(cu.cuMemAlloc(&d, len) == 0);
	void *mh = nullptr;
	ncclResult_t r = net->regMr(sc, reinterpret_cast<void *>(d), len, NCCL_PTR_CUDA, &mh);
	if (props.ptrSupport & NCCL_PTR_CUDA) {
		GPU_ASSERT(r == ncclSuccess && mh != nullptr, "(ptrSupport has CUDA but regMr returned %d)", r);
		GPU_ASSERT(net->deregMr(sc, mh) == ncclSuccess);
	} else {
		GPU_ASSERT(r == ncclInvalidUsage && mh == nullptr,
			   "(ptrSupport lacks CUDA: regMr must fail with ncclInvalidUsage, got %d)", r);
	}
	// The run on libfabric 2.6.0 over shm (HMEMREG_GPU_DIRECT, with
	// HMEMREG_NCCL_DEVICE_MEMORY=staged) must offer device pointers:
	// silently staying host-only would pass the rest.
	const char *direct = std::getenv("HMEMREG_GPU_DIRECT");
	const char *prov = std::getenv("HMEMREG_NCCL_PROVIDER");
	if (direct && prov && std::strstr(direct, prov))
		GPU_ASSERT((props.ptrSupport & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)) == (NCCL_PTR_CUDA | NCCL_PTR_DMABUF),
			   "(provider %s with FI_HMEM: ptrSupport %#x lacks CUDA|DMABUF)", prov, props.ptrSupport);
	if (!(props.ptrSupport & NCCL_PTR_DMABUF)) {
		r = net->regMrDmaBuf(sc, reinterpret_cast<void *>(d), len, NCCL_PTR_CUDA, 0, 0, &mh);
		GPU_ASSERT(r == ncclInvalidUsage, "(regMrDmaBuf without DMA-BUF support returned %d)", r);
	} else {
		// NCCL's fd is not needed (the engine exports the allocation itself);
		// a second registration of part of the buffer is a cache hit.
		r = net->regMrDmaBuf(sc, reinterpret_cast<void *>(d + 4096), len - 4096, NCCL_PTR_CUDA, 4096, -1, &mh);
		GPU_ASSERT(r == ncclSuccess && mh != nullptr, "(regMrDmaBuf returned %d)", r);
		GPU_ASSERT(net->deregMr(sc, mh) == ncclSuccess);
		hmemreg_nccl_counters st{};
		auto *stats = reinterpret_cast<int (*)(hmemreg_nccl_counters *)>(dlsym(lib, "hmemreg_nccl_stats"));
		GPU_ASSERT(stats && stats(&st) == 0);
		GPU_LOG("device registrations through the plugin: %llu", (unsigned long long)st.device_regs);
		GPU_ASSERT(st.device_regs == 2);
	}
	// Host memory registers in this CUDA process all the same.
	void *host = std::malloc(len);
	GPU_ASSERT(net->regMr(sc, host, len, NCCL_PTR_HOST, &mh) == ncclSuccess);
	GPU_ASSERT(net->deregMr(sc, mh) == ncclSuccess);
	std::free(host);
	GPU_ASSERT(cu.cuMemFree(d) == 0);
	GPU_ASSERT(net->closeSend(sc) == ncclSuccess);
	char bye = 0;
	GPU_ASSERT(write(sv[0], &bye, 1) == 1);
	int st = 0;
	waitpid(peer, &st, 0);
	GPU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(peer status %#x)", st);
	GPU_ASSERT(net->finalize(ctx) == ncclSuccess);
}

namespace {
std::string g_plugin_log;
void keep_log(ncclDebugLogLevel, unsigned long, const char *, int, const char *fmt, ...)
{
	va_list ap, again;
	va_start(ap, fmt);
	va_copy(again, ap);
	const int n = std::vsnprintf(nullptr, 0, fmt, ap);
	va_end(ap);
	std::string line(n > 0 ? static_cast<size_t>(n) : 0, '\0');
	std::vsnprintf(line.data(), line.size() + 1, fmt, again);
	va_end(again);
	g_plugin_log += line;
	g_plugin_log += '\n';
}
} // namespace

// Host buffers only (HMEMREG_NCCL_DEVICE_MEMORY=host) in a CUDA process:
// the provider runs without FI_HMEM, with which libfabric 2.x's shm turns
// its single-copy CMA path off and copies host memory twice. Where the
// provider offers FI_HMEM (the run with HMEMREG_GPU_DIRECT naming it), its
// endpoints must have been opened again without it.
GPU_TEST(nccl_plugin, host_buffers_only_run_the_provider_without_fi_hmem)
{
	setenv("HMEMREG_NCCL_DEVICE_MEMORY", "host", 1);
	cuda_open();
	void *lib = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
	GPU_ASSERT(lib != nullptr, "(%s)", dlerror());
	auto *net = static_cast<ncclNet_v11_t *>(dlsym(lib, "ncclNetPlugin_v11"));
	GPU_ASSERT(net != nullptr);
	ncclNetCommConfig_t cfg{-1};
	void *ctx = nullptr;
	GPU_ASSERT(net->init(&ctx, 5, &cfg, keep_log, nullptr) == ncclSuccess);
	ncclNetProperties_v11_t props;
	GPU_ASSERT(net->getProperties(0, &props) == ncclSuccess);
	GPU_ASSERT(net->finalize(ctx) == ncclSuccess);
	auto has = [](const char *what) { return g_plugin_log.find(what) != std::string::npos; };
	// The engine's description (a log message a line) ends the plugin's log
	// of init but for the port speed line.
	const size_t engine = g_plugin_log.rfind("engine: provider");
	GPU_ASSERT(engine != std::string::npos, "(no engine line in the plugin's log:\n%s)", g_plugin_log.c_str());
	const std::string text = g_plugin_log.substr(engine, g_plugin_log.find("port speed", engine) - engine);
	GPU_LOG("ptrSupport %#x; %s", props.ptrSupport, text.c_str());
	GPU_ASSERT(props.ptrSupport == NCCL_PTR_HOST, "(ptrSupport %#x with HMEMREG_NCCL_DEVICE_MEMORY=host)",
		   props.ptrSupport);
	GPU_ASSERT(text.find("FI_HMEM yes") == std::string::npos, "(host buffers only, engine opened with FI_HMEM)");
	const char *direct = std::getenv("HMEMREG_GPU_DIRECT");
	const char *prov = std::getenv("HMEMREG_NCCL_PROVIDER");
	if (direct && prov && std::strstr(direct, prov))
		GPU_ASSERT(has("opened again without FI_HMEM"), "(provider %s offers FI_HMEM: the engine should have been "
							       "opened again without it)", prov);
}

// Two ranks as two processes, CUDA buffers on both sides, through the
// plugin's table as NCCL drives it (regMr NCCL_PTR_CUDA, isend/irecv/test,
// iflush): the receiver's device memory holds exactly the sender's bytes.
// Only where ptrSupport offers CUDA (FI_HMEM); elsewhere it says so.
GPU_TEST(nccl_plugin, cuda_buffers_on_both_sides_two_processes)
{
	const size_t len = 8u << 20;
	auto byte_at = [](size_t i) { return static_cast<uint8_t>(i * 7 + (i >> 10) + 1); };
	int sv[2];
	GPU_ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	void *lib = dlopen(plugin_path(), RTLD_NOW | RTLD_LOCAL);
	GPU_ASSERT(lib != nullptr, "(%s)", dlerror());
	auto *net = static_cast<ncclNet_v11_t *>(dlsym(lib, "ncclNetPlugin_v11"));
	GPU_ASSERT(net != nullptr);
	ncclNetCommConfig_t cfg{-1};
	std::fflush(stdout);
	pid_t peer = fork(); // before either side touches CUDA
	GPU_ASSERT(peer >= 0);
	if (peer == 0) { // receiver; exit codes name the step that failed
		close(sv[0]);
		void *ctx = nullptr, *lc = nullptr, *rc = nullptr;
		char handle[NCCL_NET_HANDLE_MAXSIZE];
		ncclNetDeviceHandle_t *dev = nullptr;
		if (net->init(&ctx, 3, &cfg, nullptr, nullptr) || net->listen(ctx, 0, handle, &lc))
			_exit(2);
		ncclNetProperties_v11_t props{};
		net->getProperties(0, &props);
		uint8_t cuda_ok = (props.ptrSupport & NCCL_PTR_CUDA) != 0;
		if (write(sv[1], &cuda_ok, 1) != 1 || write(sv[1], handle, sizeof(handle)) != sizeof(handle))
			_exit(3);
		if (!cuda_ok)
			_exit(0);
		for (int i = 0; i < 10000000 && !rc; i++)
			if (net->accept(lc, &rc, &dev))
				_exit(4);
		if (!rc)
			_exit(5);
		Cuda cu = cuda_open();
		CUdeviceptr d = 0;
		std::vector<uint8_t> h(len, 0);
		void *mh = nullptr, *rq = nullptr;
		if (cu.cuMemAlloc(&d, len) || cu.cuMemcpyHtoD(d, h.data(), len) ||
		    net->regMr(rc, reinterpret_cast<void *>(d), len, NCCL_PTR_CUDA, &mh))
			_exit(6);
		void *data = reinterpret_cast<void *>(d);
		size_t size = len;
		int tag = 7;
		for (int i = 0; i < 1000000 && !rq; i++)
			if (net->irecv(rc, 1, &data, &size, &tag, &mh, nullptr, &rq))
				_exit(7);
		int done = 0, got = 0;
		for (long i = 0; i < 100000000 && !done; i++)
			if (net->test(rq, &done, &got))
				_exit(8);
		if (!done || static_cast<size_t>(got) != len)
			_exit(9);
		int isize = static_cast<int>(len);
		void *fr = nullptr;
		if (net->iflush(rc, 1, &data, &isize, &mh, &fr) || fr)
			_exit(10);
		if (cu.cuMemcpyDtoH(h.data(), d, len))
			_exit(11);
		for (size_t i = 0; i < len; i++)
			if (h[i] != byte_at(i))
				_exit(12);
		hmemreg_nccl_counters st{};
		auto *stats = reinterpret_cast<int (*)(hmemreg_nccl_counters *)>(dlsym(lib, "hmemreg_nccl_stats"));
		if (!stats || stats(&st) || st.device_regs != 1 || st.device_flushes != 1)
			_exit(13);
		char bye;
		if (write(sv[1], "v", 1) != 1 || read(sv[1], &bye, 1) != 1)
			_exit(14);
		net->deregMr(rc, mh);
		net->closeRecv(rc);
		net->closeListen(lc);
		net->finalize(ctx);
		_exit(0);
	}
	close(sv[1]);
	uint8_t cuda_ok = 0;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	pollfd pfd{sv[0], POLLIN, 0};
	GPU_ASSERT(poll(&pfd, 1, 30000) == 1);
	GPU_ASSERT(read(sv[0], &cuda_ok, 1) == 1 && read(sv[0], handle, sizeof(handle)) == sizeof(handle));
	if (!cuda_ok) {
		int st = 0;
		waitpid(peer, &st, 0);
		GPU_LOG("SKIP: ptrSupport has no NCCL_PTR_CUDA here (provider %s without FI_HMEM)",
			std::getenv("HMEMREG_NCCL_PROVIDER") ? std::getenv("HMEMREG_NCCL_PROVIDER") : "?");
		const char *direct = std::getenv("HMEMREG_GPU_DIRECT");
		const char *prov = std::getenv("HMEMREG_NCCL_PROVIDER");
		GPU_ASSERT(!(direct && prov && std::strstr(direct, prov)), "(the direct run must offer CUDA)");
		return;
	}
	void *ctx = nullptr;
	GPU_ASSERT(net->init(&ctx, 4, &cfg, nullptr, nullptr) == ncclSuccess);
	void *sc = nullptr;
	ncclNetDeviceHandle_t *dev = nullptr;
	for (int i = 0; i < 1000000 && !sc; i++)
		GPU_ASSERT(net->connect(ctx, 0, handle, &sc, &dev) == ncclSuccess);
	GPU_ASSERT(sc != nullptr);
	Cuda cu = cuda_open();
	CUdeviceptr s = 0;
	std::vector<uint8_t> h(len);
	for (size_t i = 0; i < len; i++)
		h[i] = byte_at(i);
	GPU_ASSERT(cu.cuMemAlloc(&s, len) == 0 && cu.cuMemcpyHtoD(s, h.data(), len) == 0);
	void *mh = nullptr, *rq = nullptr;
	GPU_ASSERT(net->regMr(sc, reinterpret_cast<void *>(s), len, NCCL_PTR_CUDA, &mh) == ncclSuccess);
	for (int i = 0; i < 10000000 && !rq; i++) // NULL until the receiver's irecv reached us
		GPU_ASSERT(net->isend(sc, reinterpret_cast<void *>(s), len, 7, mh, nullptr, &rq) == ncclSuccess);
	GPU_ASSERT(rq != nullptr, "(the receive was never posted)");
	int done = 0, got = 0;
	for (long i = 0; i < 100000000 && !done; i++)
		GPU_ASSERT(net->test(rq, &done, &got) == ncclSuccess);
	GPU_ASSERT(done && static_cast<size_t>(got) == len);
	char v = 0;
	GPU_ASSERT(poll(&pfd, 1, 60000) == 1 && read(sv[0], &v, 1) == 1 && v == 'v', "(receiver did not verify)");
	GPU_ASSERT(write(sv[0], "b", 1) == 1);
	int st = 0;
	waitpid(peer, &st, 0);
	GPU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "(receiver exit status %d)", WEXITSTATUS(st));
	GPU_LOG("%zu bytes device -> device between two processes through the plugin, verified; iflush waited", len);
	GPU_ASSERT(net->deregMr(sc, mh) == ncclSuccess);
	GPU_ASSERT(net->closeSend(sc) == ncclSuccess);
	GPU_ASSERT(net->finalize(ctx) == ncclSuccess);
	cu.cuMemFree(s);
}

GPU_TEST_MAIN()
