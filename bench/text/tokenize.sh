#!/usr/bin/env bash
# How fast `trainyard tokenize` turns text into token files, against the tokenizers library (the
# reference its ids are held to) on the same documents and tokenizer. The text: the Python files of
# this machine's standard library (code and English docstrings, real and varied), one document a
# file, as a .jsonl of up to MEGABYTES (default 32); the tokenizer: a byte-level BPE of GPT-2's size
# (50257 tokens) the library trains on that text. Rounds alternate (drift falls on all alike):
#   trainyard tokenize --threads 1 and --threads 2, the whole command (reading, writing the file);
#   the library's encode_batch (its thread pool: every core) and encode one document at a time
#   (one thread), the encoding alone (the documents already in memory).
# Fails unless trainyard's ids equal the library's. Prints a Markdown table: MB/s, medians and
# spreads over ROUNDS (default 5). Needs tokenizers in a venv of its own: $TRAINYARD_HOME/tokenizers
# (made here when missing; PyPI).
# Usage: bench/text/tokenize.sh [ROUNDS] [MEGABYTES]   (after scripts/build.sh; about 3 minutes)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
source scripts/env.sh
build=$(cd "$TRAINYARD_BUILD" && pwd)
rounds=${1:-5}
megabytes=${2:-32}
venv=$TRAINYARD_HOME/tokenizers
if ! "$venv/bin/python" -c "import tokenizers, numpy" 2>/dev/null; then
  echo "tokenize.sh: installing tokenizers into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q tokenizers==0.23.3 numpy
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" - "$work" "$megabytes" <<'PY'
import glob, json, os, sys, sysconfig
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
work, megabytes = sys.argv[1], int(sys.argv[2])
texts, size = [], 0
for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "**", "*.py"), recursive=True)):
    try:
        text = open(path, encoding="utf-8", newline="").read()
    except (UnicodeDecodeError, OSError):
        continue
    if text:
        texts.append(text)
        size += len(text.encode())
    if size >= megabytes << 20:
        break
with open(os.path.join(work, "docs.jsonl"), "w", encoding="utf-8") as f:
    for text in texts:
        f.write(json.dumps({"text": text}) + "\n")
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
trainer = trainers.BpeTrainer(vocab_size=50257, special_tokens=["<|endoftext|>"], show_progress=False,
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tokenizer.train_from_iterator(texts, trainer)
tokenizer.save(os.path.join(work, "tokenizer.json"))
print(f"tokenize.sh: {len(texts)} documents, {size / 2**20:.1f} MiB; tokenizer of {tokenizer.get_vocab_size()} tokens", file=sys.stderr)
PY
cat >"$work/library.py" <<'PY'
import json, sys, time
import numpy as np
from tokenizers import Tokenizer
work, mode = sys.argv[1], sys.argv[2]
tokenizer = Tokenizer.from_file(f"{work}/tokenizer.json")
texts = [json.loads(line)["text"] for line in open(f"{work}/docs.jsonl", encoding="utf-8")]
size = sum(len(t.encode()) for t in texts)
start = time.perf_counter()
if mode == "batch":
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
else:
    encodings = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
seconds = time.perf_counter() - start
print(size / 2**20 / seconds)
if mode == "check":
    eot = tokenizer.token_to_id("<|endoftext|>")
    want = []
    for e in encodings:
        want += [eot] + e.ids
    got = np.fromfile(f"{work}/tokens.bin", dtype=np.uint16, offset=1024)
    if list(got) != want:
        sys.exit(f"tokenize.sh: trainyard's ids differ from the library's ({len(got)} against {len(want)} tokens)")
    print(f"tokenize.sh: trainyard's {len(got)} ids equal the library's", file=sys.stderr)
PY
"$build/trainyard" tokenize --tokenizer "$work/tokenizer.json" "$work/docs.jsonl" -o "$work/tokens.bin" >/dev/null 2>&1
"$venv/bin/python" "$work/library.py" "$work" check >/dev/null
# The documents' own bytes (as the library counts them), over the whole command's time.
text_bytes=$("$venv/bin/python" -c "import json,sys; print(sum(len(json.loads(l)['text'].encode()) for l in open(sys.argv[1], encoding='utf-8')))" "$work/docs.jsonl")
declare -A rates
for round in $(seq "$rounds"); do
  for threads in 1 2; do
    start=$(date +%s.%N)
    "$build/trainyard" tokenize --tokenizer "$work/tokenizer.json" "$work/docs.jsonl" -o "$work/tokens.bin" --threads "$threads" >/dev/null 2>&1
    end=$(date +%s.%N)
    rates[trainyard-$threads]+="$(python3 -c "print($text_bytes / 2**20 / ($end - $start))") "
  done
  rates[library-batch]+="$("$venv/bin/python" "$work/library.py" "$work" batch) "
  rates[library-one]+="$("$venv/bin/python" "$work/library.py" "$work" one) "
done
python3 - "$rounds" "$(nproc)" "$(git rev-parse --short HEAD)" \
  "trainyard-1=${rates[trainyard-1]}" "trainyard-2=${rates[trainyard-2]}" \
  "library-one=${rates[library-one]}" "library-batch=${rates[library-batch]}" <<'PY'
import statistics, sys
rounds, cores, commit = sys.argv[1:4]
rows = {k: [float(v) for v in vals.split()] for k, vals in (a.split("=", 1) for a in sys.argv[4:])}
labels = {"trainyard-1": "`trainyard tokenize --threads 1` (whole command)",
          "trainyard-2": "`trainyard tokenize --threads 2` (whole command)",
          "library-one": "tokenizers `encode`, one document at a time (one thread)",
          "library-batch": "tokenizers `encode_batch` (its pool, every core)"}
print(f"{rounds} alternated rounds, {cores} cores, commit {commit}\n")
print("| | MiB/s (median) | min–max |\n|---|---|---|")
for key, label in labels.items():
    v = rows[key]
    print(f"| {label} | {statistics.median(v):.2f} | {min(v):.2f}–{max(v):.2f} |")
PY
