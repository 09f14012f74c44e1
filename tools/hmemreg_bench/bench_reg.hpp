// SPDX-License-Identifier: MIT
// hmemreg_bench reg: its options, shared by host memory (bench_reg.cpp) and
// CUDA memory (bench_reg_cuda.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench.hpp"

namespace hmemreg::bench {

struct RegOptions {
	std::string mem = "host";
	std::vector<std::string> providers{"tcp"};
	std::vector<uint64_t> sizes; // empty: the memory kind's default
	long iters = 0;		     // 0: per case default
};

// bench_reg_cuda.cpp
int reg_cuda_main(const RegOptions &o, Printer &out);
// bench_reg_export.cpp: hmemreg.ko devmem exports (FI_MR_DMABUF)
int reg_export_main(const RegOptions &o, Printer &out);

} // namespace hmemreg::bench
