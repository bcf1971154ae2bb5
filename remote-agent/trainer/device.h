// Where a rank computes (--device): the CPU, or the GPU its agent made visible. The agent
// sets CUDA_VISIBLE_DEVICES per rank, so that GPU is cuda:0 in the worker.
//
// This is the trainer's one place for CUDA and NCCL code, all of it behind
// SCALELAB_WITH_CUDA, which CMake defines only when libtorch was built with CUDA. Every
// other trainer source uses device-neutral libtorch calls (Tensor::to, the default
// generator of a device) and compiles against a CPU-only libtorch; a CPU build refuses
// --device cuda with a message that says so. Trainer-only (libtorch).
#pragma once

#include "status.h"

#include <torch/torch.h>

#include <chrono>
#include <string>

namespace c10d {
class ProcessGroup;
class Store;
} // namespace c10d

namespace scalelab::trainer {

// True when this binary was built against a CUDA libtorch (with NCCL).
bool builtWithCuda();

// Whether this process can compute on `device` ("cpu" or "cuda"); if not, a message a
// person can act on (an unknown name, a CPU-only build, no visible GPU).
common::Status checkDevice(const std::string &device);

// Whether bf16 autocast runs natively on `device` (one checkDevice() accepts), and if not
// why: on the CPU it needs AVX-512 BF16 or AMX, on a GPU compute capability 8.0.
common::Status checkBf16(const std::string &device);

// The libtorch device for --device: kCPU, or cuda:0.
torch::Device torchDevice(const std::string &device);

// Waits until the work queued on `device` is done, so a clock read next times it.
// Nothing to wait for on the CPU.
void synchronize(const torch::Device &device);

// A ProcessGroupNCCL over `store`; a collective that waits longer than `timeout` for a
// peer ends this process (NCCL's watchdog aborts it). Throws std::runtime_error in a
// CPU-only build.
c10::intrusive_ptr<c10d::ProcessGroup> makeNcclGroup(
    const c10::intrusive_ptr<c10d::Store> &store, int rank, int worldSize, std::chrono::milliseconds timeout);

} // namespace scalelab::trainer
