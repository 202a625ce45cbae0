# Sourced by the scripts: where the LibTorch venv and the build live. Override any of these.
TRAINYARD_HOME=${TRAINYARD_HOME:-$HOME/.local/share/trainyard}
TRAINYARD_VENV=${TRAINYARD_VENV:-$TRAINYARD_HOME/venv}
TRAINYARD_PYTHON=$TRAINYARD_VENV/bin/python
TRAINYARD_TORCH_VERSION=${TRAINYARD_TORCH_VERSION:-2.11.0}
TRAINYARD_TENSORBOARD_VERSION=${TRAINYARD_TENSORBOARD_VERSION:-2.21.0}  # the export test reads with it
TRAINYARD_MLFLOW_VENV=${TRAINYARD_MLFLOW_VENV:-$TRAINYARD_HOME/mlflow}  # its server, for the tests
TRAINYARD_MLFLOW_VERSION=${TRAINYARD_MLFLOW_VERSION:-3.17.2}
# torch 2.11.0's CUDA is 13.0: the packages that complete its NVIDIA runtime packages into a toolkit
# that configures a build (nvcc, its compiler's parts, CCCL), at 13.0 (cmake/torch_cuda_toolkit.cmake).
TRAINYARD_CUDA_BUILD_PACKAGES=(nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
                               nvidia-cuda-cccl==13.0.85)
TRAINYARD_BUILD=${TRAINYARD_BUILD:-build}
torch_cmake_prefix() { "$TRAINYARD_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null; }
