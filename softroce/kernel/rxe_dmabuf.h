/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * hmemreg's dma-buf memory regions for Soft-RoCE (rxe_dmabuf.c): the two
 * calls the hook patch adds to rxe. The patch of each rxe source line also
 * declares in rxe_loc.h the rxe_mr.c helpers it makes visible.
 */
#ifndef RXE_DMABUF_H
#define RXE_DMABUF_H

struct rxe_dev;
struct rxe_mr;

void rxe_dmabuf_setup_device(struct rxe_dev *rxe);
void rxe_dmabuf_mr_release(struct rxe_mr *mr);

#endif /* RXE_DMABUF_H */
