// SPDX-License-Identifier: MIT
// The export memory kind's C API (hmemreg/export.h) where it needs no
// module: bad input, and a clear error where hmemreg.ko is not loaded
// (the VM suite tests/vm.d/40-rxe-dmabuf.sh covers the rest).
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "hmemreg/hmemreg.h"

Test(export_api, bad_input)
{
	hmemreg_export_t *x = NULL;
	cr_assert_eq(hmemreg_export_devmem(4096, NULL), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_export_devmem(0, &x), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_export_last_error(), "page size"), "%s", hmemreg_export_last_error());
	cr_assert_eq(hmemreg_export_devmem(4095, &x), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_export_host(NULL, 4096, &x), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_export_host((void *)4097, 4096, &x), -HMEMREG_EINVAL);
	cr_assert_null(x);
	cr_assert_eq(hmemreg_export_free(NULL), 0);
	cr_assert_eq(hmemreg_export_check(NULL), -HMEMREG_EINVAL);
	cr_assert_null(hmemreg_export_addr(NULL));
	cr_assert_eq(hmemreg_export_fd(NULL), -1);
}

Test(export_api, cache_refuses_the_kind_without_an_export)
{
	struct hmemreg_cache *c;
	cr_assert_eq(hmemreg_cache_create_memory(NULL, &c), 0);
	struct hmemreg_mr m;
	static char buf[4096];
	cr_assert_eq(hmemreg_mr_get_export(c, NULL, 0, 4096, &m), -HMEMREG_EINVAL);
	cr_assert(strstr(hmemreg_export_last_error(), "NULL"), "%s", hmemreg_export_last_error());
	// The kind is reachable only through an export, never by a raw request.
	struct hmemreg_mr_request rq = {.size = sizeof(rq), .iface = HMEMREG_IFACE_KMOD_EXPORT, .addr = buf,
					.len = sizeof(buf), .device = 1, .dmabuf_fd = -1};
	cr_assert_eq(hmemreg_mr_get_req(c, &rq, &m), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_cache_destroy(c), 0);
}

Test(export_api, module_not_loaded_is_a_clear_error)
{
	if (access("/dev/hmemreg", F_OK) == 0)
		cr_skip_test("/dev/hmemreg exists here");
	hmemreg_export_t *x = NULL;
	cr_assert_eq(hmemreg_export_devmem(1 << 20, &x), -HMEMREG_ENODEV);
	cr_assert(strstr(hmemreg_export_last_error(), "hmemreg.ko is not loaded"), "%s", hmemreg_export_last_error());
	static char buf[8192] __attribute__((aligned(4096)));
	cr_assert_eq(hmemreg_export_host(buf, 4096, &x), -HMEMREG_ENODEV);
	cr_assert_null(x);
}
