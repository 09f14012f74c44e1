// SPDX-License-Identifier: MIT
// hmemreg_bench's one argument parser: CLI11, with the value kinds every
// subcommand shares. Sizes are parsed by the library's one size parser
// (hmemreg_parse_size: 4096, 64k, 64KiB, 1m, 2G), the same as the
// environment's; counts are positive. A bad value names the flag and the
// value; --help prints to stdout and exits 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hmemreg::bench::cli {

// A subcommand's parser: `hmemreg_bench NAME`, with --json and --help.
class Parser {
public:
	Parser(const std::string &name, const std::string &description);
	CLI::App &app() { return app_; }
	bool json = false;

	CLI::Option *size(const std::string &flag, uint64_t &out, const std::string &help);
	CLI::Option *sizes(const std::string &flag, std::vector<uint64_t> &out, const std::string &help);
	// Positive counts (1 and up); zero, negative or not a number is refused.
	CLI::Option *count(const std::string &flag, long &out, const std::string &help);
	CLI::Option *counts(const std::string &flag, std::vector<long> &out, const std::string &help);
	CLI::Option *seconds(const std::string &flag, double &out, const std::string &help);
	CLI::Option *text(const std::string &flag, std::string &out, const std::string &help);
	CLI::Option *texts(const std::string &flag, std::vector<std::string> &out, const std::string &help);
	CLI::Option *flag(const std::string &flag, bool &out, const std::string &help);

	// -1: go on; else the exit status (0 after --help, 2 after a bad
	// argument, with the message on stderr).
	int parse(int argc, char **argv);

private:
	std::string name_;
	CLI::App app_;
};

} // namespace hmemreg::bench::cli
