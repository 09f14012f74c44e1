// SPDX-License-Identifier: MIT
// hmemreg_bench xfer --mem cuda --procs 2: engine writes from CUDA memory in
// this process to CUDA memory in a child process (GPU 0 for both), the way
// two ranks on one GPU move device data (shm's CUDA IPC needs two
// processes). Per size, one row: the path the engine took (direct or
// staged, and how it registered), GB/s, and references measured in the same
// run: cuMemcpyDtoD of the same size (the device-to-device copy limit) and
// the slower of cuMemcpy DtoH/HtoD from pinned memory (what staging is
// bounded by). libfabric's own fi_rma_bw -D cuda over the same provider is
// run next to it by tests/gpu/device-run.
#pragma once

#include <cstddef>
#include <string>

namespace hmemreg::bench {

struct CudaProcsOptions {
	std::string provider = "shm";
	size_t min_size = 16u << 20, max_size = 256u << 20;
	unsigned window = 8;
	unsigned repeat = 3;
	double seconds = 0.5;
	bool verify = false;
	bool json = false;
};

// Forks the target before touching CUDA or libfabric; returns the exit status.
int xfer_cuda_two_processes(const CudaProcsOptions &o);

} // namespace hmemreg::bench
