// SPDX-License-Identifier: MIT
// Text output, like the tools operators know: one line per cache, the same
// columns whether it is printed once, redrawn in place (nvidia-smi dmon,
// top) or appended to a log. REG_P99_LE is the upper bound of the
// power-of-two histogram bucket that holds the 99th percentile.
#include "text_view.hpp"

#include <linux/hmemreg.h>

#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include "labels.hpp"

namespace mr_cache_stat {

namespace {

struct Col {
	const char *name;
	int width; // negative: left-aligned
};

std::string fmt(const char *f, double v)
{
	char b[64];
	std::snprintf(b, sizeof(b), f, v);
	return b;
}

std::string rate(const Rates &r, double v)
{
	return r.known ? fmt("%.0f", v) : "-";
}

std::string clock_text(double t)
{
	time_t sec = static_cast<time_t>(t);
	struct tm tm;
	localtime_r(&sec, &tm);
	char b[16];
	std::strftime(b, sizeof(b), "%H:%M:%S", &tm);
	return b;
}

class Table {
public:
	explicit Table(std::vector<Col> cols) : cols_(std::move(cols)) {}
	std::string header() const
	{
		std::vector<std::string> names;
		for (const auto &c : cols_)
			names.emplace_back(c.name);
		return line(names);
	}
	std::string line(const std::vector<std::string> &cells) const
	{
		std::string o;
		for (size_t i = 0; i < cols_.size() && i < cells.size(); i++) {
			const int w = cols_[i].width;
			std::string cell = cells[i];
			if (i + 1 < cols_.size() && cell.size() > static_cast<size_t>(w < 0 ? -w : w))
				cell.resize(static_cast<size_t>(w < 0 ? -w : w)); // the last column takes what it needs
			char b[256];
			std::snprintf(b, sizeof(b), "%*s", w, cell.c_str());
			o += (i ? " " : "") + std::string(b);
		}
		while (!o.empty() && o.back() == ' ')
			o.pop_back();
		return o;
	}

private:
	std::vector<Col> cols_;
};

Table cache_table(const TextView &v)
{
	std::vector<Col> c;
	if (v.layout == Layout::append)
		c.push_back({"TIME", 8});
	c.insert(c.end(), {{"PID", 7}, {"COMM", -12}, {"ID", 3}, {"NAME", -24}, {"MON", -5}, {"ENTRIES", 8},
			   {"BYTES", 9}, {"HITS", 11}, {"MISSES", 9}});
	if (v.layout != Layout::once)
		c.insert(c.end(), {{"HIT/s", 9}, {"MISS/s", 8}, {"REG/s", 7}});
	c.insert(c.end(), {{"HIT%", 6}, {"UNCACHED", 8}, {"EVICT", 7}, {"INVAL", 7}, {"REG_MEAN", 9},
			   {"REG_P99_LE", 10}, {"FAIL", 5}, {"WHY_UNCACHED", -12}});
	return Table(std::move(c));
}

std::vector<std::string> cache_cells(const TextView &v, const Sample &s, const ProcessView &p, const CacheView &c,
				     const Rates &r)
{
	const hmemreg_cache_stats &t = c.sum;
	std::vector<std::string> o;
	if (v.layout == Layout::append)
		o.push_back(clock_text(s.time));
	std::string why = uncached_why(t);
	o.insert(o.end(), {std::to_string(p.pid), p.comm, std::to_string(c.id), c.name, c.monitor,
			   std::to_string(t.entries), human(t.bytes), std::to_string(t.hits), std::to_string(t.misses)});
	if (v.layout != Layout::once)
		o.insert(o.end(), {rate(r, r.hits), rate(r, r.misses), rate(r, r.registrations)});
	o.insert(o.end(), {fmt("%.1f%%", 100 * ratio(t.hits, t.misses)), std::to_string(t.uncached_registrations),
			   std::to_string(t.evictions), std::to_string(invalidations(t)),
			   fmt("%.1fus", static_cast<double>(mean_ns(t)) / 1e3),
			   c.reg_p99_le_ns ? fmt("<=%.1fus", static_cast<double>(c.reg_p99_le_ns) / 1e3) : "-",
			   std::to_string(t.registration_failures), why.empty() ? "-" : why});
	return o;
}

// Once: what the counters of a cache mean, under its line.
void explain(const CacheView &c, std::vector<std::string> &out)
{
	const hmemreg_cache_stats &t = c.sum;
	std::string causes;
	for (int i = 0; i < HMEMREG_INVAL_MAX; i++)
		if (t.invalidations[i])
			causes += std::string(" ") + kCauses[i] + "=" + std::to_string(t.invalidations[i]);
	if (!causes.empty())
		out.push_back("        invalidations:" + causes);
	if (t.uncached_registrations) {
		std::string why = uncached_why(t);
		out.push_back("        " + std::to_string(t.uncached_registrations) + " registration(s) uncached" +
			      (why.empty() ? std::string(" (reasons not recorded by this version)")
					   : " by reason: " + why));
	}
	if (t.monitor_failures)
		out.push_back("        monitor " + c.monitor +
			      " stopped on an error: every entry was dropped, nothing cached since");
	if (t.monitor_fallbacks)
		out.push_back("        " + std::to_string(t.monitor_fallbacks) +
			      " range(s) registered alone (their mapping refused whole registration)");
	if (const char *b = blind_spots(c.monitor))
		if (t.uncached_registrations || c.monitor != "uffd")
			out.push_back("        monitor " + c.monitor + ": " + b);
}

std::string kernel_summary(const Ledger &l)
{
	char b[512];
	std::snprintf(b, sizeof(b),
		      "kernel: %" PRIu64 " exports (%s), %" PRIu64 " orphaned, %" PRIu64 " attachments, %" PRIu64
		      " pins, %" PRIu64 " maps, %" PRIu64 " host pages pinned, %" PRIu64 " watches, %" PRIu64
		      " events (%" PRIu64 " dropped), %" PRIu64 " open fds",
		      l.stat("exports_live"), human(l.stat("exported_bytes")).c_str(), l.stat("orphans_live"),
		      l.stat("attach_live"), l.stat("pins_live"), l.stat("maps_live"), l.stat("host_pages_pinned"),
		      l.stat("watches_live"), l.stat("events_total"), l.stat("events_dropped"), l.stat("contexts_live"));
	return b;
}

void kernel_lines(const Ledger &l, std::vector<std::string> &out)
{
	out.push_back(kernel_summary(l));
	char b[1024];
	if (l.stat("devmem_pool_bytes")) {
		std::snprintf(b, sizeof(b), "devmem: %s of %s used, %" PRIu64 " handles",
			      human(l.stat("devmem_used_bytes")).c_str(), human(l.stat("devmem_pool_bytes")).c_str(),
			      l.stat("devmem_handles_live"));
		out.push_back(b);
	}
	if (l.stat("unbalanced")) {
		std::snprintf(b, sizeof(b), "WARNING: %" PRIu64 " unbalanced unpin/unmap calls by importers",
			      l.stat("unbalanced"));
		out.push_back(b);
	}
	if (l.exports.empty())
		return;
	std::snprintf(b, sizeof(b), "%-6s %-14s %-8s %-16s %-18s %10s %5s %5s %5s %s", "ID", "KIND", "OWNER", "COMM",
		      "ADDR", "LEN", "ATT", "PINS", "MAPS", "STATE / IMPORTERS");
	out.push_back(b);
	for (const auto &e : l.exports) {
		std::string state = e.state & HMEMREG_EXP_STATE_ORPHANED ? "orphaned" : "live";
		if (e.state & HMEMREG_EXP_STATE_HANDLE_FREED)
			state += ",handle-freed";
		if (e.state & HMEMREG_EXP_STATE_STALE)
			state += ",stale";
		for (const auto &a : e.attachments)
			state += " " + a.device + "(" + a.comm + "/" + std::to_string(a.pid) + (a.dynamic ? ",dyn" : "") +
				 " pinned=" + std::to_string(a.pinned) + ")";
		std::snprintf(b, sizeof(b), "%-6" PRIu64 " %-14.14s %-8u %-16.16s 0x%016" PRIx64 " %10s %5u %5u %5u ", e.id,
			      kind_text(e).c_str(), e.owner_pid, e.owner_comm.c_str(), e.addr, human(e.len).c_str(),
			      e.attach_live, e.pins_live, e.maps_live);
		out.push_back(b + state);
	}
}

} // namespace

void print_text(const Sample &s, const RateBook &rates, TextView &v)
{
	std::vector<std::string> out;
	const Table table = cache_table(v);
	if (v.layout == Layout::live)
		out.push_back("mr_cache_stat: every " + fmt("%g", v.interval) + " s, " + clock_text(s.time) +
			      " (ctrl-c stops)");
	size_t caches = 0;
	for (const auto &p : s.scan.live)
		caches += p.caches.size();
	if (s.processes) {
		if (v.layout != Layout::append || v.first)
			out.push_back(table.header());
		if (caches == 0 && v.layout != Layout::append)
			out.push_back("(no process is using hmemreg: no live stats block in /dev/shm)");
		for (const auto &p : s.scan.live) {
			for (const auto &c : p.caches) {
				out.push_back(table.line(cache_cells(v, s, p, c, rates.of({p.pid, p.start_time, c.id}))));
				if (v.layout == Layout::once)
					explain(c, out);
			}
		}
		const Scan &sc = s.scan;
		if ((sc.stale || sc.foreign || sc.unreadable) && v.layout != Layout::append)
			out.push_back("(ignored: " + std::to_string(sc.stale) + " stale block(s) of dead processes" +
				      (sc.stale ? " (mr_cache_stat --gc removes them)" : "") + ", " +
				      std::to_string(sc.foreign) + " of another version or half-written, " +
				      std::to_string(sc.unreadable) + " unreadable: permission)");
	}
	if (v.kmod_lines) {
		std::string prefix = v.layout == Layout::append ? clock_text(s.time) + " " : "";
		if (!s.loaded)
			out.push_back(prefix + "kernel: " + s.why);
		else if (v.layout == Layout::append)
			out.push_back(prefix + kernel_summary(s.ledger));
		else
			kernel_lines(s.ledger, out);
	}
	v.first = false;
	if (v.layout == Layout::live) {
		// Home, each line over the old one (clearing its tail), then clear below.
		std::fputs("\033[H", stdout);
		for (const auto &l : out)
			std::printf("%s\033[K\n", l.c_str());
		std::fputs("\033[J", stdout);
	} else {
		for (const auto &l : out)
			std::printf("%s\n", l.c_str());
	}
	std::fflush(stdout);
}

} // namespace mr_cache_stat
