// The report's study sections (sweep.search): each variant's trials ranked, the decisions of
// successive halving with their evidence, each trial's curve (ending where it paused), a
// parallel-coordinates chart, and how much the metric moved with each parameter. Read from the
// store's study tables; nothing here decides anything the controller did not record.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/metrics.h"
#include "common/text.h"
#include "reports/charts.h"
#include "reports/report.h"
#include "reports/statistics.h"

namespace trainyard {

namespace {

// Colours from good to bad (viridis, ten steps): a trial's by its rank.
constexpr const char* kRankColors[] = {"#440154", "#482878", "#3e4a89", "#31688e", "#26828e",
                                       "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"};
constexpr const char* kFailedColor = "#aaaaaa";

std::string figure_text(const StudySection& s, double figure) {
  return std::isfinite(figure) ? figure_text(s.study.metric, figure) : "—";
}

double figure_of(const StudyTrial& t) {
  return t.record.figure ? *t.record.figure : std::numeric_limits<double>::quiet_NaN();
}

bool better(const StudySection& s, double a, double b) {
  if (!std::isfinite(a)) return false;
  if (!std::isfinite(b)) return true;
  return s.minimize() ? a < b : a > b;
}

// The trials best first: those that trained further before those paused earlier (a later rung's
// figure is not comparable with an earlier one's), then by figure, ties to the earlier trial.
std::vector<size_t> ranked(const StudySection& s) {
  std::vector<size_t> order(s.trials.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const StudyTrial &x = s.trials[a], &y = s.trials[b];
    if (x.record.epochs != y.record.epochs) return x.record.epochs > y.record.epochs;
    return better(s, figure_of(x), figure_of(y));
  });
  return order;
}

// A trial's figure at the first rung: what every trial has, so what the parameters are judged by.
double first_rung_figure(const StudySection& s, const StudyTrial& t) {
  const int64_t epochs = s.decisions.empty() ? t.record.epochs : s.decisions.front().epochs;
  for (const auto& [epoch, figure] : t.curve)
    if (epoch == epochs) return figure;
  return std::numeric_limits<double>::quiet_NaN();
}

double final_figure(Store& store, int64_t run_id, const std::string& key) {
  const auto finals = store.final_metrics(run_id);
  const auto it = finals.find(key);
  return it == finals.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

// The trials no other beats on both the figure and the cost (distinct configurations: a trial that
// repeats an earlier one's is that one), by cost.
std::vector<size_t> front_of(const StudySection& s) {
  std::vector<std::pair<double, double>> points;
  std::set<std::string> seen;
  for (const StudyTrial& t : s.trials) {
    const double f = figure_of(t);
    const bool first = seen.insert(t.record.config_hash).second;
    points.push_back({first ? (s.minimize() ? f : -f) : NAN, t.cost});
  }
  std::vector<size_t> front = pareto_front(points);
  std::stable_sort(front.begin(), front.end(),
                   [&](size_t a, size_t b) { return points[a].second < points[b].second; });
  return front;
}

// "the Pareto front of val_acc and train_seconds: trial 11 (62.50%, 25 ms), trial 5 (65.62%,
// 46 ms)".
std::string front_text(const StudySection& s) {
  std::vector<std::string> points;
  for (size_t k : s.front) {
    const StudyTrial& t = s.trials[k];
    points.push_back(
        fmt::format("trial {} ({}, {})", t.record.trial, figure_text(s, figure_of(t)),
                    std::isfinite(t.cost) ? format_duration(t.cost) : "never reached the target"));
  }
  return fmt::format("the Pareto front of {} and {} ({} of {} trials): {}",
                     metric_key(s.study.metric), s.study.cost, s.front.size(), s.trials.size(),
                     join(points));
}

// The front drawn: each trial a dot at its cost (x) and figure (y), the front's joined, the
// confirmed trial ringed.
std::string front_chart(const StudySection& s) {
  std::vector<std::pair<double, double>> at;  // (cost, figure) of the drawable trials
  std::vector<size_t> which;
  for (size_t i = 0; i < s.trials.size(); ++i)
    if (std::isfinite(s.trials[i].cost) && std::isfinite(figure_of(s.trials[i]))) {
      at.push_back({s.trials[i].cost, figure_of(s.trials[i])});
      which.push_back(i);
    }
  if (at.size() < 2) return "";
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& [x, y] : at)
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const int left = 70, top = 20, width = 520, height = 260;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * width; };
  // Better up: a loss's axis runs downward.
  auto py = [&](double y) {
    const double f = (y - y0) / (y1 - y0);
    return top + (s.minimize() ? f : 1 - f) * height;
  };
  const std::string title =
      fmt::format("Trials of {} by {} and {}: the Pareto front joined", s.study.key.study,
                  metric_key(s.study.metric), s.study.cost);
  std::string svg = fmt::format(
      R"(<svg class="chart front" xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" )"
      R"(viewBox="0 0 {0} {1}" role="img" aria-label="{2}"><title>{2}</title>)",
      left + width + 40, top + height + 50, html_escape(title));
  std::string line;
  for (size_t k : s.front)
    if (std::isfinite(s.trials[k].cost))
      line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "M" : " L", px(s.trials[k].cost),
                          py(figure_of(s.trials[k])));
  svg += fmt::format(R"(<path d="{}" fill="none" stroke="#1f77b4" stroke-width="2"/>)", line);
  const std::set<size_t> on_front(s.front.begin(), s.front.end());
  for (size_t n = 0; n < at.size(); ++n) {
    const StudyTrial& t = s.trials[which[n]];
    const bool front = on_front.count(which[n]) > 0;
    const bool confirmed = s.outcome && s.outcome->best_trial == t.record.trial;
    svg += fmt::format(
        R"(<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"{}><title>trial {}: {} ({} {}, {} {})</title></circle>)",
        px(at[n].first), py(at[n].second), confirmed ? 7 : 4, front ? "#1f77b4" : "#bbbbbb",
        confirmed ? R"( stroke="#d62728" stroke-width="3")" : "", t.record.trial,
        html_escape(t.record.settings), html_escape(metric_key(s.study.metric)),
        html_escape(figure_text(s, at[n].second)), html_escape(s.study.cost),
        html_escape(format_duration(at[n].first)));
  }
  // The figure's ends beside its axis, the better at the top.
  for (const double y : {y0, y1})
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" text-anchor="end" font-size="10">{}</text>)",
                       left - 6, py(y) + 4, html_escape(figure_text(s, y)));
  svg += fmt::format(
      R"(<text x="{}" y="{}" text-anchor="middle" font-size="12">{} (from {} to {})</text>)"
      R"svg(<text x="14" y="{}" font-size="12" transform="rotate(-90 14 {})" text-anchor="middle">{}</text></svg>)svg",
      left + width / 2, top + height + 35, html_escape(s.study.cost),
      html_escape(format_duration(x0)), html_escape(format_duration(x1)), top + height / 2,
      top + height / 2, html_escape(metric_key(s.study.metric)));
  return svg;
}

