// SPDX-License-Identifier: MIT
// hmemreg_bench: subcommand registry and the row printer shared by all benches.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hmemreg::bench {

using BenchFn = int (*)(int argc, char **argv);

struct Bench {
	BenchFn fn;
	const char *help;
};

std::map<std::string, Bench> &registry();

struct Registrar {
	Registrar(const char *name, BenchFn fn, const char *help) { registry()[name] = {fn, help}; }
};

#define HMEMREG_BENCH(name, fn, help) static ::hmemreg::bench::Registrar hmemreg_bench_reg_##fn(name, fn, help)

// One result row: ordered (key, value) pairs. Printed either as an aligned
// table (header once per table) or, with --json, one JSON object per line
// (nlohmann-json; a number that is not finite is null, never inf or nan).
class Row {
public:
	struct Cell {
		std::string key;
		std::string text;     // the table's
		nlohmann::ordered_json value; // the JSON's
	};
	Row &add(std::string key, std::string value);
	Row &add(std::string key, const char *value) { return add(std::move(key), std::string(value)); }
	Row &add(std::string key, double value, int precision = 2);
	Row &add(std::string key, long long value);
	Row &add(std::string key, unsigned long long value);
	Row &add(std::string key, int value) { return add(std::move(key), static_cast<long long>(value)); }
	Row &add(std::string key, long value) { return add(std::move(key), static_cast<long long>(value)); }
	Row &add(std::string key, unsigned long value) { return add(std::move(key), static_cast<unsigned long long>(value)); }
	Row &add(std::string key, bool value);
	const std::vector<Cell> &cells() const { return cells_; }

private:
	std::vector<Cell> cells_;
};

class Printer {
public:
	explicit Printer(bool json) : json_(json) {}
	void print(const Row &row);
	// Start a new table (prints a fresh header with the next row).
	void section(std::string_view title);

private:
	bool json_;
	bool header_due_ = true;
};

// Puts back the default action of the crash and termination signals whose
// handlers the PSM libraries installed at load (crash_signals.cpp): a crash
// then ends by its signal, not exit(1). Returns how many were reset.
int restore_crash_signals();
// In a child that loads plugins (whose libraries may install PSM's handlers
// again): restore_crash_signals(), then a crash prints the process's
// backtrace to stderr before it ends by its signal.
void report_crashes();

} // namespace hmemreg::bench
