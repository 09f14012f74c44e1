/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * hmemreg's dma-buf memory regions for Soft-RoCE (rxe_dmabuf.c), and the
 * two rxe_mr.c helpers that the hook patch makes visible to it.
 */
#ifndef RXE_DMABUF_H
#define RXE_DMABUF_H

struct rxe_dev;
struct rxe_mr;

void rxe_dmabuf_setup_device(struct rxe_dev *rxe);
void rxe_dmabuf_mr_release(struct rxe_mr *mr);

void rxe_mr_init(int access, struct rxe_mr *mr);
int rxe_mr_alloc(struct rxe_mr *mr, int num_buf);

#endif /* RXE_DMABUF_H */
