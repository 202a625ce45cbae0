#!/usr/bin/env bash
# What the plugin tests start from, made as docs/plugins.md tells a user to: the SDK installed from
# BUILD into OUT/sdk, then each example under examples/plugins/ and the broken plugins here built
# as separate CMake projects against it (OUT/<name>/lib<name>.so; scripts/build_examples.sh).
#   tests/plugins/build.sh BUILD OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
TRAINYARD_BAD_PLUGINS=1 exec bash "$root/scripts/build_examples.sh" "$1" "$2"
