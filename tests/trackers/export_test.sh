#!/usr/bin/env bash
# `trainyard export` read back by the ecosystem's own readers (tests/trackers/check_exports.py:
# TensorBoard's EventAccumulator and hparams protocol buffers, Python's csv): a batch of three
# variants — two that train, with figures at steps, inside epochs and at the end, and one whose data
# is broken, so it fails — exported as TensorBoard event files and in Lightning's CSV layout, then
# every value compared with the database. Exported twice: the second leaves one event file a run.
#   tests/trackers/export_test.sh TRAINYARD_EXE
set -euo pipefail
trainyard=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/env.sh"
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

mkdir -p "$work/broken-cifar"
for name in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin \
            data_batch_5.bin test_batch.bin; do
  head -c 100 /dev/zero > "$work/broken-cifar/$name"
done
cat > "$work/exported.yaml" <<YAML
name: exported
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 32, test_size: 32, num_classes: 4, image_size: 8}
train: {epochs: 2, batch_size: 16, log_every: 2, val_every_steps: 3, seed: 1}
runtime: {accelerator: cpu, threads: 1, data_workers: 0}
sweep:
  variants:
    - {name: fp32}
    - {name: low-lr, set: {train.optimizer.lr: 1.0e-4}}
    - {name: broken, set: {dataset: {name: cifar10, root: $work/broken-cifar}, model.image_size: 32, model.num_classes: 10}}
YAML
set +e
"$trainyard" run "$work/exported.yaml" --db "$work/runs/t.db" > "$work/run.log" 2>&1
status=$?
set -e
if [ "$status" != 1 ]; then  # the broken variant fails; the others complete
  cat "$work/run.log"
  echo "trainyard run exited $status, not 1"
  exit 1
fi
for pass in 1 2; do
  "$trainyard" export --db "$work/runs/t.db" --tensorboard "$work/tensorboard" --csv "$work/csv"
done
"$TRAINYARD_PYTHON" "$root/tests/trackers/check_exports.py" "$work/runs/t.db" "$work/tensorboard" \
  "$work/csv"
