// `trainyard export`: the store's runs written where users already look — TensorBoard's event
// files (trackers/tensorboard.h), Lightning's CSV layout (trackers/lightning_csv.h) and an MLflow
// tracking server (trackers/mlflow.h). Views of the database, written from its records: export
// again and each run's folder is rewritten the same, and MLflow gets only what it lacks.
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/text.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "trackers/lightning_csv.h"
#include "trackers/mlflow.h"
#include "trackers/tensorboard.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// Sends what MLflow lacks; says what could not be sent, which the next export sends.
int export_to_mlflow(Store& store, const MlflowServer& server, const std::string& experiment) {
  MlflowClient client(server);
  MlflowExport sent;
  try {
    sent = export_mlflow(store, client, experiment);
  } catch (const std::exception& e) {  // the server unreachable, or refusing an experiment
    throw UserError(fmt::format(
        "export: {}\nnothing more was sent; the database keeps every run: export again once "
        "the server answers (what was sent is not sent twice)",
        e.what()));
  }
  fmt::print("export: {} to MLflow at {} ({} new; {}, {} sent){}\n", plural(sent.runs, "run"),
             server.uri, sent.created, plural(static_cast<int>(sent.metrics), "metric point"),
             plural(static_cast<int>(sent.params), "param"),
             sent.reports > 0 ? fmt::format("; the report as each run's report.html") : "");
  if (sent.reports_elsewhere)
    fmt::print(
        "export: the report was not sent: this server keeps artifacts where only its clients "
        "write (start `mlflow server` with --serve-artifacts, its default)\n");
  for (const std::string& problem : sent.problems) fmt::print(stderr, "export: {}\n", problem);
  if (!sent.problems.empty()) {
    fmt::print(stderr, "export: {} not sent in full; fix what MLflow says and export again\n",
               plural(static_cast<int>(sent.problems.size()), "run"));
    return kExitFailure;
  }
  fmt::print("next: open {}\n", server.uri);
  return kExitOk;
}

}  // namespace

int export_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard export (--tensorboard DIR | --csv DIR | --mlflow URI) [--experiment NAME] [--db "
      "PATH]\n  writes the database's runs as TensorBoard event files, in Lightning's CSV layout, "
      "or to an MLflow tracking server");
  std::string db_path, experiment, tensorboard, csv, mlflow;
  add_database_option(options, db_path);
  add_experiment_option(options, experiment, "only this experiment's runs");
  options.add_options()("tensorboard", po::value(&tensorboard),
                        "one folder of event files per run under DIR (tensorboard --logdir DIR)")(
      "csv", po::value(&csv), "DIR/<experiment>/version_<run id>/metrics.csv and hparams.yaml")(
      "mlflow", po::value(&mlflow),
      "an MLflow tracking server's address (http://127.0.0.1:5000); MLFLOW_TRACKING_TOKEN or "
      "MLFLOW_TRACKING_USERNAME/PASSWORD sign in");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  if (tensorboard.empty() && csv.empty() && mlflow.empty())
    throw UserError("export: say where: --tensorboard DIR, --csv DIR or --mlflow URI");
  std::optional<MlflowServer> server;
  if (!mlflow.empty()) server = mlflow_server(mlflow);   // a wrong address refused before any work
  const StoreToRead open = open_store_to_read(db_path);  // Slurm runs' records collected first
  Store& store = *open.store;
  if (!experiment.empty()) store.experiment_named(experiment);  // UserError naming the others
  if (!tensorboard.empty()) {
    const int runs = export_tensorboard(store, tensorboard, experiment);
    fmt::print("export: {} as TensorBoard event files under {}\nnext: tensorboard --logdir {}\n",
               plural(runs, "run"), fs::absolute(tensorboard).string(), tensorboard);
  }
  if (!csv.empty()) {
    const int runs = export_lightning_csv(store, csv, experiment);
    fmt::print("export: {} in Lightning's CSV layout under {}\n", plural(runs, "run"),
               fs::absolute(csv).string());
  }
  if (server) return export_to_mlflow(store, *server, experiment);
  return kExitOk;
}

}  // namespace trainyard
