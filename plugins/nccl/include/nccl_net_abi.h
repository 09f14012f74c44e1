/* SPDX-License-Identifier: MIT */
/*
 * NCCL's external network plugin ABI, the part hmemreg's plugin implements
 * and hmemreg_bench nccl drives (as NCCL does), written from NCCL's ext-net
 * documentation. NCCL ships these types only in its source tree (ext-net/),
 * not in a package (Debian has none), so the project keeps them here, once:
 * the interface between NCCL and any net plugin, not the plugin's internals.
 *
 * NCCL dlopens libnccl-net-${NCCL_NET_PLUGIN}.so and looks up the symbol
 * "ncclNetPlugin_vN", newest N first; NCCL 2.28 starts at v11 and falls back
 * to v10, v9, ... . A table is a name followed by function pointers in a
 * fixed order; every function returns an ncclResult_t.
 *
 * v11 (NCCL 2.28) against v10: init gets a per-communicator context, the
 *   communicator hash and the comm config; listen/connect take that context;
 *   the comm config moved from connect to init; properties gained
 *   maxMultiRequestSize; the table gained finalize(ctx) and setNetAttr.
 */
#ifndef HMEMREG_NCCL_NET_ABI_H
#define HMEMREG_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,     /* a system call, library or the network failed */
	ncclInternalError = 3,   /* NCCL used the plugin wrongly (bad handle ...) */
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,    /* most likely the user's doing (sizes, config) */
	ncclRemoteError = 6,     /* the peer failed or went away */
	ncclInProgress = 7,
} ncclResult_t;

/* Logger levels and subsystem flags (the subset used here). */
typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

#define NCCL_INIT 0x1UL
#define NCCL_NET 0x10UL
#define NCCL_ENV 0x80UL
#define NCCL_ALL (~0UL)

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
				  const char *fmt, ...);
/* Profiler callback: opaque here, never called. */
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle, int64_t pluginId,
					       void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128

#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Device offload kinds: only HOST (no offload) here. */
typedef enum { NCCL_NET_DEVICE_HOST = 0, NCCL_NET_DEVICE_UNPACK = 1 } ncclNetDeviceType;
/* Only ever passed through by pointer. */
typedef struct ncclNetDeviceHandle ncclNetDeviceHandle_t;

#define NCCL_NET_MAX_DEVS_PER_NIC 4
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_t; /* same layout in v10 and v11 */

typedef struct {
	int trafficClass; /* -1: undefined */
} ncclNetCommConfig_t;   /* same layout in v10 and v11 */

/* Properties common to v10 and v11 (v11 appends maxMultiRequestSize). */
#define HMEMREG_NCCL_PROPS_V10_FIELDS                                                                           \
	char *name;                      /* for logs */                                                          \
	char *pciPath;                   /* /sys PCI device path, NULL for a virtual NIC */                     \
	uint64_t guid;                   /* same guid = same physical port */                                    \
	int ptrSupport;                  /* NCCL_PTR_* */                                                        \
	int regIsGlobal;                 /* registrations usable on any comm */                                  \
	int forceFlush;                  /* NCCL must iflush every receive */                                    \
	int speed;                       /* Mbps */                                                              \
	int port;                                                                                                \
	float latency;                   /* microseconds */                                                      \
	int maxComms;                                                                                            \
	int maxRecvs;                    /* buffers one irecv may group */                                       \
	ncclNetDeviceType netDeviceType;                                                                         \
	int netDeviceVersion;                                                                                    \
	ncclNetVDeviceProps_t vProps;                                                                            \
	size_t maxP2pBytes;                                                                                      \
	size_t maxCollBytes;

typedef struct {
	HMEMREG_NCCL_PROPS_V10_FIELDS
} ncclNetProperties_v10_t;

typedef struct {
	HMEMREG_NCCL_PROPS_V10_FIELDS
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;

/* Data path and registration entries, identical in v10 and v11. */
#define HMEMREG_NCCL_DATA_PATH                                                                                  \
	ncclResult_t (*accept)(void *listenComm, void **recvComm, ncclNetDeviceHandle_t **recvDevComm);          \
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);                   \
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,    \
				    void **mhandle);                                                             \
	ncclResult_t (*deregMr)(void *comm, void *mhandle);                                                      \
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle, void *phandle,   \
			      void **request);                                                                   \
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags, void **mhandles,    \
			      void **phandles, void **request);                                                  \
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles, void **request); \
	ncclResult_t (*test)(void *request, int *done, int *sizes);                                              \
	ncclResult_t (*closeSend)(void *sendComm);                                                               \
	ncclResult_t (*closeRecv)(void *recvComm);                                                               \
	ncclResult_t (*closeListen)(void *listenComm);                                                           \
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);                             \
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);                                     \
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_t *props);

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	HMEMREG_NCCL_DATA_PATH
} ncclNet_v10_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config, ncclDebugLogger_t logFunction,
			     ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
	HMEMREG_NCCL_DATA_PATH
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_NCCL_NET_ABI_H */
