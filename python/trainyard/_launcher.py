"""The `trainyard` command of the wheel.

The executables under trainyard/bin/ were built against one release of LibTorch and its CUDA
runtime, and find them in the packages installed beside this one (their RPATH is
$ORIGIN/../../torch/lib and $ORIGIN/../../nvidia/cu13/lib). Without those, or with another release
or build of torch, they would stop with a loader error or worse; this checks first and says what to
install. Then it becomes the executable (os.execv): the pid, signals, the terminal and the exit
status are the executable's own, as if it had been started directly.
"""

import os
import re
import sys
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SITE_DIR = PACKAGE_DIR.parent  # the site-packages this wheel was installed into
EXECUTABLE = PACKAGE_DIR / "bin" / "trainyard"
# Where the executables' RPATH looks: the torch package's libraries and the CUDA runtime of PyPI's
# torch (the nvidia-cuda-runtime package, CUDA 13).
TORCH_LIB_DIR = SITE_DIR / "torch" / "lib"
CUDA_RUNTIME = SITE_DIR / "nvidia" / "cu13" / "lib" / "libcudart.so.13"


def installed_here(name: str) -> metadata.Distribution | None:
    """The distribution `name` installed in SITE_DIR (not one elsewhere on sys.path), or None."""
    for distribution in metadata.distributions(path=[str(SITE_DIR)]):
        if (distribution.metadata["Name"] or "").lower() == name:
            return distribution
    return None


def required_torch_version() -> str:
    """The release of torch this wheel was built against: its own requirement (pyproject.toml)."""
    trainyard = installed_here("trainyard")
    for requirement in (trainyard.requires if trainyard else None) or []:
        match = re.fullmatch(r"torch\s*==\s*([0-9][0-9A-Za-z.]*)", requirement.strip())
        if match:
            return match.group(1)
    raise RuntimeError(f"the trainyard installed in {SITE_DIR} names no torch==X requirement")


def torch_problem(required: str) -> tuple[str, str] | None:
    """What is wrong with the torch package beside these executables, and the pip arguments that
    fix it; or None."""
    reinstall = f"install --force-reinstall torch=={required}"
    torch = installed_here("torch")
    if torch is None:
        return f"the torch package is not installed in {SITE_DIR}, beside trainyard", reinstall
    installed = torch.version
    release, _, build = installed.partition("+")
    if release != required:
        return (f"this trainyard was built against torch {required}, but torch {installed} is "
                f"installed", reinstall)
    if not (TORCH_LIB_DIR / "libtorch_cpu.so").is_file():
        return (f"torch {installed} is listed in {SITE_DIR}, but its libraries are not in "
                f"{TORCH_LIB_DIR}", reinstall)
    if not (TORCH_LIB_DIR / "libc10_cuda.so").is_file() or not CUDA_RUNTIME.is_file():
        # A build of the same release from another index (+cpu, +cu128): only PyPI's will do.
        return (f"torch {installed} is not PyPI's build of torch {required} (with CUDA 13), which "
                f"trainyard's executables link; it runs on machines without a GPU too",
                f"{reinstall} --index-url https://pypi.org/simple")
    return None


def main() -> None:
    required = required_torch_version()
    problem = torch_problem(required)
    if problem:
        what, pip_arguments = problem
        sys.stderr.write(f"trainyard: {what}.\nfix: {sys.executable} -m pip {pip_arguments}\n")
        sys.exit(2)
    executable = str(EXECUTABLE)
    os.execv(executable, ["trainyard", *sys.argv[1:]])


if __name__ == "__main__":
    main()
