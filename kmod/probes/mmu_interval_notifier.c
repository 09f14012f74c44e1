// SPDX-License-Identifier: GPL-2.0
/* mmu_interval_notifier (99cb252f5e68, 5.5): required, no fallback. */
#include <linux/mmu_notifier.h>
#include <linux/module.h>

int hmemreg_probe(struct mmu_interval_notifier *n, struct mm_struct *mm);
int hmemreg_probe(struct mmu_interval_notifier *n, struct mm_struct *mm)
{
	return mmu_interval_notifier_insert(n, mm, 0, 4096, NULL);
}
MODULE_LICENSE("GPL");
