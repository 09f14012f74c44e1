// SPDX-License-Identifier: MIT
// C API basics that need neither the module nor a fabric.
#include <criterion/criterion.h>
#include <string.h>

#include "hmemreg/hmemreg.h"

Test(api, strerror_covers_every_code)
{
	for (int c = 0; c < HMEMREG_ERROR_MAX; c++) {
		const char *s = hmemreg_strerror(-c);
		cr_assert_not_null(s);
		cr_assert_str_eq(s, hmemreg_strerror(c), "sign must not matter");
		cr_assert_str_neq(s, "unknown hmemreg error", "code %d has no text", c);
	}
	cr_assert_str_eq(hmemreg_strerror(HMEMREG_ERROR_MAX), "unknown hmemreg error");
	cr_assert_str_eq(hmemreg_strerror(-100000), "unknown hmemreg error");
}

Test(api, version_matches_header)
{
	cr_assert_eq(hmemreg_library_version(), (HMEMREG_VERSION_MAJOR << 16) | HMEMREG_VERSION_MINOR);
}

Test(api, kmod_query_rejects_null)
{
	cr_assert_eq(hmemreg_kmod_query(NULL), -HMEMREG_EINVAL);
}
