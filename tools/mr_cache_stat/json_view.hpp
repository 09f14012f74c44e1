// SPDX-License-Identifier: MIT
// The JSON output: one object per line per sample (schema in mr_cache_stat(1)).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sample.hpp"

namespace mr_cache_stat {

using Json = nlohmann::ordered_json;

// {"schema":1,"time":...,"processes":[...],"ignored_blocks":{...},"kernel":{...}}
Json sample_json(const Sample &s, const RateBook &rates);

// What every record starts with: {"schema":1,"time":...} (the --exports
// view's records too).
Json record_head(const Sample &s);

// An export's importers as the ledger lists them: [{"device":...,"pid":...,
// "comm":...,"pinned":...,"mapped":...,"dynamic":...}, ...].
Json attachments_json(const Export &e);

// Print one record as one line.
void print_json(const Json &record);

} // namespace mr_cache_stat
