// SPDX-License-Identifier: MIT
// Helpers of the invalidation suites (test_cache_uffd, test_cache_kmod): a
// stamp written into memory before a get, which StampRegistrar
// (cache_test_util.hpp) records as the registration's cookie, and a get that
// must succeed. Criterion asserts, so not for cache_stress.
#pragma once

#include <criterion/criterion.h>
#include <cstdint>
#include <cstring>

#include "cache_test_util.hpp"

namespace t {

inline void stamp(void *p, uint64_t v) { std::memcpy(p, &v, sizeof(v)); }

inline Entry *get(Cache &c, const void *p, size_t len)
{
	Entry *e = nullptr;
	int rc = c.get(req(p, len), e);
	cr_assert_eq(rc, 0, "get: %s", hmemreg_strerror(rc));
	return e;
}

} // namespace t
