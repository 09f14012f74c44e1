// SPDX-License-Identifier: MIT
#include "export_join.hpp"

#include <linux/hmemreg.h>

#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>

#include "labels.hpp"

namespace mr_cache_stat {

namespace {

std::string state_text(uint32_t st)
{
	std::string o;
	auto add = [&](uint32_t bit, const char *name) {
		if (st & bit)
			o += (o.empty() ? "" : ",") + std::string(name);
	};
	add(HMEMREG_EXP_STATE_ORPHANED, "orphaned");
	add(HMEMREG_EXP_STATE_PINNED, "pinned");
	add(HMEMREG_EXP_STATE_HANDLE_FREED, "handle-freed");
	add(HMEMREG_EXP_STATE_STALE, "stale");
	return o.empty() ? "live" : o;
}

std::string importers_text(const Export &e)
{
	std::string o;
	for (const auto &a : e.attachments)
		o += (o.empty() ? "" : " ") + a.device + "(pid " + std::to_string(a.pid) + " pinned " +
		     std::to_string(a.pinned) + " mapped " + std::to_string(a.mapped) + ")";
	return o.empty() ? "-" : o;
}

Json kernel_side_json(const Export &e)
{
	Json o = {{"provider", provider_name(e.provider)},
		{"state", state_text(e.state)},
		{"owner_pid", e.owner_pid},
		{"len", e.len},
		{"attach_live", e.attach_live},
		{"pins_live", e.pins_live},
		{"maps_live", e.maps_live},
		{"attachments", attachments_json(e)}};
	// A DMABUF wrapper only (the other rows' keys are as before).
	if (!e.inner.empty())
		o["inner_exporter"] = e.inner;
	return o;
}

} // namespace

ExportJoin join_exports(const Sample &s)
{
	ExportJoin j;
	std::map<uint64_t, const Export *> by_id;
	for (const auto &e : s.ledger.exports)
		by_id[e.id] = &e;
	std::set<uint64_t> held;
	for (const auto &p : s.scan.live) {
		if (p.version < HMEMREG_STATS_VERSION_EXPORTS)
			j.old_blocks++;
		j.unlisted += p.exports_unlisted;
		for (const auto &x : p.exports) {
			JoinedExport r;
			r.pid = p.pid;
			r.comm = p.comm;
			r.cache_id = x.cache_id;
			for (const auto &c : p.caches)
				if (c.id == x.cache_id)
					r.cache_name = c.name;
			r.export_id = x.export_id;
			r.entries = x.entries;
			r.bytes = x.bytes;
			held.insert(x.export_id);
			if (s.loaded) {
				auto it = by_id.find(x.export_id);
				r.kernel = it == by_id.end() ? nullptr : it->second;
				j.missing += r.kernel == nullptr;
			}
			j.rows.push_back(std::move(r));
		}
	}
	// Full tables leave pairs out: then no pin can be called unexplained.
	if (s.loaded && !j.unlisted)
		for (const auto &e : s.ledger.exports)
			if ((e.pins_live || e.attach_live) && !held.count(e.id))
				j.unexplained.push_back(&e);
	return j;
}

void print_exports_text(const Sample &s, const ExportJoin &j)
{
	if (!s.loaded)
		std::printf("kernel: %s (the process view alone below)\n", s.why.c_str());
	if (j.rows.empty()) {
		std::printf("no cache holds registrations of hmemreg.ko exports\n");
	} else {
		std::printf("%7s %-16s %4s %-24s %8s %7s %9s %-14s %-8s %5s %s\n", "PID", "COMM", "ID", "CACHE", "EXPORT",
			    "ENTRIES", "BYTES", "KIND", "STATE", "PINS", "IMPORTERS");
		for (const auto &r : j.rows) {
			const Export *k = r.kernel;
			std::printf("%7d %-16.16s %4u %-24.24s %8" PRIu64 " %7" PRIu64 " %9s %-14.14s %-8s %5s %s\n",
				    r.pid, r.comm.c_str(), r.cache_id, r.cache_name.c_str(), r.export_id, r.entries,
				    human(r.bytes).c_str(), k ? kind_text(*k).c_str() : "-",
				    !s.loaded ? "?" : k ? state_text(k->state).c_str() : "MISSING",
				    k ? std::to_string(k->pins_live).c_str() : "-",
				    k ? importers_text(*k).c_str() : "-");
		}
	}
	if (j.missing)
		std::printf("BUG: %zu cache row(s) name an export the kernel does not have (marked MISSING)\n", j.missing);
	for (const Export *e : j.unexplained)
		std::printf("not from a cache: export %" PRIu64 " (%s, owner pid %u): %u pin(s), importers %s\n", e->id,
			    kind_text(*e).c_str(), e->owner_pid, e->pins_live, importers_text(*e).c_str());
	if (j.unlisted)
		std::printf("%" PRIu64 " (cache, export) pair(s) not listed: a process's table is full\n", j.unlisted);
	if (j.old_blocks)
		std::printf("%d process(es) of an older libhmemreg publish no export rows\n", j.old_blocks);
}

Json exports_json(const Sample &s, const ExportJoin &j)
{
	Json rows = Json::array();
	for (const auto &r : j.rows) {
		Json o = {{"pid", r.pid},
			  {"comm", r.comm},
			  {"cache_id", r.cache_id},
			  {"cache", r.cache_name},
			  {"export_id", r.export_id},
			  {"entries", r.entries},
			  {"bytes", r.bytes}};
		if (!s.loaded)
			o["kernel"] = nullptr;
		else if (!r.kernel)
			o["kernel"] = {{"found", false}};
		else {
			o["kernel"] = kernel_side_json(*r.kernel);
			o["kernel"]["found"] = true;
		}
		rows.push_back(std::move(o));
	}
	Json unexplained = Json::array();
	for (const Export *e : j.unexplained) {
		Json o = kernel_side_json(*e);
		o["id"] = e->id;
		unexplained.push_back(std::move(o));
	}
	Json o = record_head(s);
	o["view"] = "exports";
	o["kernel"] = s.loaded ? Json{{"loaded", true}} : Json{{"loaded", false}, {"error", s.why}};
	o["exports"] = rows;
	o["missing_in_kernel"] = j.missing;
	o["unexplained"] = unexplained;
	o["unlisted"] = j.unlisted;
	o["old_blocks"] = j.old_blocks;
	return o;
}

} // namespace mr_cache_stat