std::string value_text(const CurrentStudy::Parameter& p, double value) {
  if (!p.choices.empty()) return p.choices.at(static_cast<size_t>(value));
  return fmt::format("{:.3g}", value);
}

std::vector<ParameterEffect> effects_of(const StudySection& s) {
  std::vector<ParameterEffect> effects;
  for (size_t i = 0; i < s.study.parameters.size(); ++i) {
    const CurrentStudy::Parameter& p = s.study.parameters[i];
    const std::string name = split(p.key, '.').back();
    // Groups: each choice; a range in thirds (of its log for a log-uniform one).
    std::map<size_t, std::pair<double, int>> sums;  // group -> (sum, count)
    std::vector<std::string> labels;
    if (!p.choices.empty()) {
      for (const auto& c : p.choices) labels.push_back(name + "=" + c);
    } else {
      for (int k = 0; k < 3; ++k) {
        auto edge = [&](int e) {
          const double f = e / 3.0;
          return p.log_scale ? std::exp(std::log(p.low) + f * (std::log(p.high) - std::log(p.low)))
                             : p.low + f * (p.high - p.low);
        };
        labels.push_back(fmt::format("{} {:.3g}–{:.3g}", name, edge(k), edge(k + 1)));
      }
    }
    for (const StudyTrial& t : s.trials) {
      const double figure = first_rung_figure(s, t);
      // (A branch's parameter has no value where another branch was chosen.)
      if (!std::isfinite(figure) || i >= t.values.size() || std::isnan(t.values[i])) continue;
      size_t group = 0;
      if (!p.choices.empty()) {
        group = static_cast<size_t>(t.values[i]);
      } else {
        const double f = p.log_scale ? (std::log(t.values[i]) - std::log(p.low)) /
                                           (std::log(p.high) - std::log(p.low))
                                     : (t.values[i] - p.low) / (p.high - p.low);
        group = static_cast<size_t>(std::clamp(static_cast<int>(f * 3), 0, 2));
      }
      sums[group].first += figure;
      ++sums[group].second;
    }
    if (sums.size() < 2) continue;  // one group: nothing to compare
    ParameterEffect effect{.parameter = p.key};
    bool first = true;
    for (const auto& [group, sum] : sums) {
      const double mean = sum.first / sum.second;
      if (first || better(s, mean, effect.best_mean))
        effect.best_mean = mean, effect.best_group = labels.at(group);
      if (first || better(s, effect.worst_mean, mean))
        effect.worst_mean = mean, effect.worst_group = labels.at(group);
      first = false;
    }
    effects.push_back(effect);
  }
  std::stable_sort(effects.begin(), effects.end(), [](const auto& a, const auto& b) {
    return std::abs(a.best_mean - a.worst_mean) > std::abs(b.best_mean - b.worst_mean);
  });
  return effects;
}

