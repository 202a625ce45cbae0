// Reports: what each technique bought. build_report() reads the store into plain rows — one per
// variant, its newest completed run (or its newest run when none completed), with the speedup over
// the baseline computed here, once — and the renderers turn those rows into HTML, Markdown or CSV.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "db/store.h"
#include "reports/report_options.h"

namespace trainyard {

struct VariantRow {
  std::string variant;
  int64_t run_id = 0;
  RunStatus status = RunStatus::queued;
  std::string precision;
  std::string strategy;
  int64_t devices = 1;
  std::string device_name;
  std::string torch_version;
  std::string ended_at;
  std::string error;
  std::map<std::string, double> metrics;  // final metrics, plus "speedup" when it can be computed
  std::vector<EpochRow> epochs;
  // What the run recorded of itself: dtypes, loss scaling, CUDA graphs, where it saved weights.
  std::map<std::string, std::string> attributes;
};

struct ExperimentReport {
  ExperimentRecord experiment;
  ReportOptions options;
  std::string baseline;  // the variant speedups are relative to
  std::vector<VariantRow> rows;
};

struct Report {
  std::string generated_at;
  std::vector<ExperimentReport> experiments;
};

// All experiments, or only `experiment` (UserError when the store has no such experiment).
Report build_report(Store& store, const std::string& experiment = "");

std::string render_html(const Report& report);
std::string render_markdown(const Report& report);
std::string render_csv(const Report& report);

// &, <, >, " and ' as entities: every string that came from YAML or the store passes through it.
std::string html_escape(const std::string& text);

}  // namespace trainyard
