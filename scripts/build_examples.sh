#!/usr/bin/env bash
# Builds the example plugins as a user builds a plugin: the SDK installed from BUILD into OUT/sdk,
# then each folder of examples/plugins/ as a CMake project of its own against it, into
# OUT/<name>/lib<name>.so (docs/plugins.md).
#   scripts/build_examples.sh [BUILD [OUT]]    defaults: $TRAINYARD_BUILD, BUILD/examples
# experiments/resnet_cifar10.yaml names build/examples/resnet/libresnet.so.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/env.sh"
build=$(cd "${1:-$root/$TRAINYARD_BUILD}" && pwd)
out=$(mkdir -p "${2:-$build/examples}" && cd "${2:-$build/examples}" && pwd)  # both absolute
cd "$root"
rm -rf "$out/sdk"
cmake --install "$build" --prefix "$out/sdk" >/dev/null
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
# configure_and_build SOURCE NAME: its log in OUT/NAME.log, shown when it fails.
configure_and_build() {
  cmake -S "$1" -B "$out/$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$out/sdk" \
    "${launcher[@]}" >"$out/$2.log" 2>&1 || { cat "$out/$2.log"; exit 1; }
  cmake --build "$out/$2" -j"${TRAINYARD_JOBS:-2}" >>"$out/$2.log" 2>&1 || { cat "$out/$2.log"; exit 1; }
}
for example in examples/plugins/*/; do
  configure_and_build "$example" "$(basename "$example")"
done
# The broken plugins of the tests, when asked (tests/plugins/build.sh).
if [ "${TRAINYARD_BAD_PLUGINS:-0}" = 1 ]; then configure_and_build tests/plugins bad; fi
echo "examples: $(ls "$out"/*/lib*.so | tr '\n' ' ')"
