// SPDX-License-Identifier: MIT
// hmemreg_bench SUBCOMMAND [options]: dispatch and the shared row printer.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <hmemreg/common.h>

#include "bench.hpp"

namespace hmemreg::bench {

std::map<std::string, Bench> &registry()
{
	static std::map<std::string, Bench> r;
	return r;
}

Row &Row::add(std::string key, std::string value)
{
	nlohmann::ordered_json v = value;
	cells_.push_back({std::move(key), std::move(value), std::move(v)});
	return *this;
}

Row &Row::add(std::string key, double value, int precision)
{
	if (!std::isfinite(value)) {
		cells_.push_back({std::move(key), "-", nullptr});
		return *this;
	}
	char buf[64];
	std::snprintf(buf, sizeof(buf), "%.*f", precision, value);
	// The JSON number carries the same digits as the table.
	cells_.push_back({std::move(key), buf, std::strtod(buf, nullptr)});
	return *this;
}

Row &Row::add(std::string key, long long value)
{
	cells_.push_back({std::move(key), std::to_string(value), value});
	return *this;
}

Row &Row::add(std::string key, unsigned long long value)
{
	cells_.push_back({std::move(key), std::to_string(value), value});
	return *this;
}

Row &Row::add(std::string key, bool value)
{
	cells_.push_back({std::move(key), value ? "yes" : "no", value});
	return *this;
}

void Printer::section(std::string_view title)
{
	if (!json_)
		std::printf("\n# %.*s\n", static_cast<int>(title.size()), title.data());
	header_due_ = true;
}

void Printer::print(const Row &row)
{
	if (json_) {
		nlohmann::ordered_json o = nlohmann::ordered_json::object();
		for (const auto &c : row.cells())
			o[c.key] = c.value;
		std::printf("%s\n", o.dump().c_str());
	} else {
		if (header_due_) {
			for (const auto &c : row.cells())
				std::printf("%14s", c.key.c_str());
			std::printf("\n");
			header_due_ = false;
		}
		for (const auto &c : row.cells())
			std::printf("%14s", c.text.c_str());
		std::printf("\n");
	}
	std::fflush(stdout);
}

} // namespace hmemreg::bench

static int usage(FILE *f)
{
	std::fprintf(f, "usage: hmemreg_bench SUBCOMMAND [--json] [options]\n"
		     "       hmemreg_bench --version | --help\n\nsubcommands:\n");
	for (const auto &[name, b] : hmemreg::bench::registry())
		std::fprintf(f, "  %-8s %s\n", name.c_str(), b.help);
	return f == stderr ? 2 : 0;
}

int main(int argc, char **argv)
{
	hmemreg::bench::restore_crash_signals();
	if (argc < 2)
		return usage(stderr);
	if (!std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help"))
		return usage(stdout);
	if (!std::strcmp(argv[1], "--version")) {
		std::printf("hmemreg_bench %s\n", HMEMREG_VERSION_STRING);
		return 0;
	}
	auto &r = hmemreg::bench::registry();
	auto it = r.find(argv[1]);
	if (it == r.end()) {
		std::fprintf(stderr, "hmemreg_bench: unknown subcommand '%s'\n", argv[1]);
		return usage(stderr);
	}
	return it->second.fn(argc - 1, argv + 1);
}
