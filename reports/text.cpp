// The report as text: Markdown, CSV and the terminal's answers (reports/report.h). Like the HTML
// page, they render what reports/comparison.cpp decided.
#include <fmt/format.h>

#include "common/metrics.h"
#include "common/text.h"
#include "reports/report.h"

namespace trainyard {

std::string summary_line(const ExperimentReport& section) {
  int completed = 0, failed = 0, not_finished = 0;
  for (const auto& row : section.rows) {
    if (row.completed > 0)
      ++completed;
    else if (row.status == RunStatus::failed)
      ++failed;
    else
      ++not_finished;
  }
  std::string text = fmt::format("{} of {} completed", completed,
                                 plural(static_cast<int64_t>(section.rows.size()), "variant"));
  if (failed > 0) text += fmt::format(", {} failed", failed);
  if (not_finished > 0) text += fmt::format(", {} not finished", not_finished);
  if (!section.answer.empty()) text += "; " + section.answer;
  return text;
}

namespace {

// The median, and the repeats' range when there are several: "4.2s (4.1s – 4.4s)".
std::string cell(const VariantRow& row, const std::string& key) {
  auto it = row.metrics.find(key);
  const MetricInfo* info = find_metric(key);
  if (it == row.metrics.end() || info == nullptr) return "—";
  auto spread = row.spread.find(key);
  if (spread == row.spread.end()) return format_metric(*info, it->second);
  return fmt::format("{} ({} – {})", format_metric(*info, it->second),
                     format_metric(*info, spread->second.min),
                     format_metric(*info, spread->second.max));
}

std::string row_status(const VariantRow& row) {
  if (row.run_id == 0) return "not run";
  if (row.failure == FailureClass::not_started) return "not started";
  if (row.status == RunStatus::completed || row.failure == FailureClass::none ||
      row.failure == FailureClass::interrupted)
    return to_string(row.status);
  return fmt::format("{} ({})", to_string(row.status), to_string(row.failure));
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Text from YAML or the store as Markdown shows it literally: a '|' would end a table cell, a
// newline the row, '<' and '&' start HTML (which Markdown passes through), '*', '`', '[' and '\\'
// mark up ('_' inside a word, as in train.batch_size, does not).
std::string md(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '\n':
      case '\r':
        out += ' ';
        break;
      case '<':
        out += "&lt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '|':
      case '*':
      case '`':
      case '[':
      case '\\':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string md_join(const std::vector<std::string>& items) {
  std::vector<std::string> escaped;
  for (const auto& item : items) escaped.push_back(md(item));
  return join(escaped, "; ");
}

}  // namespace

std::string render_markdown(const Report& report) {
  std::string out = "# Trainyard report\n\n";
  for (const auto& section : report.experiments) {
    const auto& e = section.experiment;
    out += fmt::format("## {}\n\n",
                       md(section.options.title.empty() ? e.name : section.options.title));
    if (!e.description.empty()) out += md(e.description) + "\n\n";
    if (!section.note.empty()) out += "> " + md(section.note) + "\n\n";
    out += md(summary_line(section)) + "\n\n";
    for (const auto& row : section.rows)
      if (!row.verdict.empty())
        out += fmt::format("- **{}** — {}\n", md(row.variant), md(row.verdict));
    out += "\n| variant | status | n | precision | devices | strategy |";
    std::string rule = "|---|---|---:|---|---:|---|";
    for (const auto& key : section.options.metrics) {
      out += " " + find_metric(key)->label + " |";
      rule += "---:|";
    }
    out += " differs from the baseline in |\n" + rule + "---|\n";
    for (const auto& row : section.rows) {
      out +=
          fmt::format("| {}{} | {} | {}/{} | {} | {} | {} |", md(row.variant),
                      row.variant == section.baseline ? " (baseline)" : "", row_status(row),
                      row.completed, row.planned, md(row.precision), row.devices, md(row.strategy));
      for (const auto& key : section.options.metrics) out += " " + cell(row, key) + " |";
      out += " " + md_join(row.differs) + " |\n";
    }
    out += "\n" + md(kTableLegend) + "\n\n";
    for (const auto& row : section.rows)
      if (!row.error.empty())
        out += fmt::format("- {}: {}\n", md(row.variant), md(first_line(row.error)));
    out += "\n" + studies_markdown(section);
    if (!section.other_runs.empty()) {
      out += "Runs of other configurations (not in the table):\n\n";
      for (const auto& run : section.other_runs) {
        std::string figures;
        if (run.status == RunStatus::completed)
          figures = fmt::format(", {}, {}{}", other_run_figure(run, metric::kTrainSeconds),
                                other_run_quality(run),
                                run.speedup > 0 ? fmt::format(", {:.2f}x", run.speedup) : "");
        out += fmt::format("- {} (run {}, {}{}): {}{}\n", md(run.variant), run.run_id,
                           other_run_status(run), figures,
                           run.differences.empty() ? "the same settings" : md_join(run.differences),
                           run.error.empty() ? "" : " — " + md(first_line(run.error)));
      }
      out += "\n";
    }
  }
  return out;
}

std::string render_answers(const Report& report, size_t width) {
  std::string out;
  auto add = [&](const std::string& text, const std::string& indent, const std::string& hanging) {
    const size_t room = width > hanging.size() + 20 ? width - hanging.size() : 0;
    const auto lines = wrap(text, room);
    for (size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? indent : hanging) + lines[i] + "\n";
  };
  for (const auto& section : report.experiments) {
    add(section.experiment.name + ": " + summary_line(section), "", "    ");
    for (const auto& row : section.rows)  // (a lone baseline's says more than "baseline" only)
      if (!row.verdict.empty() && (section.rows.size() > 1 || row.verdict != "baseline"))
        add(row.variant + " — " + row.verdict, "  ", "      ");
    for (const std::string& line : study_answers(section)) add(line, "  ", "      ");
  }
  return out;
}

std::string render_csv(const Report& report) {
  std::vector<std::string> keys;
  for (const auto& m : metric_vocabulary())
    if (m.scope == MetricScope::final || m.scope == MetricScope::derived) keys.push_back(m.key);
  // Each figure is the median over the variant's completed repeats, with its min and max; a
  // speedup is its claim's estimate with its 95% interval (_low, _high).
  std::string out =
      "experiment,variant,run_id,status,failure_class,n,repeats,precision,devices,strategy,"
      "device,torch_version";
  for (const auto& key : keys)
    out += "," + key + "," + key + (is_speedup(key) ? "_low," : "_min,") + key +
           (is_speedup(key) ? "_high" : "_max");
  out += ",verdict\n";
  for (const auto& section : report.experiments) {
    for (const auto& row : section.rows) {
      out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{}", csv_field(section.experiment.name),
          csv_field(row.variant), row.run_id, row.run_id == 0 ? "not run" : to_string(row.status),
          to_string(row.failure), row.completed, row.planned, csv_field(row.precision), row.devices,
          csv_field(row.strategy), csv_field(row.device_name), csv_field(row.torch_version));
      for (const auto& key : keys) {
        auto it = row.metrics.find(key);
        if (it == row.metrics.end()) {
          out += ",,,";
          continue;
        }
        auto spread = row.spread.find(key);
        const Spread range =
            spread == row.spread.end() ? Spread{it->second, it->second} : spread->second;
        out += fmt::format(",{},{},{}", it->second, range.min, range.max);
      }
      out += "," + csv_field(row.verdict) + "\n";
    }
  }
  return out;
}

}  // namespace trainyard
