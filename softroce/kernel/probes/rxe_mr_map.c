// SPDX-License-Identifier: GPL-2.0
/*
 * struct rxe_mr.map: the MR page map holds kernel addresses, which rxe
 * copies through (6.1's rxe). Compiled with -I of rxe's source.
 */
#include <linux/module.h>
#include "rxe.h"

u64 hmemreg_probe(struct rxe_mr *mr);
u64 hmemreg_probe(struct rxe_mr *mr)
{
	return mr->map[0]->buf[0].addr;
}
MODULE_LICENSE("GPL");
