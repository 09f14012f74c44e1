// SPDX-License-Identifier: MIT
#include "settings_view.hpp"

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <hmemreg/settings.h>
#include <nlohmann/json.hpp>

namespace mr_cache_stat {

int print_settings(bool json)
{
	nlohmann::json all = nlohmann::json::array();
	for (size_t i = 0; i < hmemreg_settings_count(); i++) {
		const hmemreg_setting *s = hmemreg_setting_at(i);
		const char *v = std::getenv(s->name);
		if (json) {
			all.push_back({{"name", s->name},
				       {"component", s->component},
				       {"kind", s->kind},
				       {"default", s->default_value},
				       {"value", v ? nlohmann::json(v) : nlohmann::json(nullptr)},
				       {"meaning", s->meaning}});
			continue;
		}
		std::printf("# %s (%s): %s\n#   %s, default %s\n%s%s=%s\n\n", s->name, s->component, s->meaning,
			    s->kind, s->default_value, v ? "" : "# ", s->name, v ? v : "");
	}
	if (json)
		std::printf("%s\n", nlohmann::json{{"time", static_cast<long long>(std::time(nullptr))},
						   {"settings", all}}.dump().c_str());
	return 0;
}

} // namespace mr_cache_stat
