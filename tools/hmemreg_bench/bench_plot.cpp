// SPDX-License-Identifier: MIT
// hmemreg_bench plot [-o DIR] [FILE...]: the rows that `xfer|nccl|cache|reg
// --json` print (one JSON object per line; other lines are skipped) turned
// into PNGs by gnuplot:
//   xfer-<provider>-<mem>[...].png  Gbit/s against size, a line per chunk
//                                   count and notification, with the
//                                   row's reference and ceiling;
//   nccl-<provider>.png             Gbit/s against size, with the reference;
//   cache-<case>.png                ns per get+put against entries, hmemreg
//                                   and UCX's rcache side by side per thread count;
//   reg-<provider>-<mem>.png        ns per registration against size.
// Each PNG comes with the gnuplot script that drew it (data inline), to redo
// or restyle by hand.
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "cli.hpp"

extern char **environ;

namespace hmemreg::bench {

namespace {

using Json = nlohmann::json;

// A number whether the row wrote it as a number or as a string; NaN if absent.
double num(const Json &r, const char *key)
{
	auto it = r.find(key);
	if (it == r.end())
		return NAN;
	if (it->is_number())
		return it->get<double>();
	if (it->is_string()) {
		const std::string &s = it->get_ref<const std::string &>();
		char *end = nullptr;
		double v = std::strtod(s.c_str(), &end);
		return end != s.c_str() && !*end ? v : NAN;
	}
	return NAN;
}

std::string str(const Json &r, const char *key, const char *otherwise = "")
{
	auto it = r.find(key);
	if (it == r.end())
		return otherwise;
	if (it->is_string())
		return it->get<std::string>();
	return it->dump();
}

struct Series {
	std::string title;
	std::string style; // gnuplot "with ..." part
	std::map<double, double> points; // x -> y (a repeated x keeps the larger y)

