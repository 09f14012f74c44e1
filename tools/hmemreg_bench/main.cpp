// SPDX-License-Identifier: MIT
// hmemreg_bench SUBCOMMAND [options]: dispatch and the shared row printer.
#include <cstdio>
#include <cstring>

#include "bench.hpp"

namespace hmemreg::bench {

std::map<std::string, Bench> &registry()
{
	static std::map<std::string, Bench> r;
	return r;
}

Row &Row::add(std::string key, double value, int precision)
{
	char buf[64];
	std::snprintf(buf, sizeof(buf), "%.*f", precision, value);
	return put(std::move(key), buf, false);
}

Row &Row::add(std::string key, long long value)
{
	return put(std::move(key), std::to_string(value), false);
}

static std::string json_escape(const std::string &s)
{
	std::string o;
	for (char c : s) {
		if (c == '"' || c == '\\')
			o += '\\';
		if (static_cast<unsigned char>(c) < 0x20) {
			char b[8];
			std::snprintf(b, sizeof(b), "\\u%04x", c);
			o += b;
			continue;
		}
		o += c;
	}
	return o;
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
		std::string line = "{";
		bool first = true;
		for (const auto &[k, v] : row.cells()) {
			line += first ? "" : ", ";
			first = false;
			line += "\"" + json_escape(k) + "\": ";
			line += v.second ? "\"" + json_escape(v.first) + "\"" : v.first;
		}
		std::printf("%s}\n", line.c_str());
	} else {
		if (header_due_) {
			for (const auto &c : row.cells())
				std::printf("%14s", c.first.c_str());
			std::printf("\n");
			header_due_ = false;
		}
		for (const auto &c : row.cells())
			std::printf("%14s", c.second.first.c_str());
		std::printf("\n");
	}
	std::fflush(stdout);
}

bool take_flag(int &argc, char **argv, std::string_view flag)
{
	for (int i = 1; i < argc; i++) {
		if (flag == argv[i]) {
			std::memmove(&argv[i], &argv[i + 1], sizeof(char *) * (argc - i));
			argc--;
			return true;
		}
	}
	return false;
}

} // namespace hmemreg::bench

static int usage(FILE *f)
{
	std::fprintf(f, "usage: hmemreg_bench SUBCOMMAND [--json] [options]\n\nsubcommands:\n");
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
	auto &r = hmemreg::bench::registry();
	auto it = r.find(argv[1]);
	if (it == r.end()) {
		std::fprintf(stderr, "hmemreg_bench: unknown subcommand '%s'\n", argv[1]);
		return usage(stderr);
	}
	return it->second.fn(argc - 1, argv + 1);
}
