// SPDX-License-Identifier: MIT
// The CUDA driver loader is its own component (cuda-driver/), shared with
// the NCCL plugin and the tools: one loader for every part of the project.
#pragma once

#include "../../../cuda-driver/cuda_driver.hpp"
