// `trainyard export`: the store's runs written where users already look — TensorBoard's event
// files (reports/tensorboard.h) and Lightning's CSV layout (reports/lightning_csv.h). Views of the
// database, written from its records: export again and each run's folder is rewritten the same.
#include <filesystem>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "common/text.h"
#include "reports/lightning_csv.h"
#include "reports/tensorboard.h"
#include "runner/cli/commands.h"
#include "runner/cli/options.h"
#include "trainyard/error.h"

namespace trainyard {

namespace po = boost::program_options;
namespace fs = std::filesystem;

int export_command(const std::vector<std::string>& args) {
  po::options_description options = command_options(
      "trainyard export (--tensorboard DIR | --csv DIR) [--experiment NAME] [--db PATH]\n  writes "
      "the database's runs as TensorBoard event files or in Lightning's CSV layout");
  std::string db_path, experiment, tensorboard, csv, mlflow;
  add_database_option(options, db_path);
  add_experiment_option(options, experiment, "only this experiment's runs");
  options.add_options()("tensorboard", po::value(&tensorboard),
                        "one folder of event files per run under DIR (tensorboard --logdir DIR)")(
      "csv", po::value(&csv), "DIR/<experiment>/version_<run id>/metrics.csv and hparams.yaml")(
      "mlflow", po::value(&mlflow), "an MLflow tracking server (not built yet)");
  po::variables_map vm;
  if (!parse_command_line(args, options, {}, vm)) return kExitOk;
  if (!mlflow.empty())
    throw UserError(
        "export: --mlflow is not built yet; export --tensorboard DIR or --csv DIR "
        "(docs/trackers.md)");
  if (tensorboard.empty() && csv.empty())
    throw UserError("export: say where: --tensorboard DIR or --csv DIR");
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
  return kExitOk;
}

}  // namespace trainyard