// One line per trial across one axis per parameter and a last one for the figure, coloured by
// the trial's rank (failed trials grey, at the bottom of the figure's axis).
std::string parallel_coordinates(const StudySection& s) {
  const auto& params = s.study.parameters;
  const size_t axes = params.size() + 1;
  const int left = 60, top = 34, height = 220, spacing = 150;
  const int width = left * 2 + spacing * static_cast<int>(axes - 1);
  double f0 = INFINITY, f1 = -INFINITY;
  for (const StudyTrial& t : s.trials)
    if (const double f = first_rung_figure(s, t); std::isfinite(f))
      f0 = std::min(f0, f), f1 = std::max(f1, f);
  if (!std::isfinite(f0)) return "";
  if (f1 == f0) f1 = f0 + 1;
  auto y_of = [&](double fraction) { return top + height * (1 - fraction); };
  auto fraction = [&](size_t axis, double value) {
    if (axis == params.size()) {  // the figure: better up
      const double f = (value - f0) / (f1 - f0);
      return s.minimize() ? 1 - f : f;
    }
    const auto& p = params[axis];
    if (!p.choices.empty())
      return p.choices.size() == 1 ? 0.5 : value / static_cast<double>(p.choices.size() - 1);
    if (p.log_scale)
      return (std::log(value) - std::log(p.low)) / (std::log(p.high) - std::log(p.low));
    return (value - p.low) / (p.high - p.low);
  };
  const std::string title = fmt::format("Trials of {} by {} (first rung), one line each",
                                        s.study.key.study, metric_key(s.study.metric));
  std::string svg = fmt::format(
      R"(<svg class="chart parallel" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" )"
      R"(viewBox="0 0 {} {}" role="img" aria-label="{}"><title>{}</title>)",
      width, top + height + 40, width, top + height + 40, html_escape(title), html_escape(title));
  const std::vector<size_t> order = ranked(s);
  std::vector<size_t> rank_of(s.trials.size());
  for (size_t r = 0; r < order.size(); ++r) rank_of[order[r]] = r;
  // Worst first, so the best lines are drawn on top.
  for (size_t r = order.size(); r-- > 0;) {
    const StudyTrial& t = s.trials[order[r]];
    const double figure = first_rung_figure(s, t);
    std::string path;
    bool gap = true;  // the line breaks at a branch's parameter the trial has no value for
    for (size_t a = 0; a < axes; ++a) {
      double f = 0;
      if (a < params.size())
        f = a < t.values.size() ? fraction(a, t.values[a]) : 0;
      else
        f = std::isfinite(figure) ? fraction(a, figure) : 0;
      if (std::isnan(f)) {
        gap = true;
        continue;
      }
      path += fmt::format("{}{},{:.1f}", gap ? (path.empty() ? "M" : " M") : " L",
                          left + spacing * static_cast<int>(a), y_of(std::clamp(f, 0.0, 1.0)));
      gap = false;
    }
    const char* color = std::isfinite(figure)
                            ? kRankColors[std::min<size_t>(
                                  9, rank_of[order[r]] * 10 / std::max<size_t>(1, order.size()))]
                            : kFailedColor;
    svg += fmt::format(
        R"(<path d="{}" fill="none" stroke="{}" stroke-width="1.5" opacity="0.8"{}><title>trial {}: {} ({} {})</title></path>)",
        path, color, std::isfinite(figure) ? "" : R"( stroke-dasharray="4 3")", t.record.trial,
        html_escape(t.record.settings), html_escape(metric_key(s.study.metric)),
        html_escape(figure_text(s, figure)));
  }
  for (size_t a = 0; a < axes; ++a) {
    const int x = left + spacing * static_cast<int>(a);
    std::string name, top_label, bottom_label;
    if (a < params.size()) {
      const auto& p = params[a];
      name = split(p.key, '.').back() + (p.log_scale ? " (log)" : "");
      top_label = p.choices.empty() ? value_text(p, p.high) : p.choices.back();
      bottom_label = p.choices.empty() ? value_text(p, p.low) : p.choices.front();
    } else {
      name = metric_key(s.study.metric);
      top_label = figure_text(s, s.minimize() ? f0 : f1);
      bottom_label = figure_text(s, s.minimize() ? f1 : f0);
    }
    svg += fmt::format(
        R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333"/>)"
        R"(<text x="{0}" y="{3}" text-anchor="middle" font-size="12">{4}</text>)"
        R"(<text x="{5}" y="{6}" font-size="10">{7}</text><text x="{5}" y="{8}" font-size="10">{9}</text>)",
        x, top, top + height, top - 14, html_escape(name), x + 4, top + 4, html_escape(top_label),
        top + height, html_escape(bottom_label));
  }
  return svg + "</svg>";
}

