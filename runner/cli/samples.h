// A language-model run's text: `trainyard sample` and the report's samples find its resolved
// config, the weights it was tested with (train.save_weights) and the tokenizer its token files
// were written with (dataset.tokenizer); sampling itself is the engine's
// (runner/engine/sampling.h).
#pragma once

#include <string>
#include <vector>

#include "components/plugin_loader.h"
#include "db/store.h"
#include "reports/report.h"
#include "runner/engine/sampling.h"

namespace trainyard {

// The texts run `run` writes from `prompt` ("" : a document's start). `tokenizer_path` overrides
// the run's dataset.tokenizer. UserError saying what is missing and how to get it: a run that is
// no language model, kept no weights, or names no tokenizer. The plugins the run's config names
// are loaded into `plugins` (a plugin's model samples as a built-in one does).
std::vector<std::string> sample_run(Store& store, const RunRecord& run, const std::string& prompt,
                                    const std::string& tokenizer_path, const SampleOptions& options,
                                    PluginLoader& plugins);

// Each language-model experiment of `report` gets its variants' samples: two texts of 48 tokens
// from a document's start (seeds 1 and 2), by the first completed run of each variant that can
// write; a variant with none gets a note saying why.
void add_report_samples(Report& report, Store& store, PluginLoader& plugins);

}  // namespace trainyard
