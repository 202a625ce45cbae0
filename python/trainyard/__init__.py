"""Trainyard, installed from its wheel: a declarative experiment runner for deep-learning training.

The product is the C++ executables under trainyard/bin/; the `trainyard` command runs them through
trainyard._launcher, which checks the torch package they were built against first.

The package is also the SDK for plugins (docs/plugins.md): the public headers under
trainyard/include/ and the CMake package under trainyard/lib/cmake/Trainyard. `cmake_prefix_path`
is the folder to give CMake (-DCMAKE_PREFIX_PATH), as torch.utils.cmake_prefix_path is torch's;
`python -m trainyard --cmake-prefix-path` prints it.
"""

from pathlib import Path

cmake_prefix_path = str(Path(__file__).resolve().parent)