std::string trial_curves(const StudySection& s) {
  const std::vector<size_t> order = ranked(s);
  std::vector<Series> series;
  const size_t shown = std::min<size_t>(order.size(), 20);  // the best 20: a legend stays legible
  for (size_t r = 0; r < shown; ++r) {
    const StudyTrial& t = s.trials[order[r]];
    Series line{
        .label = fmt::format("trial {}{}: {}", t.record.trial,
                             t.paused ? fmt::format(" (paused at epoch {})", t.record.epochs) : "",
                             t.record.settings),
        .color = kRankColors[std::min<size_t>(9, r * 10 / std::max<size_t>(1, order.size()))]};
    for (const auto& [epoch, figure] : t.curve)
      line.points.emplace_back(static_cast<double>(epoch),
                               charted(metric_key(s.study.metric), figure));
    series.push_back(std::move(line));
  }
  const std::string title = fmt::format(
      "{} of each trial by epoch{}", metric_key(s.study.metric),
      shown < order.size() ? fmt::format(" (the best {} of {})", shown, order.size()) : "");
  return line_chart(title, "epoch", axis_title(metric_key(s.study.metric)), series);
}

// The trial's figure with the epoch it is of, when that is not its run's last: "61.70% (epoch 8's
// weights, which its run tested)".
std::string trial_figure_text(const StudySection& s, const StudyTrial& t) {
  const std::string figure = figure_text(s, figure_of(t));
  if (!t.kept_epoch || !t.record.figure) return figure;
  return fmt::format("{} (epoch {}'s weights, which its run tested)", figure, *t.kept_epoch);
}

