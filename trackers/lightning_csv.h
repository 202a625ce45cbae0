// The store's runs in the layout of Lightning's CSVLogger (`trainyard export --csv DIR`), for
// pandas users and for scripts written against Lightning's logs:
//   DIR/<experiment>/version_<run id>/metrics.csv   a row per logged step, header sorted, "step"
//                                                   and "epoch" (0-based, as Lightning's) columns
//   DIR/<experiment>/version_<run id>/hparams.yaml  the run's resolved configuration
// Rows in step order: the figures recorded at optimizer steps, each epoch's at the step it ended,
// and a completed run's final figures (test, throughput, memory) at its last step. A key recorded
// both at steps and per epoch (train_loss, val_loss) is named as Lightning names a metric logged
// on_step and on_epoch: "<key>_step" and "<key>_epoch".
#pragma once

#include <string>

#include "db/store.h"

namespace trainyard {

// Every run of `experiment` ("" for all) that has started; returns how many were written.
// std::runtime_error naming the file when one cannot be written.
int export_lightning_csv(Store& store, const std::string& dir, const std::string& experiment);

}  // namespace trainyard
