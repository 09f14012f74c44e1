// SPDX-License-Identifier: MIT
// The exported tables ncclNetPlugin_v11 (NCCL 2.28 looks for it first) and
// ncclNetPlugin_v10 (older NCCL). Each entry forwards to the one Plugin of
// this process; nothing here throws into NCCL or aborts it.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>

#include "log.hpp"
#include "nccl_abi.h"
#include "plugin.hpp"

#define HMEMREG_EXPORT __attribute__((visibility("default")))

namespace hmemreg::nccl {
namespace {

std::mutex g_life;                    // init / finalize
std::unique_ptr<Plugin> g_owner;
std::atomic<Plugin *> g_plugin{nullptr};
unsigned g_contexts = 0;              // v11 contexts not yet finalized

// At exit or dlclose without finalize (v10 has none): stop the engine while
// the library's own statics (registration cache registry, ...) still exist.
// Registered after the first engine is up, so it runs before they go.
void teardown()
{
	std::lock_guard l(g_life);
	g_plugin.store(nullptr);
	g_owner.reset();
}

ncclResult_t start(ncclDebugLogger_t logger)
{
	if (logger)
		set_logger(logger);
	if (g_plugin.load())
		return ncclSuccess;
	std::unique_ptr<Plugin> p;
	ncclResult_t r = Plugin::create(p);
	if (r != ncclSuccess)
		return r;
	g_owner = std::move(p);
	g_plugin.store(g_owner.get());
	static bool registered = false;
	if (!registered)
		registered = std::atexit(teardown) == 0;
	return ncclSuccess;
}

// Runs fn on the plugin; "not initialised" and escaping exceptions become
// clean errors.
template <typename F> ncclResult_t with_plugin(const char *what, F &&fn)
{
	Plugin *p = g_plugin.load();
	if (!p) {
		NWARN("%s: the plugin is not initialised (init was not called or failed)", what);
		return ncclInternalError;
	}
	try {
		return fn(*p);
	} catch (const std::bad_alloc &) {
		NWARN("%s: out of memory", what);
		return ncclSystemError;
	} catch (const std::exception &e) {
		NWARN("%s: %s", what, e.what());
		return ncclInternalError;
	}
}

ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t)
{
	std::lock_guard l(g_life);
	return start(logger);
}

ncclResult_t init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config, ncclDebugLogger_t logger,
		      ncclProfilerCallback_t)
{
	if (!ctx)
		return ncclInvalidArgument;
	std::lock_guard l(g_life);
	ncclResult_t r = start(logger);
	if (r != ncclSuccess)
		return r;
	g_contexts++;
	*ctx = g_plugin.load(); // one engine per process, shared by every communicator
	NINFO(NCCL_INIT | NCCL_NET, "init for communicator %llx (traffic class %d), %u context(s)",
	      static_cast<unsigned long long>(comm_id), config ? config->trafficClass : -1, g_contexts);
	return ncclSuccess;
}

ncclResult_t finalize_v11(void *ctx)
{
	std::lock_guard l(g_life);
	if (!ctx || ctx != g_plugin.load() || g_contexts == 0) {
		NWARN("finalize: %p is not a context of this plugin", ctx);
		return ncclInternalError;
	}
	if (--g_contexts == 0) {
		size_t left = g_owner->live_comms();
		if (left) {
			NINFO(NCCL_NET, "finalize: %zu comm(s) still open, keeping the engine", left);
			return ncclSuccess;
		}
		g_plugin.store(nullptr);
		g_owner.reset();
	}
	return ncclSuccess;
}

ncclResult_t set_net_attr_v11(void *ctx, ncclNetAttr_v11_t *)
{
	// Hints about concurrency per collective; the engine has nothing to tune.
	return ctx == g_plugin.load() ? ncclSuccess : ncclInternalError;
}

ncclResult_t devices(int *ndev)
{
	return with_plugin("devices", [&](Plugin &p) {
		if (!ndev)
			return ncclInvalidArgument;
		*ndev = p.devices();
		return ncclSuccess;
	});
}

ncclResult_t get_properties_v11(int dev, ncclNetProperties_v11_t *props)
{
	return with_plugin("getProperties", [&](Plugin &p) { return p.properties(dev, props); });
}

ncclResult_t get_properties_v10(int dev, ncclNetProperties_v10_t *props)
{
	return with_plugin("getProperties", [&](Plugin &p) {
		if (!props)
			return ncclInvalidArgument;
		ncclNetProperties_v11_t full;
		ncclResult_t r = p.properties(dev, &full);
		if (r == ncclSuccess) // v10's layout is v11's prefix
			std::memcpy(props, &full, sizeof(*props));
		return r;
	});
}

ncclResult_t listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	return with_plugin("listen", [&](Plugin &p) {
		if (ctx != &p) {
			NWARN("listen: unknown context %p", ctx);
			return ncclInternalError;
		}
		return p.listen(dev, handle, listen_comm);
	});
}

ncclResult_t listen_v10(int dev, void *handle, void **listen_comm)
{
	return with_plugin("listen", [&](Plugin &p) { return p.listen(dev, handle, listen_comm); });
}