const StudyTrial* best_trial(const StudySection& s) {
  if (!s.outcome) return nullptr;
  for (const StudyTrial& t : s.trials)
    if (t.record.trial == s.outcome->best_trial) return &t;
  return nullptr;
}

// "12 trials proposed, 9 distinct configurations trained" when trials resolved alike; "".
std::string collapse_text(const StudySection& s) {
  if (s.distinct_configs == 0 || s.distinct_configs >= s.trials.size()) return "";
  return fmt::format(
      "{} trained of {} trials proposed (trials that resolve to one config are "
      "one run; they count toward trials)",
      plural(static_cast<int64_t>(s.distinct_configs), "distinct configuration"), s.trials.size());
}

// The best settings on fresh seeds against the study's figure for them: "on fresh seeds (3 runs):
// val_acc 61.20% (59.00%–63.00%), -18.10 pt from the study's 79.30% (the winner's curse)"; "" when
// none completed.
std::string confirmation_text(const StudySection& s) {
  const std::vector<double> figures = s.confirmed_figures();
  if (figures.empty() || !s.outcome || !s.outcome->figure) return "";
  const double middle = median(figures);
  const auto [low, high] = std::minmax_element(figures.begin(), figures.end());
  const double study = *s.outcome->figure;
  const std::string range =
      figures.size() > 1
          ? fmt::format(" (median; {}–{})", figure_text(s, *low), figure_text(s, *high))
          : "";
  const std::string change = s.minimize() ? fmt::format("{:+.4f}", middle - study)
                                          : fmt::format("{:+.2f} pt", 100 * (middle - study));
  const bool worse = s.minimize() ? middle > study : middle < study;
  return fmt::format("on fresh seeds ({}): {} {}{}, {} from the study's {}{}",
                     plural(static_cast<int64_t>(figures.size()), "run"),
                     metric_key(s.study.metric), figure_text(s, middle), range, change,
                     figure_text(s, study),
                     worse ? " (the winner's curse: the search's best draw was lucky too)" : "");
}

// "rung 0 (epoch 1): 0: 1.02, 1: 0.98, 2: 1.10 → trial 1 went on" (successive halving: a rung's
// cohort; asha: one trial, from the rung as it stood); "trial 6 at epoch 2: its best 0.91; the
// completed trials' 0: 0.88, 1: 0.95 (median 0.915) → went on" (median: the evidence's last entry
// is the judged trial's best so far).
std::string decision_text(const StudySection& s, const StudyDecisionRow& d) {
  std::vector<std::string> figures;
  std::vector<double> numbers;
  for (const auto& item : nlohmann::json::parse(d.evidence)) {
    const double f = item[1].is_null() ? NAN : item[1].get<double>();
    figures.push_back(fmt::format("{}: {}", item[0].get<int64_t>(), figure_text(s, f)));
    numbers.push_back(f);
  }
  std::vector<std::string> promoted;
  for (const auto& t : nlohmann::json::parse(d.promoted))
    promoted.push_back(std::to_string(t.get<int64_t>()));
  if (s.study.schedule == "median" && d.trial && !numbers.empty()) {
    const double own = numbers.back();
    figures.pop_back();
    numbers.pop_back();
    std::erase_if(numbers, [](double f) { return !std::isfinite(f); });
    return fmt::format(
        "trial {} at epoch {}: its best {}; the completed trials' {} (median {}) → {}", *d.trial,
        d.epochs, figure_text(s, own), join(figures),
        figure_text(s, numbers.empty() ? NAN : median(numbers)),
        promoted.empty() ? "paused" : "went on");
  }
  return fmt::format("rung {} (epoch {}): {} → trial{} {} went on", d.rung, d.epochs, join(figures),
                     promoted.size() == 1 ? "" : "s", join(promoted));
}

