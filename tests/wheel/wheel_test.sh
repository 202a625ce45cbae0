#!/usr/bin/env bash
# The wheel as a user installs it (issue 41; docs/setup.md, "From the wheel"): the newest wheel in
# dist/ (scripts/wheel.sh builds it) is installed with pip into a fresh virtual environment by a
# user who is not root, with a clean environment and a working directory outside the checkout;
# that user trains a small experiment from it and writes its report. Then every ELF file the wheel
# installed is checked with ldd: each library resolves inside the wheel, in the torch package
# (torch/, nvidia/) or in the base system (glibc, libstdc++, libgcc_s, libz) — nothing from apt.
# A plugin (examples/plugins/mlp) is built by that user against the SDK the wheel carries, found
# with `python -m trainyard --cmake-prefix-path`, and trained with the pip-installed trainyard.
# Last, `trainyard` in an environment without torch, and in one with another release of torch,
# stops with exit 2, says so and gives the pip line, instead of a loader error; and that other
# release's libraries on LD_LIBRARY_PATH do not replace the torch package's.
#   tests/wheel/wheel_test.sh [WORK_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

wheel=$(ls -t "$root"/dist/trainyard-*.whl 2>/dev/null | head -1 || true)
[ -n "$wheel" ] || fail "no wheel in $root/dist: scripts/wheel.sh builds it (scripts/test.sh does)"
changed=$(cd "$root" && find CMakeLists.txt pyproject.toml python common components config db include reports trackers \
  runner sdk -type f -newer "$wheel" -print -quit)
[ -z "$changed" ] || fail "$changed changed after $wheel was built: run scripts/wheel.sh"

# The user: the one running this when it is not root; else a user made for the test.
if [ "$(id -u)" = 0 ]; then
  user=trainyard-wheel
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
  as_user() { runuser -u "$user" -- env -i HOME="/home/$user" PATH=/usr/local/bin:/usr/bin:/bin \
                LANG=C.UTF-8 "$@"; }