ncclResult_t connect_v11(void *ctx, int dev, void *handle, void **send_comm, ncclNetDeviceHandle_t **dev_comm)
{
	return with_plugin("connect", [&](Plugin &p) {
		if (ctx != &p) {
			NWARN("connect: unknown context %p", ctx);
			return ncclInternalError;
		}
		if (dev_comm)
			*dev_comm = nullptr; // no device offload
		return p.connect(dev, handle, send_comm);
	});
}

ncclResult_t connect_v10(int dev, ncclNetCommConfig_t *, void *handle, void **send_comm,
			 ncclNetDeviceHandle_t **dev_comm)
{
	return with_plugin("connect", [&](Plugin &p) {
		if (dev_comm)
			*dev_comm = nullptr;
		return p.connect(dev, handle, send_comm);
	});
}

ncclResult_t accept(void *listen_comm, void **recv_comm, ncclNetDeviceHandle_t **dev_comm)
{
	return with_plugin("accept", [&](Plugin &p) {
		if (dev_comm)
			*dev_comm = nullptr;
		return p.accept(listen_comm, recv_comm);
	});
}

ncclResult_t reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return with_plugin("regMr", [&](Plugin &p) { return p.reg_mr(comm, data, size, type, mhandle); });
}

ncclResult_t reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle)
{
	return with_plugin("regMrDmaBuf",
			   [&](Plugin &p) { return p.reg_mr_dmabuf(comm, data, size, type, offset, fd, mhandle); });
}

ncclResult_t dereg_mr(void *comm, void *mhandle)
{
	return with_plugin("deregMr", [&](Plugin &p) { return p.dereg_mr(comm, mhandle); });
}

ncclResult_t isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *, void **request)
{
	return with_plugin("isend", [&](Plugin &p) { return p.isend(send_comm, data, size, tag, mhandle, request); });
}

ncclResult_t irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **,
		   void **request)
{
	return with_plugin("irecv",
			   [&](Plugin &p) { return p.irecv(recv_comm, n, data, sizes, tags, mhandles, request); });
}

ncclResult_t iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
	return with_plugin("iflush", [&](Plugin &p) { return p.iflush(recv_comm, n, data, sizes, mhandles, request); });
}

ncclResult_t test(void *request, int *done, int *sizes)
{
	return with_plugin("test", [&](Plugin &p) { return p.test(request, done, sizes); });
}

ncclResult_t close_send(void *c)
{
	return with_plugin("closeSend", [&](Plugin &p) { return p.close_send(c); });
}

ncclResult_t close_recv(void *c)
{
	return with_plugin("closeRecv", [&](Plugin &p) { return p.close_recv(c); });
}

ncclResult_t close_listen(void *c)
{
	return with_plugin("closeListen", [&](Plugin &p) { return p.close_listen(c); });
}

// Both tables from one definition: what differs by version is picked by
// the table's type; the entries v10 and v11 share (HMEMREG_NCCL_DATA_PATH in
// nccl_net_abi.h) are set once, by name.
template <typename Table> constexpr Table make_table()
{
	constexpr bool v11 = std::is_same_v<Table, ncclNet_v11_t>;
	static_assert(v11 || std::is_same_v<Table, ncclNet_v10_t>);
	Table t{};
	t.name = "hmemreg";
	if constexpr (v11) {
		t.init = init_v11;
		t.getProperties = get_properties_v11;
		t.listen = listen_v11;
		t.connect = connect_v11;
		t.finalize = finalize_v11;
		t.setNetAttr = set_net_attr_v11;
	} else {
		t.init = init_v10;
		t.getProperties = get_properties_v10;
		t.listen = listen_v10;
		t.connect = connect_v10;
	}
	t.devices = devices;
	t.accept = accept;
	t.regMr = reg_mr;
	t.regMrDmaBuf = reg_mr_dmabuf;
	t.deregMr = dereg_mr;
	t.isend = isend;
	t.irecv = irecv;
	t.iflush = iflush;
	t.test = test;
	t.closeSend = close_send;
	t.closeRecv = close_recv;
	t.closeListen = close_listen;
	t.getDeviceMr = nullptr;   // no device offload
	t.irecvConsumed = nullptr; // idem
	t.makeVDevice = nullptr;   // NCCL then uses the physical device
	return t;
}

} // namespace
} // namespace hmemreg::nccl

using namespace hmemreg::nccl;

extern "C" {

// constinit: built by the compiler, no constructor runs at dlopen.
HMEMREG_EXPORT constinit ncclNet_v11_t ncclNetPlugin_v11 = make_table<ncclNet_v11_t>();
HMEMREG_EXPORT constinit ncclNet_v10_t ncclNetPlugin_v10 = make_table<ncclNet_v10_t>();

HMEMREG_EXPORT int hmemreg_nccl_stats(struct hmemreg_nccl_counters *out)
{
	Plugin *p = g_plugin.load();
	if (!out || !p)
		return -1;
	p->stats(*out);
	return 0;
}

} // extern "C"