// A study that ended with every trial of its last rung failed or diverged (with a schedule, the
// trials it paused earlier may have figures: they are not candidates).
std::string ended_without_best(const StudySection& s) {
  return fmt::format(
      "study {}: ended with no best settings: {} reached a {} (each failed or diverged), so "
      "nothing was confirmed; the trials' logs say why",
      s.study.key.study,
      s.study.schedule == "none"
          ? fmt::format("none of its {}", plural(static_cast<int64_t>(s.trials.size()), "trial"))
          : "no trial at its last rung",
      metric_key(s.study.metric));
}

}  // namespace

double figure_at(Store& store, int64_t run_id, int64_t epoch, const std::string& metric) {
  for (const EpochRow& row : store.epoch_metrics(run_id))
    if (row.epoch == epoch) {
      const auto it = row.values.find(metric);
      if (it != row.values.end()) return it->second;
    }
  return std::numeric_limits<double>::quiet_NaN();
}

std::optional<int64_t> kept_epoch(Store& store, int64_t run_id) {
  const auto finals = store.final_metrics(run_id);
  const auto it = finals.find(metric::kBestEpoch);
  if (it == finals.end() || !std::isfinite(it->second)) return std::nullopt;
  return std::llround(it->second);
}

double kept_figure(Store& store, int64_t run_id, const std::string& metric) {
  if (const auto kept = kept_epoch(store, run_id)) return figure_at(store, run_id, *kept, metric);
  int64_t last = 0;
  for (const EpochRow& row : store.epoch_metrics(run_id)) last = std::max(last, row.epoch);
  return figure_at(store, run_id, last, metric);
}

void read_studies(Store& store, const std::vector<RunRecord>& runs,
                  const std::vector<CurrentStudy>& studies, ExperimentReport& section) {
  std::map<int64_t, const RunRecord*> by_id;
  for (const RunRecord& r : runs) by_id[r.id] = &r;
  std::set<std::string> trial_configs;
  for (const CurrentStudy& study : studies) {
    StudySection s{.study = study,
                   .trials = {},
                   .decisions = store.study_decisions(study.key),
                   .outcome = store.study_outcome(study.key)};
    for (const StudyTrialRow& row : store.study_trials(study.key)) {
      StudyTrial t{.record = row};
      for (const auto& v : nlohmann::json::parse(row.values))  // null: another branch's
        t.values.push_back(v.is_null() ? std::numeric_limits<double>::quiet_NaN()
                                       : v.get<double>());
      trial_configs.insert(row.config_hash);
      if (auto it = by_id.find(row.run_id); it != by_id.end()) {
        t.status = it->second->status;
        t.paused = is_paused(*it->second);
        t.error = it->second->error;
        for (const EpochRow& epoch : store.epoch_metrics(row.run_id))
          if (auto f = epoch.values.find(metric_key(study.metric)); f != epoch.values.end())
            t.curve.emplace_back(epoch.epoch, f->second);
        // The figure is the kept epoch's (a completed trial's last rung) — named when that is not
        // its last epoch. A trial that stopped early before a later rung, or a study recorded
        // before trials stood on their kept epoch, has another epoch's figure: not named.
        const auto kept =
            t.status == RunStatus::completed ? kept_epoch(store, row.run_id) : std::nullopt;
        const auto at_kept = std::find_if(t.curve.begin(), t.curve.end(), [&](const auto& point) {
          return kept && point.first == *kept;
        });
        // (A kept epoch in the curve means the curve is not empty.)
        if (row.figure && at_kept != t.curve.end() && *kept != t.curve.back().first &&
            at_kept->second == *row.figure)
          t.kept_epoch = kept;
        if (study.cost == metric::kTimeToTarget && t.status == RunStatus::completed)
          t.cost = run_time_to_target(store, *it->second, section.options).value_or(INFINITY);
        else if (!study.cost.empty())
          t.cost = final_figure(store, row.run_id, study.cost);
      }
      s.trials.push_back(std::move(t));
    }
    s.effects = effects_of(s);
    if (!study.cost.empty()) s.front = front_of(s);
    std::set<std::string> configs;
    for (const StudyTrial& t : s.trials) configs.insert(t.record.config_hash);
    s.distinct_configs = configs.size();
    // The confirmation runs are the variant's row.
    for (const VariantRow& row : section.rows)
      if (row.variant == study.key.study)
        for (const RepeatRun& run : row.repeats)
          if (run.status == RunStatus::completed)
            s.confirmations.push_back(kept_figure(store, run.run_id, metric_key(study.metric)));
    section.studies.push_back(std::move(s));
  }
  // The trials are the studies'; other_runs lists what the file no longer describes.
  std::set<int64_t> trial_runs;
  for (const RunRecord& r : runs)
    if (trial_configs.count(r.config_hash)) trial_runs.insert(r.id);
  std::erase_if(section.other_runs,
                [&](const OtherRun& run) { return trial_runs.count(run.run_id) > 0; });
}

