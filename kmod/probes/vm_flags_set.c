// SPDX-License-Identifier: GPL-2.0
/* vm_flags_set() replaced direct vm_flags writes (bc292ab00f6c, 6.3). */
#include <linux/mm.h>
#include <linux/module.h>

void hmemreg_probe(struct vm_area_struct *vma);
void hmemreg_probe(struct vm_area_struct *vma)
{
	vm_flags_set(vma, VM_DONTEXPAND);
}
MODULE_LICENSE("GPL");
