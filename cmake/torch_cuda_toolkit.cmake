# The CUDA toolkit that LibTorch's CMake package needs to configure a build against the CUDA torch
# wheel — its Caffe2 config enables CUDA as a language (nvcc must compile a test program) and finds
# the runtime's headers and libraries — without a system install (docs/setup.md): from the
# torch package's own NVIDIA packages beside it in site-packages. torch depends on the runtime,
# cuBLAS, cuFFT, ... of its CUDA; nvcc, its compiler's parts and CCCL come from PyPI too, at the
# versions of that CUDA (scripts/setup.sh installs them, pyproject.toml requires them for
# `pip install .`). PyPI lays them out as nvidia/cu13/{bin,include,lib,nvvm} with versioned
# library names alone; CMake's FindCUDA and FindCUDAToolkit want a toolkit's layout (lib64,
# libcudart.so), so the build folder gets a view of it made of symbolic links: cuda-toolkit/.
#
# A toolkit named on the command line (-DCUDA_TOOLKIT_ROOT_DIR=/usr/local/cuda) is used instead,
# and without nvcc in the torch package the system's, if any, as LibTorch would find it.

# `torch_cmake_dir`: the torch package's share/cmake folder (torch.utils.cmake_prefix_path).
function(trainyard_use_torch_cuda_toolkit torch_cmake_dir)
  set(view "${CMAKE_BINARY_DIR}/cuda-toolkit")
  foreach(named CUDA_TOOLKIT_ROOT_DIR CUDAToolkit_ROOT)
    if(DEFINED ${named} AND NOT "${${named}}" STREQUAL "${view}")  # not this build's own view
      message(STATUS "CUDA toolkit: ${${named}} (${named})")
      return()
    endif()
  endforeach()
  get_filename_component(site "${torch_cmake_dir}/../../.." ABSOLUTE)
  file(GLOB toolkits LIST_DIRECTORIES true "${site}/nvidia/cu[0-9]*")
  set(packaged "")
  foreach(candidate IN LISTS toolkits)
    if(EXISTS "${candidate}/bin/nvcc" AND EXISTS "${candidate}/include/cuda_runtime.h")
      set(packaged "${candidate}")
    endif()
  endforeach()
  if(packaged STREQUAL "")
    message(STATUS "CUDA toolkit: none in the torch package's NVIDIA packages (${site}/nvidia; "
                   "scripts/setup.sh installs nvcc there): LibTorch looks for a system one")
    return()
  endif()
  file(MAKE_DIRECTORY "${view}/bin" "${view}/lib64")
  # nvcc finds its parts from the folder it is called in (bin/../nvvm, bin/../lib64): the view's
  # bin holds a link per tool, not a link to the package's bin.
  file(GLOB tools "${packaged}/bin/*")
  foreach(tool IN LISTS tools)
    get_filename_component(name "${tool}" NAME)
    file(CREATE_LINK "${tool}" "${view}/bin/${name}" SYMBOLIC)
  endforeach()
  foreach(folder include nvvm)
    if(EXISTS "${packaged}/${folder}")
      file(CREATE_LINK "${packaged}/${folder}" "${view}/${folder}" SYMBOLIC)
    endif()
  endforeach()
  file(GLOB libraries "${packaged}/lib/*")
  foreach(library IN LISTS libraries)
    get_filename_component(name "${library}" NAME)
    file(CREATE_LINK "${library}" "${view}/lib64/${name}" SYMBOLIC)
    if(name MATCHES "^(.+\\.so)\\.[0-9.]+$")  # libcudart.so.13: also as libcudart.so
      file(CREATE_LINK "${library}" "${view}/lib64/${CMAKE_MATCH_1}" SYMBOLIC)
    endif()
  endforeach()
  set(CUDA_TOOLKIT_ROOT_DIR "${view}" CACHE PATH "CUDA toolkit (LibTorch's FindCUDA)")
  set(CUDAToolkit_ROOT "${view}" CACHE PATH "CUDA toolkit (FindCUDAToolkit)")
  set(CMAKE_CUDA_COMPILER "${view}/bin/nvcc" CACHE FILEPATH "nvcc")
  message(STATUS "CUDA toolkit: ${packaged} (the torch package's NVIDIA packages), as ${view}")
endfunction()