std::vector<std::string> study_answers(const ExperimentReport& section) {
  std::vector<std::string> lines;
  for (const StudySection& s : section.studies) {
    if (!s.outcome) {
      lines.push_back(
          fmt::format("study {}: {} recorded, no best settings (yet: `trainyard run` "
                      "continues a study that did not end)",
                      s.study.key.study, plural(static_cast<int64_t>(s.trials.size()), "trial")));
      continue;
    }
    if (!s.outcome->best_trial) {
      lines.push_back(ended_without_best(s));
      continue;
    }
    const StudyTrial* best = best_trial(s);
    const std::string collapse = collapse_text(s), confirmed = confirmation_text(s);
    lines.push_back(fmt::format(
        "study {}: best of {} {} trials is trial {} ({} {}): {}; {}{}", s.study.key.study,
        s.trials.size(), s.study.method, *s.outcome->best_trial, metric_key(s.study.metric),
        best ? trial_figure_text(s, *best)
             : figure_text(s, s.outcome->figure ? *s.outcome->figure : NAN),
        s.outcome->settings,
        confirmed.empty()
            ? fmt::format("its settings run {} more time{} on fresh seeds", s.study.confirm_repeats,
                          s.study.confirm_repeats == 1 ? "" : "s")
            : confirmed,
        collapse.empty() ? "" : "; " + collapse));
  }
  return lines;
}

std::string studies_markdown(const ExperimentReport& section) {
  if (section.studies.empty()) return "";
  std::string md = "\n### Studies\n\n";
  for (const std::string& line : study_answers(section)) md += "- " + line + "\n";
  for (const StudySection& s : section.studies) {
    md += fmt::format(
        "\n#### {} ({} trials, {}{})\n\n| rank | trial | settings | epochs | {} |\n"
        "|---:|---:|---|---:|---:|\n",
        s.study.key.study, s.trials.size(), s.study.method,
        s.study.schedule == "none" ? "" : ", " + s.study.schedule, metric_key(s.study.metric));
    const std::vector<size_t> order = ranked(s);
    for (size_t r = 0; r < order.size(); ++r) {
      const StudyTrial& t = s.trials[order[r]];
      md += fmt::format("| {} | {} | {} | {}{} | {} |\n", r + 1, t.record.trial, t.record.settings,
                        t.record.epochs, t.paused ? " (paused)" : "", trial_figure_text(s, t));
    }
    if (!s.front.empty()) md += "\n- " + front_text(s);
    for (const StudyDecisionRow& d : s.decisions) md += "\n- " + decision_text(s, d);
    md += "\n";
  }
  return md;
}

