// SPDX-License-Identifier: MIT
// hmemreg/fabric_compat.h as a program outside the tree sees it: prints the
// DMA-BUF flag and the layout of the range it registers, which must be the
// same whether the libfabric headers it is built against have FI_MR_DMABUF
// (1.20+: libfabric's own definitions) or not (1.17: the header's).
#include <stdio.h>

#include <hmemreg/fabric_compat.h>

int main(void)
{
	hmemreg_fi_mr_dmabuf_t d = {3, 4096, 8192, NULL};
	struct hmemreg_fi_mr_attr a = {0};
	hmemreg_fi_mr_attr_set_dmabuf(&a, &d);
	if ((const void *)a.attr.mr_iov != (const void *)&d || a.newer[7] != 0)
		return 1;
	printf("flag %#llx api %#x size %zu fd %zu offset %zu len %zu base_addr %zu room %zu\n",
	       (unsigned long long)HMEMREG_FI_MR_DMABUF, (unsigned)HMEMREG_FI_API_DMABUF, sizeof(d),
	       offsetof(hmemreg_fi_mr_dmabuf_t, fd), offsetof(hmemreg_fi_mr_dmabuf_t, offset),
	       offsetof(hmemreg_fi_mr_dmabuf_t, len), offsetof(hmemreg_fi_mr_dmabuf_t, base_addr),
	       sizeof(a) - sizeof(a.attr));
	return 0;
}
