#!/usr/bin/env bash
# The README's build on a machine without a CUDA toolkit, as a fresh Debian 12 has none: inside a
# mount namespace that hides /usr/local/cuda*, /usr/local/bin/nvcc and every nvcc on PATH,
# scripts/build.sh configures and builds the product into a scratch build folder with the CUDA
# toolkit of the torch package's NVIDIA packages (cmake/torch_cuda_toolkit.cmake), and the
# trainyard it built trains one tiny experiment. Root only (mount namespaces): exit 77, skipped,
# otherwise.
# The scratch folder sits beside build/ and keeps its view of the toolkit inside it, so its
# compile commands are the checkout build's, relative to each folder: the compiler cache serves
# its objects once the checkout's build has made them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
  echo "skipped: hiding the CUDA toolkit needs root and mount namespaces"
  exit 77
fi
build="$root/build-no-cuda-toolkit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/tiny.yaml" <<'YAML'
name: tiny
model: {name: vit, image_size: 8, patch_size: 4, depth: 1, width: 16, heads: 2, mlp_dim: 32, num_classes: 4}
dataset: {name: synthetic-images, train_size: 64, val_size: 16, test_size: 16, num_classes: 4, image_size: 8}
train: {epochs: 1, batch_size: 16}
runtime: {accelerator: cpu, threads: 1}
YAML
unshare -m bash -s "$root" "$build" "$work" <<'NAMESPACE'
set -euo pipefail
root=$1 build=$2 work=$3
mount --make-rprivate /
for folder in /usr/local/cuda*; do
  [ -d "$folder" ] && mount -t tmpfs -o ro tmpfs "$(readlink -f "$folder")"
done
for nvcc in /usr/local/bin/nvcc $(type -aP nvcc); do
  [ -e "$nvcc" ] && mount --bind /dev/null "$nvcc"
done
if [ -e /usr/local/cuda/include/cuda_runtime.h ] || nvcc --version >/dev/null 2>&1; then
  echo "FAIL: a CUDA toolkit is still visible in the namespace"
  exit 1
fi
echo "== scripts/build.sh into $build, no system CUDA toolkit visible"
TRAINYARD_BUILD="$build" "$root/scripts/build.sh" -DTRAINYARD_TESTS=OFF > "$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"; echo "FAIL: the build without a CUDA toolkit"; exit 1; }
grep "CUDA toolkit" "$work/build.log" || true
grep -q "^CUDA_TOOLKIT_ROOT_DIR:PATH=$build/cuda-toolkit$" "$build/CMakeCache.txt" || {
  echo "FAIL: the build did not configure with the torch package's CUDA toolkit"; exit 1; }
echo "== a run with what it built"
"$build/trainyard" run "$work/tiny.yaml" --db "$work/t.db" > "$work/run.log" 2>&1 || {
  cat "$work/run.log"; echo "FAIL: the run"; exit 1; }
grep -q "tiny: 1 completed" "$work/run.log" || { cat "$work/run.log"; echo "FAIL: not completed"; exit 1; }
echo "ok: built without a CUDA toolkit and trained"
NAMESPACE