std::string studies_html(const ExperimentReport& section) {
  std::string html;
  for (const StudySection& s : section.studies) {
    html += fmt::format(R"(<div class="study"><h3>Study: {} ({} {} trials, by {})</h3>)",
                        html_escape(s.study.key.study), s.trials.size(),
                        html_escape(s.study.method), html_escape(metric_key(s.study.metric)));
    if (const std::string collapse = collapse_text(s); !collapse.empty())
      html += "<p class=\"note\">" + html_escape(collapse) + ".</p>";
    if (s.outcome && !s.outcome->best_trial) {
      html += "<p class=\"note\">" + html_escape(ended_without_best(s)) + ".</p>";
    } else if (s.outcome) {
      const StudyTrial* best = best_trial(s);
      const std::string confirmed = confirmation_text(s);
      html += fmt::format(
          R"(<p class="summary">Best: trial {} — {} ({} {}). The table above compares the )"
          R"(variants at their best settings, each run {} time{} on fresh seeds{}.</p>)",
          *s.outcome->best_trial, html_escape(s.outcome->settings),
          html_escape(metric_key(s.study.metric)),
          html_escape(best ? trial_figure_text(s, *best)
                           : figure_text(s, s.outcome->figure ? *s.outcome->figure : NAN)),
          s.study.confirm_repeats, s.study.confirm_repeats == 1 ? "" : "s",
          confirmed.empty() ? "" : ": " + html_escape(confirmed));
    } else
      html +=
          R"(<p class="note">The study has no outcome yet: `trainyard run` again continues it.</p>)";
    html += R"(<div class="wide"><table class="study-trials"><thead><tr><th>rank</th>)"
            R"(<th>trial</th><th>settings</th><th>epochs</th><th>)" +
            html_escape(metric_key(s.study.metric)) + "</th><th>state</th></tr></thead><tbody>";
    const std::vector<size_t> order = ranked(s);
    for (size_t r = 0; r < order.size(); ++r) {
      const StudyTrial& t = s.trials[order[r]];
      const bool best = s.outcome && s.outcome->best_trial == t.record.trial;
      std::string state = t.paused ? "paused" : to_string(t.status);
      if (best) state = "best";
      html += fmt::format(
          R"(<tr{}><td>{}</td><td>{}</td><td class="text">{}</td><td>{}</td><td>{}</td><td class="text">{}</td></tr>)",
          best ? R"( class="best")" : "", r + 1, t.record.trial, html_escape(t.record.settings),
          t.record.epochs, html_escape(trial_figure_text(s, t)), html_escape(state));
    }
    html += "</tbody></table></div>";
    if (!s.front.empty()) html += "<p>" + html_escape(front_text(s)) + ".</p>" + front_chart(s);
    if (!s.decisions.empty()) {
      html += "<p>" + html_escape(s.study.schedule) +
              "'s decisions (figures by trial):</p><ul class=\"decisions\">";
      for (const StudyDecisionRow& d : s.decisions)
        html += "<li>" + html_escape(decision_text(s, d)) + "</li>";
      html += "</ul>";
    }
    if (!s.effects.empty()) {
      html += "<p>How much " + html_escape(metric_key(s.study.metric)) +
              " moved with each parameter (mean at the first rung, by group):</p><ul>";
      for (const ParameterEffect& e : s.effects)
        html += "<li>" +
                html_escape(fmt::format("{}: {} at {} to {} at {}", e.parameter,
                                        figure_text(s, e.best_mean), e.best_group,
                                        figure_text(s, e.worst_mean), e.worst_group)) +
                "</li>";
      html += "</ul>";
    }
    html += parallel_coordinates(s) + trial_curves(s) + "</div>";
  }
  return html;
}

}  // namespace trainyard
