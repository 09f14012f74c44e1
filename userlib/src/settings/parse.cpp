// SPDX-License-Identifier: MIT
// The one parser for sizes and the one for booleans (hmemreg/settings.h).
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "hmemreg/hmemreg.h"

extern "C" int hmemreg_parse_size(const char *text, uint64_t *bytes)
{
	if (!text || !bytes || !*text || *text == '-' || *text == '+' || *text == ' ')
		return -HMEMREG_EINVAL;
	const bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
	errno = 0;
	char *end = nullptr;
	unsigned long long v = std::strtoull(text, &end, hex ? 16 : 10);
	if (errno || end == text || (hex && end == text + 2))
		return -HMEMREG_EINVAL;
	unsigned shift = 0;
	if (*end && !hex) {
		const char *units = "kmgt";
		const char *u = std::strchr(units, *end | 0x20);
		if (!u || !*u)
			return -HMEMREG_EINVAL;
		shift = 10 * static_cast<unsigned>(u - units + 1);
		end++;
		// The unit may be spelled k, kb or kib (binary in every spelling).
		if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
			end += std::strlen(end);
	}
	if (*end || (shift && v > (~0ULL >> shift)))
		return -HMEMREG_EINVAL;
	*bytes = static_cast<uint64_t>(v) << shift;
	return 0;
}

extern "C" int hmemreg_parse_bool(const char *text, int *value)
{
	static const char *const yes[] = {"1", "yes", "y", "true", "on", "enable", "enabled"};
	static const char *const no[] = {"0", "no", "n", "false", "off", "disable", "disabled"};
	if (!text || !value)
		return -HMEMREG_EINVAL;
	for (const char *w : yes)
		if (!strcasecmp(text, w))
			return *value = 1, 0;
	for (const char *w : no)
		if (!strcasecmp(text, w))
			return *value = 0, 0;
	return -HMEMREG_EINVAL;
}
