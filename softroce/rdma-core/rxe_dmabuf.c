// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * ibv_reg_dmabuf_mr() for the rxe provider (hmemreg; not in rdma-core 44.0).
 * Soft-RoCE needs nothing of its own in the command: the kernel's generic
 * UVERBS_METHOD_REG_DMABUF_MR carries it to rdma_rxe's reg_user_mr_dmabuf
 * (hmemreg's softroce/kernel/rxe_dmabuf.c). The MR is a plain verbs_mr, so
 * rxe_dereg_mr() frees it like any other.
 */
#include <errno.h>
#include <stdlib.h>

#include <infiniband/driver.h>

#include "rxe.h"

struct ibv_mr *rxe_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	ret = ibv_cmd_reg_dmabuf_mr(pd, offset, length, iova, fd, access, vmr);
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}
