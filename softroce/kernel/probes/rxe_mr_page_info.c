// SPDX-License-Identifier: GPL-2.0
/*
 * struct rxe_mr.page_info: the MR page map holds pages, which rxe maps
 * itself with kmap_local_page() (Debian's 6.12 rxe; the rxe of the kernels
 * between kept an xarray of pages, which neither probe matches). Compiled
 * with -I of rxe's source.
 */
#include <linux/module.h>
#include "rxe.h"

struct page *hmemreg_probe(struct rxe_mr *mr);
struct page *hmemreg_probe(struct rxe_mr *mr)
{
	return mr->page_info[0].page;
}
MODULE_LICENSE("GPL");
