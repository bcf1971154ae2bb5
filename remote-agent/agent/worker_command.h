// The scalelab-worker command line of one rank, built in one place from the run's spec as
// worker.proto's WorkerLaunch, and written by the channel's own code (worker_channel.h),
// with the environment it runs in. Pure functions (workerEnvironment also reads the agent's
// own environment); safe from any thread.
#pragma once

#include "run_supervisor.h"
#include "scalelab/v1/worker.pb.h"

#include <string>
#include <vector>

namespace scalelab::agent {

// Every training value is set explicitly, from rules::withDefaults(spec): the worker's
// own defaults never decide a run the agent started, zero is a value (momentum 0 turns
// momentum off), and numbers reach the worker exactly (1e-07, not 0.000000). The data
// set's measured normalisation is passed when the agent has it.
[[nodiscard]] v1::WorkerLaunch workerLaunch(const RunLaunch &launch, int rank);

// The learning-rate range test's launch: the options of workerLaunch(launch, 0) that
// lr-find takes (the data, the optimizer, the model's dropout, the device), and its own three.
[[nodiscard]] v1::WorkerLaunch lrFindLaunch(const RunLaunch &launch, double minLr, double maxLr, int steps);

// argv of the worker for `launch`: launch.workerBinary, then worker::launchArguments.
[[nodiscard]] std::vector<std::string> workerCommand(const RunLaunch &launch, const v1::WorkerLaunch &worker);

// What the worker of `rank` gets on top of the agent's environment (SpawnRequest::extraEnv):
// OMP_NUM_THREADS and OPENBLAS_NUM_THREADS = launch.threadsPerRank; CUDA_VISIBLE_DEVICES =
// the rank's GPUs from launch.gpus, empty for a CPU rank; and NCCL_SOCKET_IFNAME =
// launch.networkInterface when that is set and the agent's environment does not set it; and
// OMP_WAIT_POLICY=PASSIVE unless the agent's environment sets a policy. With libgomp's default
// (spin before sleeping), a rank's idle threads keep their cores busy after every parallel
// region: beside a second rank, a data loader or Gloo's threads that halves the throughput
// of both (bench/omp_wait_policy.sh measures it), while a rank alone runs as fast passive.
// And GLIBC_TUNABLES with glibc.malloc.hugetlb=1 (workerMallocTunables).
[[nodiscard]] std::vector<std::string> workerEnvironment(const RunLaunch &launch, int rank);

// "GLIBC_TUNABLES=...:glibc.malloc.hugetlb=1" (the agent's own tunables kept), or "" when the
// agent's environment already sets glibc.malloc.hugetlb. glibc then asks the kernel for
// transparent huge pages for malloc's memory (madvise; nothing changes where THP is off),
// so the heap that libtorch's start-up and a run's first steps fill costs ~7 k page faults
// instead of ~60 k: a worker's start and a short run take 10-20 % less CPU, most of all on
// virtual machines, where a page fault is expensive (bench/worker_start.sh measures it).
// The worker cannot set it itself: glibc reads it before main, and libtorch's static
// initialisers allocate before main too.
[[nodiscard]] std::string workerMallocTunables();

// Puts a rank on its device: nothing for a CPU rank (no GPUs assigned), device "cuda" for a
// rank with GPUs, and with it backend "gloo" when a data-parallel run's ranks share GPUs
// (gpus_per_worker below 1), because NCCL refuses two ranks of one communicator on one GPU.
// Decided from the spec alone, so every agent of a run picks the same collectives.
void placeOnDevice(v1::WorkerLaunch *worker, const v1::RunSpec &spec, int worldSize, bool rankHasGpus);

} // namespace scalelab::agent
