"""`python -m trainyard`: the `trainyard` command, and the SDK's location for CMake.

  python -m trainyard --cmake-prefix-path   the folder find_package(Trainyard) needs
  python -m trainyard ARGS...               the same as `trainyard ARGS...`
"""

import sys

from trainyard import cmake_prefix_path
from trainyard._launcher import main

if sys.argv[1:] == ["--cmake-prefix-path"]:
    print(cmake_prefix_path)
else:
    main()
