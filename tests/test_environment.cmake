# Included by CTest (TEST_INCLUDE_FILES, tests/CMakeLists.txt): the environment every test runs in.
#
# OMP_WAIT_POLICY=PASSIVE: `ctest -j2` runs two tests at once, each training with as many intra-op
# threads as the machine has cores, so twice as many OpenMP threads as cores are busy; with
# LibTorch's OpenMP (libgomp) spinning at its barriers by default, the threads of one test then
# burn the cores the other's need. Measured on 2 cores: two quickstarts side by side took 81 s and
# 257 s by default, 23 s and 24 s with PASSIVE; one alone takes 14-15 s by default and 21-25 s
# with PASSIVE — which is why the product keeps libgomp's default, and only the suite, which never
# runs one test alone, sets this. A value set by whoever runs CTest is kept.
if(NOT DEFINED ENV{OMP_WAIT_POLICY})
  set(ENV{OMP_WAIT_POLICY} PASSIVE)
endif()
