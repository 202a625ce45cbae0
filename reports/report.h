// Reports: what each technique bought. build_report() reads the store into plain rows — one per
// variant of the experiment file as it resolves now, over the newest completed run of each of its
// configurations (one per sweep.repeats seed; its newest run when none completed): the median of
// every figure with its min and max, the speedup over the baseline as a ratio of medians with its
// range, computed here, once — and the renderers turn those rows into HTML, Markdown or CSV. Runs
// of the same experiment with another configuration (a smoke test's --set, an edited file) are
// listed apart, with the keys in which they differ, never in the table.
#pragma once

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/classification.h"
#include "config/differences.h"
#include "db/store.h"
#include "reports/report_options.h"
#include "trainyard/task.h"

namespace trainyard {

// The least and greatest value of a figure over a variant's completed repeats.
struct Spread {
  double min = 0, max = 0;
};

// One run behind a variant's row: where its files are, and its records by step (the curves'
// per-step loss, with repeats a band).
struct RepeatRun {
  int64_t run_id = 0;
  int64_t repeat = 0;  // from 0
  RunStatus status = RunStatus::queued;
  std::string config_path{}, log_path{};
  std::vector<StepRow> steps{};
  std::vector<EpochRow> epochs{};
};

// A run's validations in order, each at the training time it was reached (validation included):
// from its records by step, which hold every validation; a run recorded before them has its
// epochs', at the sum of their epoch times. What time-to-target and the curves against time read.
struct Validation {
  double elapsed = 0;
  std::map<std::string, double> values;
};
std::vector<Validation> validations(const RepeatRun& run);

// A run's records as a repeat of its variant's row reads them (steps, epochs, its files).
RepeatRun repeat_run(Store& store, const RunRecord& run);
// The training time of `run`'s first validation that reached report.target; nullopt when none
// did (or there is no target).
std::optional<double> time_to_target(const RepeatRun& run, const ReportOptions& options);
// A completed run's time to report.target as the verdicts measure it: the training time of its
// first validation that reached the target; nullopt when none did (or there is no target).
std::optional<double> run_time_to_target(Store& store, const RunRecord& run,
                                         const ReportOptions& options);

// A claim about a variant against the baseline, decided once (reports/comparison.cpp): the verdict,
// the table, the bars, Markdown, CSV and the terminal all show this estimate and this interval.
struct Claim {
  // A speedup: the baseline's time over the variant's, as the ratio of their geometric means.
  double estimate = 0;
  double low = 0, high = 0;   // its interval at `level`, when tested
  bool tested = false;        // the test ran: two runs or more on each side
  bool paired = false;        // by round (sweep.order: interleaved), else Welch's
  double level = 0.95;        // 95%, or Bonferroni's share of it with more variants
  bool beyond_noise = false;  // the test rejects "no difference" at 1 - level
  int64_t n = 0, base_n = 0;  // the runs behind it, of the variant and of the baseline
};

// Whether figure `key` is a speedup over the baseline, whose spread is its claim's interval.
bool is_speedup(const std::string& key);

// What the results tables' ranges are, in one sentence under each table.
inline constexpr const char* kTableLegend =
    "Each figure is the median of a variant's completed runs, with their least and greatest; a "
    "speedup is the verdict's estimate (the ratio of geometric means of the times), with its "
    "interval (95% for the family of variants: Bonferroni).";

struct VariantRow {
  std::string variant;
  int64_t run_id = 0;              // the run shown (the first completed repeat); 0: none ran
  std::vector<int64_t> run_ids{};  // every run behind the row, one per repeat that ran
  int64_t planned = 1;             // runs the file asks for (sweep.repeats)
  int64_t completed = 0;           // n: completed runs behind the figures
  RunStatus status = RunStatus::queued;
  std::string precision;
  std::string strategy;
  int64_t devices = 1;
  std::string device_name;
  std::string torch_version;
  std::string ended_at;
  std::string error;
  FailureClass failure = FailureClass::none;  // of the shown run, when it did not complete
  // Final metrics — the median over completed repeats — plus the derived ones (common/metrics.h):
  // "speedup" when it can be computed (its claim's estimate); with report.target,
  // "time_to_target" over the runs that reached it and "target_speedup"; with
  // report.price_per_device_hour, "cost" (and "cost_to_target"); "device_hours".
  std::map<std::string, double> metrics;
  // When completed > 1: each figure's least and greatest over the repeats — but a speedup's, which
  // is its claim's 95% interval.
  std::map<std::string, Spread> spread{};
  // The speedups' claims ("speedup", "target_speedup"): what their figures and spreads are.
  std::map<std::string, Claim> claims{};
  // Each completed repeat's final figures, by key (what the verdict's test reads).
  std::map<std::string, std::vector<double>> samples{};
  // The same figures by the round of the batch each run trained in (its "round" attribute, "<batch>
  // <round>": sweep.order interleaved), for the runs that recorded one: what the paired test
  // compares, round with the same round of the same batch.
  std::map<std::string, std::map<std::string, double>> by_round{};
  // The answer for this variant against the baseline, in one line: "2.90× faster (2.70–3.10×,
  // n=5/5), test accuracy −0.2 pt (within noise), peak memory −41%" (reports/statistics.h's
  // test decides "within noise"); "baseline"; or why there is nothing to compare.
  std::string verdict{};
  std::vector<EpochRow> epochs;      // per epoch, the median over completed repeats
  std::vector<RepeatRun> repeats{};  // every run behind the row, by repeat
  // With report.target: how many of the completed runs reached it (time_to_target's n).
  int64_t target_reached = 0;
  // "did not learn: ..." when a completed run of it was flagged so (its "learning" attribute: test
  // accuracy at chance, or a training loss that did not fall); "" otherwise. Never the answer.
  std::string did_not_learn{};
  // "runtime.precision: bf16-mixed", for each key in which the variant's configuration differs
  // from the baseline's.
  std::vector<std::string> differs{};
  std::string log_path{}, config_path{}, git_revision{}, host{};  // of the shown run
  std::string config_yaml{};  // the variant's configuration (its first repeat's)
  int64_t resumes = 0;        // times its runs continued after an interruption, all repeats
  // What the run recorded of itself: dtypes, loss scaling, CUDA graphs, where it saved weights.
  std::map<std::string, std::string> attributes;
  // A classifier's test split class by class: the confusion matrices its completed runs recorded
  // ("test_confusion"), pooled, and how many runs they are. Empty for a language model and for runs
  // recorded before classes were counted.
  ConfusionMatrix confusion{};
  int64_t confusion_runs = 0;
  // The shown columns (report.metrics) in which this row holds the best value beyond the noise of
  // the repeats (reports/comparison.cpp): what the HTML table marks.
  std::set<std::string> best{};
};

// A run whose configuration is not what the experiment file resolves to now.
struct OtherRun {
  std::string variant;
  int64_t run_id = 0;
  RunStatus status = RunStatus::queued;
  std::string ended_at{};
  // "train.epochs: 1 (the file: 3)", one per differing key; or why the variant is not compared.
  std::vector<std::string> differences{};
  std::map<std::string, double> metrics{};  // its final figures (time, accuracy, ...)
  // Over the run of the baseline variant changed the same way (the same differences from the
  // file: the same smoke test's --set), when there is one: the ratio of their training times.
  double speedup = 0;
  std::string error{};  // why it failed or stopped
  FailureClass failure = FailureClass::none;
};

// A study of sweep.search as the file reads now (the CLI resolves it): where the store keeps it,
// and how to draw its parameters.
struct CurrentStudy {
  StudyKey key;
  std::string method;    // grid, random, tpe
  std::string schedule;  // none, successive-halving, asha, median: how its decisions read
  // A second objective (train_seconds, time_to_target): the trials form a Pareto front. "": none.
  std::string cost{};
  WatchedMetric metric = WatchedMetric::val_loss;  // what its trials were decided by
  int64_t confirm_repeats = 0;
  struct Parameter {
    std::string key;                     // "train.optimizer.lr"
    bool log_scale = false;              // log_uniform: drawn and grouped on a log scale
    double low = 0, high = 0;            // its range (a choice: 0 to its count - 1)
    std::vector<std::string> choices{};  // a choice's values as written, else empty
  };
  std::vector<Parameter> parameters{};
};

// One trial as the store has it: its record, its values, its figure at every validated epoch
// (its curve), and its run's state (paused at a rung, failed, completed).
struct StudyTrial {
  StudyTrialRow record{};
  std::vector<double> values{};
  std::vector<std::pair<int64_t, double>> curve{};
  RunStatus status = RunStatus::queued;
  bool paused = false;
  std::string error{};
  // Of a completed trial whose figure is that of the epoch its run kept and tested, when that is
  // not its last epoch (read_studies): what the figure is named by.
  std::optional<int64_t> kept_epoch{};
  // The second objective of a study with two (as the study measured it: time_to_target infinite
  // when never reached); NaN otherwise or when its run did not complete.
  double cost = std::numeric_limits<double>::quiet_NaN();
};

// How much the metric moved with one parameter: its trials in groups (each choice; a range in
// thirds), each group's mean figure at the first rung, and the spread between the best and worst.
struct ParameterEffect {
  std::string parameter{};
  std::string best_group{}, worst_group{};  // "lr 1e-05–0.0002", "weight_decay=0.1"
  double best_mean = 0, worst_mean = 0;
};

struct StudySection {
  CurrentStudy study;
  std::vector<StudyTrial> trials;  // by trial
  std::vector<StudyDecisionRow> decisions;
  std::optional<StudyOutcomeRow> outcome{};
  std::vector<ParameterEffect> effects{};
  // The best settings' confirmation runs (the variant's completed runs), each one's figure of the
  // study's metric as its row states it (kept_figure): what the study's figure becomes on fresh
  // seeds (the winner's curse, measured).
  std::vector<double> confirmations{};
  // The distinct configurations the trials resolved to (two trials may draw the same settings,
  // or settings that resolve alike): what was trained, of trials.size() proposed.
  size_t distinct_configs = 0;
  // A study with two objectives: the trials on the Pareto front of figure and cost (their places
  // in `trials`, by cost).
  std::vector<size_t> front{};
  bool minimize() const { return lower_is_better(study.metric); }
  // The confirmations that have a figure (a diverged run's is NaN).
  std::vector<double> confirmed_figures() const {
    std::vector<double> figures;
    for (double f : confirmations)
      if (std::isfinite(f)) figures.push_back(f);
    return figures;
  }
};

// Text a language-model variant wrote (`trainyard sample` from a document's start): the report
// command fills these, which needs the engine.
struct VariantSample {
  std::string variant;
  int64_t run_id = 0;
  std::vector<std::string> texts{};
};

struct ExperimentReport {
  ExperimentRecord experiment;
  ReportOptions options;
  std::string baseline;  // the variant speedups are relative to
  std::vector<VariantRow> rows;
  std::vector<OtherRun> other_runs{};  // newest run of each other configuration, oldest first
  // What its runs' models are trained for (the task they recorded; for runs recorded before it,
  // what their figures show: a test perplexity without accuracy is a causal language model's). Its
  // traits give the table's default quality column, the Pareto chart's quality axis and the
  // curves; a language model's throughput counts tokens.
  Task task = Task::classification;
  // The experiment's answer in one line, from the verdicts: the fastest variant beyond noise, or
  // that none is, or that the spread is unknown (fewer than two runs a variant).
  std::string answer{};
  // Set when the experiment file could not be read now: the rows are then each variant's newest
  // runs, whatever their configuration, and this says why.
  std::string note{};
  // sweep.search: each variant's study (its rows above are its best settings' confirmation runs;
  // its trials are here, not among other_runs).
  std::vector<StudySection> studies{};
  // A language model's samples, a variant's first run that kept its weights; the note says why a
  // variant has none (no saved weights, no dataset.tokenizer).
  std::vector<VariantSample> samples{};
  std::vector<std::string> sample_notes{};
};

// What an experiment file says now: its variants in order, each with the config it resolves to
// (RunSpec::config_yaml and config_hash). Reading the file is the caller's job (the CLI's).
struct CurrentVariant {
  std::string variant;
  std::string config_hash;
  std::string config_yaml;
  int64_t repeat = 0;                // sweep.repeats: which of the variant's runs
  std::string legacy_config_hash{};  // runs recorded before fingerprints carry this one
};
struct CurrentExperiment {
  std::vector<CurrentVariant> variants{};
  // The file's `report:` section as it reads now (with --set report.*): what the report follows,
  // so that a baseline or target changed in the morning re-renders without running again. None:
  // the settings recorded when the experiment last ran.
  std::optional<ReportOptions> report{};
  std::string problem{};  // why the file could not be read ("no such file ..."), else ""
  // The components' option defaults (the registry's), which "differs from the baseline in" marks
  // under a swapped component ("adamw's default"); none known: none is marked.
  OptionDefault option_default{};
  std::vector<CurrentStudy> studies{};  // sweep.search, one per variant
};
using CurrentExperiments = std::function<CurrentExperiment(const ExperimentRecord&)>;

struct Report {
  std::string generated_at;
  std::vector<ExperimentReport> experiments;
  // Where the report is written: run logs and configs are linked relative to it. Empty: absolute.
  std::string output_dir{};
};

// All experiments, or only `experiment` (UserError when the store has no such experiment).
// `current` says what each experiment's file resolves to now; without it (or when it reports a
// problem) the rows are each variant's newest runs, with a note saying so.
Report build_report(Store& store, const std::string& experiment = "",
                    const CurrentExperiments& current = {});

// A run of another configuration: its status with its failure class ("failed (out-of-memory)"),
// and one of its figures formatted ("—" when it has none).
std::string other_run_status(const OtherRun& run);
std::string other_run_figure(const OtherRun& run, const std::string& key);
// Its test figure under its task: "test accuracy 95.4%", or a language model's "test perplexity
// 6.061"; `name` false leaves the words out ("95.4%", "ppl 6.061").
std::string other_run_quality(const OtherRun& run, bool name = true);

std::string render_html(const Report& report);
// "3 of 4 variants completed, 1 failed; fastest beyond noise: bf16-mixed, 2.90× faster than fp32".
std::string summary_line(const ExperimentReport& section);
std::string render_markdown(const Report& report);
// The answer in plain text, for a terminal: each experiment's summary line and each variant's
// verdict (a lone variant's when it says more than "baseline") — lines of at most `width`
// characters (0: unwrapped), a verdict's continuation indented under it.
std::string render_answers(const Report& report, size_t width);
std::string render_csv(const Report& report);

// &, <, >, " and ' as entities: every string that came from YAML or the store passes through it.
std::string html_escape(const std::string& text);

// The study sections (reports/study.cpp): read from the store for each current study, the trial
// runs taken out of `section.other_runs`; and rendered.
void read_studies(Store& store, const std::vector<RunRecord>& runs,
                  const std::vector<CurrentStudy>& studies, ExperimentReport& section);
std::string studies_html(const ExperimentReport& section);
std::string studies_markdown(const ExperimentReport& section);
// "study fp32: best of 24 tpe trials: lr=0.0003 (val_loss 0.4123)", one line a study.
std::vector<std::string> study_answers(const ExperimentReport& section);

// A run's validation `metric` at `epoch`; NaN when the run has none there (it failed before, or
// never ran, or the figure diverged).
double figure_at(Store& store, int64_t run_id, int64_t epoch, const std::string& metric);
// The epoch whose weights a completed run kept and tested (train.checkpoint: best's epoch, or its
// last), as it recorded it (best_epoch); nullopt when it recorded none.
std::optional<int64_t> kept_epoch(Store& store, int64_t run_id);
// The figure a completed run stands on, as its own row states it: `metric` at its kept epoch, else
// at its last; NaN when it has none. One figure per run for a study's trials and confirmations.
double kept_figure(Store& store, int64_t run_id, const std::string& metric);

}  // namespace trainyard
