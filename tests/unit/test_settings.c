// SPDX-License-Identifier: MIT
// The one size parser, the one boolean parser and the settings table
// (hmemreg/settings.h). The load-time checks are tests/host.d/12-settings.sh.
#include <criterion/criterion.h>
#include <string.h>

#include "hmemreg/hmemreg.h"

static uint64_t size_of(const char *text)
{
	uint64_t v = 12345;
	int rc = hmemreg_parse_size(text, &v);
	cr_assert_eq(rc, 0, "'%s' should parse as a size (rc %d)", text, rc);
	return v;
}

Test(settings, sizes_in_every_spelling)
{
	cr_assert_eq(size_of("0"), 0);
	cr_assert_eq(size_of("4096"), 4096);
	const char *k64[] = {"64k", "64K", "64kb", "64KB", "64KiB", "64kib"};
	for (size_t i = 0; i < sizeof(k64) / sizeof(k64[0]); i++)
		cr_assert_eq(size_of(k64[i]), 64 << 10, "%s", k64[i]);
	cr_assert_eq(size_of("1m"), 1 << 20);
	cr_assert_eq(size_of("16MiB"), 16 << 20);
	cr_assert_eq(size_of("2G"), 2ULL << 30);
	cr_assert_eq(size_of("1t"), 1ULL << 40);
	cr_assert_eq(size_of("0x1000"), 4096);
	cr_assert_eq(size_of("010"), 10, "decimal, not octal");
	cr_assert_eq(size_of("18446744073709551615"), UINT64_MAX);
}

Test(settings, sizes_refused)
{
	const char *bad[] = {"", "-1", "+1", "abc", "1x", "1kk", "1KiBs", "1kB2", " 1", "1 ", "k",
			     "18446744073709551616", "16777216T", "0x", "0x10k", "1.5m", "1e6"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 7;
		cr_assert_eq(hmemreg_parse_size(bad[i], &v), -HMEMREG_EINVAL, "'%s' must be refused", bad[i]);
		cr_assert_eq(v, 7, "a refused size leaves the output alone ('%s')", bad[i]);
	}
	uint64_t v;
	cr_assert_eq(hmemreg_parse_size(NULL, &v), -HMEMREG_EINVAL);
	cr_assert_eq(hmemreg_parse_size("1", NULL), -HMEMREG_EINVAL);
}

Test(settings, booleans)
{
	const char *yes[] = {"1", "yes", "YES", "y", "true", "True", "on", "enable", "enabled"};
	const char *no[] = {"0", "no", "n", "false", "OFF", "disable", "disabled"};
	const char *bad[] = {"", "2", "garbage", "yes please", "-1", "nope"};
	int v;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		v = -1;
		cr_assert_eq(hmemreg_parse_bool(yes[i], &v), 0, "%s", yes[i]);
		cr_assert_eq(v, 1, "%s", yes[i]);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		v = -1;
		cr_assert_eq(hmemreg_parse_bool(no[i], &v), 0, "%s", no[i]);
		cr_assert_eq(v, 0, "%s", no[i]);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = -1;
		cr_assert_eq(hmemreg_parse_bool(bad[i], &v), -HMEMREG_EINVAL, "'%s' must be refused", bad[i]);
		cr_assert_eq(v, -1);
	}
	cr_assert_eq(hmemreg_parse_bool(NULL, &v), -HMEMREG_EINVAL);
}

Test(settings, table_is_complete_and_unique)
{
	size_t n = hmemreg_settings_count();
	cr_assert_gt(n, 10);
	cr_assert_null(hmemreg_setting_at(n));
	for (size_t i = 0; i < n; i++) {
		const struct hmemreg_setting *s = hmemreg_setting_at(i);
		cr_assert_not_null(s);
		cr_assert_eq(strncmp(s->name, "HMEMREG_", 8), 0, "%s", s->name);
		cr_assert(*s->default_value && *s->component && *s->kind && *s->meaning, "%s has empty fields",
			  s->name);
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(s->name, hmemreg_setting_at(j)->name, "%s listed twice", s->name);
	}
}

Test(settings, log_level_defaults_to_warn)
{
	// The test lanes do not set HMEMREG_LOG_LEVEL; 12-settings.sh sets it.
	if (getenv("HMEMREG_LOG_LEVEL"))
		cr_skip_test("HMEMREG_LOG_LEVEL is set here");
	cr_assert_eq(hmemreg_current_log_level(), HMEMREG_LOG_WARN);
}