else
  user=$(id -un)
  as_user() { env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"; }
fi
if [ $# -gt 0 ]; then
  work=$1  # kept afterwards, to look at
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/trainyard-wheel.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
cp "$wheel" "$work/"
wheel_file="$work/$(basename "$wheel")"
chown -R "$user" "$work" 2>/dev/null || true

echo "== pip install $(basename "$wheel") into a fresh venv, as $user"
as_user python3 -m venv "$work/venv"
as_user "$work/venv/bin/pip" install -q "$wheel_file"
site=$(as_user "$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
package="$site/trainyard"
[ -x "$package/bin/trainyard-engine" ] || fail "the wheel installed no $package/bin/trainyard-engine"

echo "== a small experiment and its report, from $work/project"
mkdir -p "$work/project"
sed -e 's/train_size: 2048/train_size: 256/' -e 's/test_size: 512/test_size: 128/' \
  -e 's/epochs: 3/epochs: 1/' "$root/experiments/quickstart.yaml" > "$work/project/small.yaml"
chown -R "$user" "$work/project" 2>/dev/null || true
as_user bash -c "cd '$work/project' && . '$work/venv/bin/activate' && \
  trainyard run small.yaml --set runtime.threads=2 && trainyard report -o report.html && \
  trainyard runs" > "$work/project/out.txt" 2>&1 || { cat "$work/project/out.txt"; fail "the run failed"; }
cat "$work/project/out.txt" | tail -8
[ "$(grep -c 'completed' "$work/project/out.txt")" -ge 3 ] || fail "three completed runs expected"
grep -q 'batch-64-adamw-cosine' "$work/project/report.html" || fail "the report names no variant"
[ -f "$work/project/runs/trainyard.db" ] || [ -n "$(ls "$work/project"/*.db 2>/dev/null)" ] ||
  fail "no database in the working directory"

echo "== a plugin built against the SDK pip installed, and trained by the pip-installed trainyard"
# examples/plugins/mlp copied out of the checkout and built as a user who installed with pip would:
# CMake finds the SDK where `python -m trainyard --cmake-prefix-path` says; nothing of the checkout
# is on the include path, and yaml-cpp's headers are the ones the SDK carries (the engine's).
cp -r "$root/examples/plugins/mlp" "$work/plugin"
rm -rf "$work/plugin/build"
chown -R "$user" "$work/plugin" 2>/dev/null || true
as_user bash -c "cd '$work/plugin' && . '$work/venv/bin/activate' && \
  cmake -S . -B build -DCMAKE_PREFIX_PATH=\"\$(python -m trainyard --cmake-prefix-path)\" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON && cmake --build build && \
  trainyard run mlp.yaml && trainyard report -o report.html" \
  > "$work/plugin/out.txt" 2>&1 || { cat "$work/plugin/out.txt"; fail "the plugin did not build or train"; }
tail -4 "$work/plugin/out.txt"
[ "$(as_user "$work/venv/bin/python" -m trainyard --cmake-prefix-path)" = "$package" ] ||
  fail "python -m trainyard --cmake-prefix-path does not print $package"
[ -f "$work/plugin/build/libmlp.so" ] || fail "no build/libmlp.so"
! grep -qF "$root" "$work/plugin/build/compile_commands.json" ||
  fail "the plugin's compile command names the checkout ($root)"
depfile=$(find "$work/plugin/build" -name 'mlp.cpp.o.d' | head -1)
[ -n "$depfile" ] || fail "no dependency file of mlp.cpp to read its headers from"
headers=$(tr ' \\' '\n\n' < "$depfile" | grep -E '/include/(trainyard|yaml-cpp)/.*\.h$' | sort -u)
[ -n "$(grep '/yaml-cpp/' <<<"$headers")" ] || fail "mlp.cpp included no yaml-cpp header (from $depfile)"
outside=$(grep -v "^$package/include/" <<<"$headers" || true)
[ -z "$outside" ] || fail "headers from outside the SDK ($package/include): $outside"
grep -q 'mlp-plugin: 2 completed' "$work/plugin/out.txt" || fail "two completed runs of the plugin expected"
grep -q "$work/plugin/build/libmlp.so (sha256" "$work/plugin/report.html" ||
  fail "the report's run details name no plugin"

echo "== ldd: each library from the wheel, the torch package or the base system"
base='^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|ld-linux-x86-64\.so\.2|lib(c|m|dl|rt|pthread|util|stdc\+\+|gcc_s|z)\.so\.[0-9.]+)$'
checked=0
while IFS= read -r elf; do
  checked=$((checked + 1))
  libraries=$(as_user ldd "$elf") || fail "ldd $elf failed: $libraries"
  from_torch=0
  while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || path=$name
    [ "$path" = "not" ] && fail "$elf: $name not found (ldd: $name $arrow $path $rest)"
    [[ "$path" == /* ]] && path=$(realpath -m "$path")  # .../trainyard/bin/../../torch/lib/x.so
    case "$path" in
      "$site"/torch/*|"$site"/nvidia/*) from_torch=$((from_torch + 1)); continue ;;
      "$package"/*) continue ;;
    esac
    if [[ "$name" =~ $base ]] && [[ "$path" == /lib* || "$path" == /usr/lib* || "$path" == "$name" ]]; then
      continue
    fi
    fail "$elf needs $name from $path: neither the wheel, the torch package nor the base system"
  done <<<"$libraries"
  case "$(basename "$elf")" in  # the two that link LibTorch find it in the torch package
    trainyard-engine|libtrainyard_cuda.so) [ "$from_torch" -gt 0 ] || fail "$elf loads nothing of torch" ;;
  esac
done < <(find "$package" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF' _ {} \; -print)
[ "$checked" -ge 3 ] || fail "only $checked ELF files in $package"
echo "$checked ELF files: every library resolves"

echo "== without torch, and with another torch"
as_user python3 -m venv "$work/bare"
as_user "$work/bare/bin/pip" install -q --no-deps "$wheel_file"
expect_refusal() {  # VENV WHAT...: `trainyard --version` exits 2 and says WHAT and the pip line
  local venv=$1; shift
  set +e; out=$(as_user "$venv/bin/trainyard" --version 2>&1); status=$?; set -e
  echo "$out"
  [ "$status" = 2 ] || fail "exit $status, not 2"
  for what in "$@" "pip install --force-reinstall torch==2.11.0"; do
    grep -qF "$what" <<<"$out" || fail "the message does not say '$what'"
  done
  if grep -qiE 'error while loading|cannot open shared object|Traceback' <<<"$out"; then
    fail "a loader error or a traceback instead of the message"
  fi
}
expect_refusal "$work/bare" "the torch package is not installed"
as_user "$work/bare/bin/pip" install -q --no-deps torch==2.10.0
expect_refusal "$work/bare" "built against torch 2.11.0, but torch 2.10.0"

echo "== another LibTorch on LD_LIBRARY_PATH (a module's, conda's) does not stand in for the torch package"
other_torch=$(as_user "$work/bare/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch/lib
[ -f "$other_torch/libtorch_cpu.so" ] || fail "no libtorch_cpu.so in $other_torch"
as_user bash -c "cd '$work/project' && LD_LIBRARY_PATH='$other_torch' '$work/venv/bin/trainyard' \
  validate small.yaml" || fail "trainyard validate failed with torch 2.10.0 on LD_LIBRARY_PATH"
echo "PASS"
