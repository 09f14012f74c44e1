/* SPDX-License-Identifier: MIT */
/*
 * What the plugin speaks: NCCL's net plugin ABI (include/nccl_net_abi.h),
 * and its own counters beside it.
 */
#ifndef HMEMREG_NCCL_ABI_H
#define HMEMREG_NCCL_ABI_H

#include "nccl_net_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Not part of NCCL's ABI: counters of this plugin for its own tests and
 * diagnostics (exported as hmemreg_nccl_stats()).
 */
struct hmemreg_nccl_counters {
	uint64_t regions_live;     /* engine registrations held now */
	uint64_t region_hits;      /* regMr served by an existing registration */
	uint64_t region_misses;    /* regMr that registered */
	uint64_t mhandles_live;
	uint64_t comms_live;       /* listen + send + recv */
	uint64_t requests_live;
	uint64_t bytes_sent;
	uint64_t bytes_received;
	uint64_t eager_receives;   /* receives whose data came through an eager slot */
	uint64_t peer_closes;      /* connections whose other side closed them */
	uint64_t device_regs;      /* regMr/regMrDmaBuf of CUDA memory (direct, FI_HMEM) */
	uint64_t device_flushes;   /* device buffers iflush was asked about (nothing to wait for) */
	uint64_t nic_landings;     /* Inline or eager receives the NIC copied into device memory */
};
int hmemreg_nccl_stats(struct hmemreg_nccl_counters *out);

#ifdef __cplusplus
}
#endif

#endif /* HMEMREG_NCCL_ABI_H */
