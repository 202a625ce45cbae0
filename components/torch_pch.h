// Precompiled for every LibTorch translation unit (see CMakeLists.txt): parsing LibTorch's headers
// costs most of a minute per file on two cores, so it is done once per build.
#pragma once

#include <torch/torch.h>
