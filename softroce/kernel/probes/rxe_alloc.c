// SPDX-License-Identifier: GPL-2.0
/*
 * rxe_alloc(): rxe's pools allocate MRs and free them at cleanup (6.1's);
 * later rxe's verbs allocate them, rxe_add_to_pool() them and free them
 * after rxe_cleanup(). Compiled with -I of rxe's source.
 */
#include <linux/module.h>
#include "rxe.h"

void *hmemreg_probe(struct rxe_dev *rxe);
void *hmemreg_probe(struct rxe_dev *rxe)
{
	return rxe_alloc(&rxe->mr_pool);
}
MODULE_LICENSE("GPL");
