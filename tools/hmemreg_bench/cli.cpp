// SPDX-License-Identifier: MIT
#include "cli.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <hmemreg/settings.h>

namespace hmemreg::bench::cli {
namespace {

uint64_t to_size(const std::string &flag, const std::string &v)
{
	uint64_t bytes = 0;
	if (hmemreg_parse_size(v.c_str(), &bytes) != 0)
		throw CLI::ValidationError(flag, "'" + v + "' is not a size (bytes, or with k/m/g/t: 64k, 16MiB, 2G)");
	return bytes;
}

// CLI11's own range checks print the range of a double; these say what is wanted.
const CLI::Validator kPositiveCount(
	[](std::string &v) -> std::string {
		char *end = nullptr;
		errno = 0;
		long long x = std::strtoll(v.c_str(), &end, 10);
		if (v.empty() || errno || *end || x <= 0)
			return "'" + v + "' is not a count (a whole number, 1 or more)";
		return {};
	},
	"", "");

const CLI::Validator kPositiveSeconds(
	[](std::string &v) -> std::string {
		char *end = nullptr;
		errno = 0;
		double x = std::strtod(v.c_str(), &end);
		if (v.empty() || errno || *end || !(x > 0) || x > 1e9)
			return "'" + v + "' is not a number of seconds (more than 0)";
		return {};
	},
	"", "");

} // namespace

Parser::Parser(const std::string &name, const std::string &description)
	: name_("hmemreg_bench " + name), app_(description, name_)
{
	app_.set_help_flag("-h,--help", "print this help and exit");
	app_.add_flag("--json", json, "one JSON object per result row");
	app_.get_formatter()->column_width(28);
}

CLI::Option *Parser::size(const std::string &flag, uint64_t &out, const std::string &help)
{
	return app_
		.add_option_function<std::string>(
			flag, [flag, &out](const std::string &v) { out = to_size(flag, v); }, help)
		->type_name("SIZE")
		->default_str(std::to_string(out));
}

CLI::Option *Parser::sizes(const std::string &flag, std::vector<uint64_t> &out, const std::string &help)
{
	return app_
		.add_option_function<std::vector<std::string>>(
			flag,
			[flag, &out](const std::vector<std::string> &vs) {
				out.clear();
				for (const auto &v : vs)
					out.push_back(to_size(flag, v));
			},
			help)
		->type_name("SIZE[,SIZE...]")
		->delimiter(',');
}

CLI::Option *Parser::count(const std::string &flag, long &out, const std::string &help)
{
	return app_.add_option(flag, out, help)->check(kPositiveCount)->type_name("N")->capture_default_str();
}

CLI::Option *Parser::counts(const std::string &flag, std::vector<long> &out, const std::string &help)
{
	return app_.add_option(flag, out, help)
		->check(kPositiveCount)
		->delimiter(',')
		->type_name("N[,N...]")
		->capture_default_str();
}

CLI::Option *Parser::seconds(const std::string &flag, double &out, const std::string &help)
{
	return app_.add_option(flag, out, help)->check(kPositiveSeconds)->type_name("S")->capture_default_str();
}

CLI::Option *Parser::text(const std::string &flag, std::string &out, const std::string &help)
{
	return app_.add_option(flag, out, help)->capture_default_str();
}

CLI::Option *Parser::texts(const std::string &flag, std::vector<std::string> &out, const std::string &help)
{
	return app_.add_option(flag, out, help)->delimiter(',')->capture_default_str();
}

CLI::Option *Parser::flag(const std::string &flag, bool &out, const std::string &help)
{
	return app_.add_flag(flag, out, help);
}

int Parser::parse(int argc, char **argv)
{
	try {
		app_.parse(argc, argv);
	} catch (const CLI::CallForHelp &) {
		std::fputs(app_.help().c_str(), stdout);
		return 0;
	} catch (const CLI::ParseError &e) {
		std::fprintf(stderr, "%s: %s\n(%s --help lists the options)\n", name_.c_str(), e.what(), name_.c_str());
		return 2;
	}
	return -1;
}

} // namespace hmemreg::bench::cli
