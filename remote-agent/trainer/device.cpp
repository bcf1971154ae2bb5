#include "device.h"

#include "c10d_compat.h"
#include "cpu_features.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/cuda.h>

#if SCALELAB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
// Guarded by USE_C10D_NCCL, which CMake defines with SCALELAB_WITH_CUDA.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <stdexcept>

namespace scalelab::trainer {

namespace {
constexpr const char *kCpuOnlyBuild = "this scalelab-worker was built against a CPU-only libtorch; rebuild "
                                      "against a CUDA libtorch to use GPUs";
// bf16 tensor cores and native bf16 arithmetic start with Ampere.
constexpr int kBf16ComputeMajor = 8;
} // namespace

bool builtWithCuda()
{
#if SCALELAB_WITH_CUDA
    return true;
#else
    return false;
#endif
}

common::Status checkDevice(const std::string &device)
{
    if (device == "cpu")
        return common::Status::success();
    if (device != "cuda")
        return common::Status::failure("--device must be 'cpu' or 'cuda' (got '" + device + "')");
    if (!builtWithCuda())
        return common::Status::failure(std::string("--device cuda: ") + kCpuOnlyBuild);
    if (!torch::cuda::is_available()) {
        const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
        return common::Status::failure(
            std::string("--device cuda: no CUDA GPU is usable by this process (CUDA_VISIBLE_DEVICES=")
            + (visible ? visible : "unset")
            + "); check the NVIDIA driver with nvidia-smi, or use --device cpu");
    }
    return common::Status::success();
}

common::Status checkBf16(const std::string &device)
{
    if (device != "cuda") {
        if (cpu::hasBf16())
            return common::Status::success();
        return common::Status::failure(
            "--precision bf16 needs a CPU with AVX-512 BF16 or AMX (this one has neither); use fp32");
    }
#if SCALELAB_WITH_CUDA
    const cudaDeviceProp *gpu = at::cuda::getDeviceProperties(0);
    if (gpu->major >= kBf16ComputeMajor)
        return common::Status::success();
    return common::Status::failure(
        "--precision bf16 needs a GPU of compute capability 8.0 or newer (Ampere); this "
        + std::string(gpu->name) + " is " + std::to_string(gpu->major) + "." + std::to_string(gpu->minor)
        + "; use fp32");
#else
    return common::Status::failure(std::string("--device cuda: ") + kCpuOnlyBuild);
#endif
}

torch::Device torchDevice(const std::string &device)
{
    return device == "cuda" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
}

void synchronize(const torch::Device &device)
{
    if (device.is_cuda())
        torch::cuda::synchronize(device.index());
}

c10::intrusive_ptr<c10d::ProcessGroup> makeNcclGroup(
    const c10::intrusive_ptr<c10d::Store> &store, int rank, int worldSize, std::chrono::milliseconds timeout)
{
#if SCALELAB_WITH_CUDA
    // Without asynchronous error handling, a collective whose peer died waits forever on
    // the GPU; with it, NCCL's watchdog aborts the communicator after `timeout` and ends
    // the process, so its agent sees the rank fail instead of hang. The constructor reads
    // it; a value set by whoever started the worker wins.
    ::setenv("NCCL_ASYNC_ERROR_HANDLING", "1", /*overwrite=*/0);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    return processGroupOf(c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, worldSize, options), store,
        { c10::DeviceType::CUDA });
#else
    (void)store, (void)rank, (void)worldSize, (void)timeout;
    throw std::runtime_error(std::string("NCCL: ") + kCpuOnlyBuild);
#endif
}

} // namespace scalelab::trainer