	void add(double x, double y)
	{
		if (!std::isfinite(x) || !std::isfinite(y) || x <= 0 || y < 0)
			return;
		auto [it, fresh] = points.emplace(x, y);
		if (!fresh && y > it->second)
			it->second = y;
	}
};

struct Chart {
	std::string file; // without extension
	std::string title, xlabel, ylabel;
	bool xbytes = true; // x axis in bytes (binary prefixes) or a plain count
	bool logy = false;
	std::map<std::string, Series> series; // ordered by key
};

std::string file_part(std::string s)
{
	for (char &c : s)
		if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.')
			c = '_';
	return s;
}

// A gnuplot single-quoted string (no escapes inside; ' doubled).
std::string quoted(const std::string &s)
{
	std::string o = "'";
	for (char c : s)
		o += c == '\'' ? std::string("''") : std::string(1, c);
	return o + "'";
}

const char *const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

class Plots {
public:
	void add(const Json &row);
	const std::map<std::string, Chart> &charts() const { return charts_; }
	const std::map<std::string, int> &ignored() const { return ignored_; }

private:
	Chart &chart(const std::string &key) { return charts_[key]; }
	void xfer(const Json &r);
	void nccl(const Json &r);
	void cache(const Json &r);
	void reg(const Json &r);
	std::map<std::string, Chart> charts_;
	std::map<std::string, int> ignored_;
};

void Plots::add(const Json &r)
{
	const std::string bench = str(r, "bench");
	if (bench == "xfer")
		xfer(r);
	else if (bench == "nccl")
		nccl(r);
	else if (bench == "cache")
		cache(r);
	else if (bench == "reg")
		reg(r);
	else
		ignored_[bench.empty() ? "(no \"bench\" key)" : bench]++;
}

void Plots::xfer(const Json &r)
{
	const std::string prov = str(r, "provider"), mem = str(r, "mem", "host"), target = str(r, "target");
	const std::string rails = str(r, "rails", "1");
	std::string file = "xfer-" + file_part(prov) + "-" + file_part(mem);
	if (rails != "1")
		file += "-" + rails + "rails";
	if (target == "remote")
		file += "-remote";
	Chart &c = chart(file);
	c.file = file;
	c.title = "hmemreg_bench xfer: " + prov + ", " + mem + " memory, " + rails + " rail(s), target " + target;
	c.xlabel = "transfer size";
	c.ylabel = "Gbit/s";
	const double x = num(r, "bytes");
	Series &s = c.series["1 " + str(r, "notify") + " " + str(r, "chunks")];
	s.title = "hmemreg, " + str(r, "chunks") + " chunk(s), notify " + str(r, "notify");
	s.style = "linespoints lw 2 pt 7";
	s.add(x, num(r, "gbps"));
	if (std::isfinite(num(r, "ref_gbps")) && num(r, "ref_gbps") > 0) {
		Series &ref = c.series["2 ref"];
		ref.title = "reference: " + str(r, "ref");
		ref.style = "lines lw 2 dt 2 lc 'black'";
		ref.add(x, num(r, "ref_gbps"));
	}
	if (std::isfinite(num(r, "ceiling_gbps")) && num(r, "ceiling_gbps") > 0) {
		Series &ceil = c.series["3 ceiling"];
		ceil.title = "ceiling: " + str(r, "ceiling");
		ceil.style = "lines lw 2 dt 3 lc 'gray40'";
		ceil.add(x, num(r, "ceiling_gbps"));
	}
}

void Plots::nccl(const Json &r)
{
	const std::string prov = str(r, "provider");
	const std::string file = "nccl-" + file_part(prov);
	Chart &c = chart(file);
	c.file = file;
	c.title = "hmemreg_bench nccl: " + prov;
	c.xlabel = "message size";
	c.ylabel = "Gbit/s";
	const double x = num(r, "bytes");
	Series &s = c.series["1 plugin"];
	s.title = "NCCL net plugin";
	s.style = "linespoints lw 2 pt 7";
	s.add(x, num(r, "gbps"));
	if (num(r, "ref_gbps") > 0) {
		Series &ref = c.series["2 ref"];
		ref.title = "reference: " + str(r, "ref");
		ref.style = "lines lw 2 dt 2 lc 'black'";
		ref.add(x, num(r, "ref_gbps"));
	}
}

void Plots::cache(const Json &r)
{
	const std::string kase = str(r, "case"), impl = str(r, "impl"), threads = str(r, "threads", "1");
	const std::string file = "cache-" + file_part(kase);
	Chart &c = chart(file);
	c.file = file;
	c.title = "hmemreg_bench cache: " + kase + " (get+put, no-op registration)";
	c.xlabel = "entries in the cache";
	c.ylabel = "ns per operation per thread";
	c.xbytes = false;
	c.logy = true;
	// hmemreg and ucx of one thread count share a colour (solid, dashed).
	Series &s = c.series[threads + " " + (impl == "hmemreg" ? "1" : "2") + impl];
	s.title = impl + ", " + threads + " thread(s)";
	s.style = impl == "hmemreg" ? "linespoints lw 2 pt 7" : "linespoints lw 2 dt 2 pt 6";
	s.add(num(r, "entries"), num(r, "ns_per_op"));
}

void Plots::reg(const Json &r)
{
	// "prov" until the bench's parsers became one; "provider" after.
	const std::string prov = r.contains("provider") ? str(r, "provider") : str(r, "prov");
	const std::string mem = str(r, "mem", "host");
	const std::string file = "reg-" + file_part(prov) + "-" + file_part(mem);
	Chart &c = chart(file);
	c.file = file;
	c.title = "hmemreg_bench reg: " + prov + ", " + mem + " memory";
	c.xlabel = "registration size";
	c.ylabel = "ns per registration";
	c.logy = true;
	Series &s = c.series[str(r, "impl") + " " + str(r, "case")];
	s.title = str(r, "impl") + ", " + str(r, "case");
	s.style = "linespoints lw 2 pt 7";
	s.add(num(r, "bytes"), num(r, "ns_per_op"));
}

std::string script(const Chart &c, const std::string &png)
{
	std::string o;
	o += "# hmemreg_bench plot: redraw with gnuplot " + c.file + ".gp\n";
	o += "set terminal pngcairo size 1100,650 font ',11' noenhanced\n";
	o += "set output " + quoted(png) + "\n";
	o += "set title " + quoted(c.title) + "\n";
	o += "set xlabel " + quoted(c.xlabel) + "\nset ylabel " + quoted(c.ylabel) + "\n";
	o += "set grid\nset key outside right top\nset logscale x 2\n";
	o += c.xbytes ? "set format x '%.0b%B'\n" : "set format x '%.0f'\n";
	o += c.logy ? "set logscale y 10\n" : "set yrange [0:*]\n";
	size_t i = 0;
	for (const auto &[key, s] : c.series) {
		o += "$s" + std::to_string(i++) + " << EOD\n";
		for (const auto &[x, y] : s.points)
			o += std::to_string(x) + " " + std::to_string(y) + "\n";
		o += "EOD\n";
	}
	o += "plot ";
	i = 0;
	size_t color = 0;
	std::map<std::string, size_t> colors; // cache: one colour per thread count
	for (const auto &[key, s] : c.series) {
		std::string style = s.style;
		if (style.find(" lc ") == std::string::npos) {
			std::string group = c.file.rfind("cache-", 0) == 0 ? key.substr(0, key.find(' ')) : key;
			auto [it, fresh] = colors.emplace(group, color);
			if (fresh)
				color++;
			style += std::string(" lc '") + kColors[it->second % std::size(kColors)] + "'";
		}
		o += (i ? ", \\\n     " : "") + std::string("$s") + std::to_string(i) + " using 1:2 with " + style +
		     " title " + quoted(s.title);
		i++;
	}
	return o + "\n";
}

// Runs gnuplot on the script; false (with why) if it is missing or fails.
bool run_gnuplot(const std::string &gp, std::string &why)
{
	std::vector<std::string> args{"gnuplot", gp};
	std::vector<char *> av;
	for (auto &a : args)
		av.push_back(a.data());
	av.push_back(nullptr);
	pid_t pid;
	int rc = posix_spawnp(&pid, "gnuplot", nullptr, nullptr, av.data(), environ);
	if (rc) {
		why = rc == ENOENT ? "gnuplot not found (Debian: apt-get install gnuplot-nox)"
				   : std::string("cannot run gnuplot: ") + std::strerror(rc);
		return false;
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		why = "gnuplot failed on " + gp + " (its messages above)";
		return false;
	}
	return true;
}

// Reads rows from `in`; false (with why naming the line) on a line that
// looks like a row but is not JSON.
bool read_rows(std::istream &in, const std::string &name, Plots &plots, size_t &rows, std::string &why)
{
	std::string line;
	for (size_t n = 1; std::getline(in, line); n++) {
		size_t at = line.find_first_not_of(" \t");
		if (at == std::string::npos || line[at] != '{')
			continue; // the text tables, headers, messages
		Json row = Json::parse(line, nullptr, false);
		if (row.is_discarded() || !row.is_object()) {
			why = name + ":" + std::to_string(n) + ": not a JSON object: " + line.substr(0, 80);
			return false;
		}
		plots.add(row);
		rows++;
	}
	return true;
}

int bench_plot(int argc, char **argv)
{
	std::string dir = ".";
	std::vector<std::string> inputs;
	cli::Parser p("plot", "PNGs (gnuplot) from the rows of hmemreg_bench xfer|nccl|cache|reg --json: one per chart, "
			      "each with the gnuplot script that drew it");
	p.text("-o,--output", dir, "folder for the PNGs and their scripts")->default_str(".");
	p.app().add_option("files", inputs, "files of rows (- or none: stdin)");
	if (int rc = p.parse(argc, argv); rc >= 0)
		return rc;
	if (inputs.empty())
		inputs.emplace_back("-");
	Plots plots;
	size_t rows = 0;
	std::string why;
	for (const auto &name : inputs) {
		bool ok;
		if (name == "-") {
			ok = read_rows(std::cin, "stdin", plots, rows, why);
		} else {
			std::ifstream f(name);
			if (!f) {
				std::fprintf(stderr, "hmemreg_bench plot: cannot read %s: %s\n", name.c_str(),
					     std::strerror(errno));
				return 1;
			}
			ok = read_rows(f, name, plots, rows, why);
		}
		if (!ok) {
			std::fprintf(stderr, "hmemreg_bench plot: %s\n", why.c_str());
			return 1;
		}
	}
	for (const auto &[bench, n] : plots.ignored())
		std::fprintf(stderr, "hmemreg_bench plot: %d row(s) of %s: nothing to draw for it\n", n, bench.c_str());
	size_t drawable = 0;
	for (const auto &[key, ch] : plots.charts())
		for (const auto &[k, s] : ch.series)
			drawable += s.points.size();
	if (!drawable) {
		std::fprintf(stderr, "hmemreg_bench plot: no rows to draw (%zu JSON row(s) read; run a bench with --json)\n",
			     rows);
		return 1;
	}
	if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
		std::fprintf(stderr, "hmemreg_bench plot: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
		return 1;
	}
	for (const auto &[key, ch] : plots.charts()) {
		const std::string png = dir + "/" + ch.file + ".png", gp = dir + "/" + ch.file + ".gp";
		std::ofstream f(gp);
		f << script(ch, png);
		f.close();
		if (!f) {
			std::fprintf(stderr, "hmemreg_bench plot: cannot write %s\n", gp.c_str());
			return 1;
		}
		if (!run_gnuplot(gp, why)) {
			std::fprintf(stderr, "hmemreg_bench plot: %s\n", why.c_str());
			return 1;
		}
		std::printf("%s\n", png.c_str());
	}
	return 0;
}

} // namespace

HMEMREG_BENCH("plot", bench_plot, "PNGs from --json rows (gnuplot): bandwidth, cache and registration charts");

} // namespace hmemreg::bench
