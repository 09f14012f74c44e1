// SPDX-License-Identifier: MIT
// JSON records, written by nlohmann-json. Every record has "schema" and
// "time" (seconds since the epoch, as a number: -w output plots as is);
// keys are only ever added.
#include "json_view.hpp"

#include <linux/hmemreg.h>

#include <cstdio>

#include "labels.hpp"

namespace mr_cache_stat {

namespace {

Json cache_json(const CacheView &c, const Rates &r)
{
	const hmemreg_cache_stats &s = c.sum;
	Json j;
	j["id"] = c.id;
	j["name"] = c.name;
	j["monitor"] = c.monitor;
	j["registrar"] = c.registrar;
	j["entries"] = s.entries;
	j["bytes"] = s.bytes;
	j["hits"] = s.hits;
	j["misses"] = s.misses;
	j["hit_ratio"] = ratio(s.hits, s.misses);
	j["evictions"] = s.evictions;
	j["uncached"] = s.uncached;
	j["registrations"] = s.registrations;
	j["registration_mean_ns"] = mean_ns(s);
	// Both are the upper bound of the p99's power-of-two bucket; the first
	// name is kept for readers of schema 1.
	j["registration_p99_ns"] = c.reg_p99_le_ns;
	j["registration_p99_le_ns"] = c.reg_p99_le_ns;
	j["registration_failures"] = s.registration_failures;
	Json inval = Json::object();
	for (int k = 0; k < HMEMREG_INVAL_MAX; k++)
		inval[kCauses[k]] = s.invalidations[k];
	j["invalidations"] = inval;
	j["uncached_registrations"] = s.uncached_registrations;
	Json why = Json::object();
	for (int k = 0; k < HMEMREG_UNCACHED_MAX; k++)
		why[kUncached[k]] = s.uncached_by[k];
	j["uncached_by"] = why;
	j["monitor_failures"] = s.monitor_failures;
	j["monitor_fallbacks"] = s.monitor_fallbacks;
	if (r.known)
		j["rates"] = {{"seconds", r.seconds},
			      {"hits_per_s", r.hits},
			      {"misses_per_s", r.misses},
			      {"registrations_per_s", r.registrations},
			      {"uncached_per_s", r.uncached}};
	return j;
}

Json kernel_json(const Sample &s)
{
	if (!s.loaded)
		return {{"loaded", false}, {"error", s.why}};
	const Ledger &l = s.ledger;
	Json stats = Json::object();
	for (const auto &[k, v] : l.stats)
		stats[k] = v;
	Json exports = Json::array();
	for (const auto &e : l.exports) {
		Json o = {{"id", e.id},
			  {"provider", provider_name(e.provider)},
			  {"orphaned", (e.state & HMEMREG_EXP_STATE_ORPHANED) != 0},
			  {"owner_pid", e.owner_pid},
			  {"owner_comm", e.owner_comm},
			  {"addr", e.addr},
			  {"len", e.len},
			  {"cookie", e.cookie},
			  {"attach_live", e.attach_live},
			  {"pins_live", e.pins_live},
			  {"maps_live", e.maps_live},
			  {"pins_total", e.pins_total},
			  {"attachments", attachments_json(e)}};
		// A DMABUF wrapper only (the other rows' keys are as before).
		if (!e.inner.empty())
			o["inner_exporter"] = e.inner;
		exports.push_back(std::move(o));
	}
	return {{"loaded", true}, {"stats", stats}, {"exports", exports}};
}

} // namespace

Json record_head(const Sample &s)
{
	return {{"schema", 1}, {"time", s.time}};
}

Json attachments_json(const Export &e)
{
	Json att = Json::array();
	for (const auto &a : e.attachments)
		att.push_back({{"device", a.device},
			       {"pid", a.pid},
			       {"comm", a.comm},
			       {"pinned", a.pinned},
			       {"mapped", a.mapped},
			       {"dynamic", a.dynamic}});
	return att;
}

Json sample_json(const Sample &s, const RateBook &rates)
{
	Json o = record_head(s);
	if (s.processes) {
		Json procs = Json::array();
		for (const auto &p : s.scan.live) {
			Json caches = Json::array();
			for (const auto &c : p.caches)
				caches.push_back(cache_json(c, rates.of({p.pid, p.start_time, c.id})));
			procs.push_back({{"pid", p.pid}, {"start_time", p.start_time}, {"comm", p.comm}, {"caches", caches}});
		}
		o["processes"] = procs;
		o["ignored_blocks"] = {
			{"stale", s.scan.stale}, {"foreign", s.scan.foreign}, {"unreadable", s.scan.unreadable}};
	}
	o["kernel"] = kernel_json(s);
	return o;
}

void print_json(const Json &record)
{
	// Names come from other processes' memory: never fail on bad UTF-8.
	std::string line = record.dump(-1, ' ', false, Json::error_handler_t::replace);
	std::printf("%s\n", line.c_str());
	std::fflush(stdout);
}

} // namespace mr_cache_stat
