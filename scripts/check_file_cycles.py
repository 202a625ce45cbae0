#!/usr/bin/env python3
"""Fails when two product source files depend on each other.

A file depends on another when its object file uses a symbol the other's defines (the linker's
view: `nm`, so a function, a method or a global, whatever header declares it). Two files that
use each other's names are one unit split in two: a class grown by files instead of
collaborators. Inline functions and templates (weak symbols, defined wherever they are used)
are the headers', not a file's, and do not count.

Usage: check_file_cycles.py BUILD_DIR   (run by CTest as test "file_cycles", after the build)
"""
import collections
import os
import subprocess
import sys

# The product's objects: the core, the engine's LibTorch half, and the two executables' own files.
TARGETS = ("trainyard_core", "trainyard_torch", "trainyard", "trainyard-engine")


def objects(build):
    for target in TARGETS:
        top = os.path.join(build, "CMakeFiles", target + ".dir")
        for folder, _, files in os.walk(top):
            for name in files:
                if name.endswith(".o"):
                    path = os.path.join(folder, name)
                    # the source it was compiled from: <dir>/runner/engine/trainer.cpp.o
                    yield os.path.relpath(path, top)[: -len(".o")], path


def symbols(path, *flags):
    out = subprocess.run(["nm", *flags, path], check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    defined_by = {}  # strong global symbol -> the source defining it
    used = collections.defaultdict(set)  # source -> the symbols it takes from elsewhere
    sources = dict(objects(build))
    if not sources:
        sys.exit(f"no object files of {', '.join(TARGETS)} under {build}/CMakeFiles: build first")
    for source, path in sources.items():
        for fields in symbols(path, "--defined-only", "-g"):
            kind, name = fields[-2], fields[-1]
            if kind in "TDBR":  # text, data, bss, read-only: one definition in the program
                defined_by[name] = source
        for fields in symbols(path, "-u"):
            used[source].add(fields[-1])
    depends = collections.defaultdict(dict)  # source -> {source it uses -> a symbol it uses}
    for source, names in used.items():
        for name in sorted(names):
            other = defined_by.get(name)
            if other and other != source:
                depends[source].setdefault(other, name)
    cycles = []
    for a in sorted(depends):
        for b, symbol in sorted(depends[a].items()):
            if a < b and a in depends.get(b, {}):
                cycles.append((a, b, symbol, depends[b][a]))
    for a, b, a_uses, b_uses in cycles:
        demangled = subprocess.run(
            ["c++filt", a_uses, b_uses], check=True, capture_output=True, text=True
        ).stdout.split("\n")
        print(f"{a} and {b} depend on each other:\n"
              f"  {a} uses {demangled[0]}\n  {b} uses {demangled[1]}")
    if cycles:
        print(f"{len(cycles)} pair(s) of files that depend on each other: move what both need into "
              "a collaborator of its own (a class with its own file), which both may use")
        return 1
    print(f"file dependencies: no two of {len(sources)} product files depend on each other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
