// Which OpenBLAS kernel runs libtorch's GEMMs, and a better one when OpenBLAS guessed low.
//
// Debian's OpenBLAS (0.3.21, built DYNAMIC_ARCH) picks its kernel by CPU model number. A model
// newer than it knows (seen: Xeon family 6 model 207, with AVX-512 and AVX-512 BF16) gets its
// generic Prescott kernel (SSE3): a 2048^2 fp32 GEMM at 32 GFLOP/s on one thread, against 120
// with the AVX-512 kernel the same CPU runs under OPENBLAS_CORETYPE=SkylakeX. Every linear
// layer pays that, and every convolution libtorch lowers to a GEMM.
//
// The worker asks OpenBLAS for the best kernel the CPU's features allow, through OpenBLAS's
// own selection (OPENBLAS_CORETYPE, then gotoblas_dynamic_init, as at load time), keeps it
// only when sgemm and dgemm agree with a reference product, and otherwise goes back to what
// OpenBLAS picked. Torch-free: OpenBLAS is reached through dlsym, and a process whose BLAS
// is not OpenBLAS keeps it untouched.
#pragma once

#include <string>

namespace scalelab::trainer {

struct BlasKernel {
    std::string library; // openblas_get_config() ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..."), or ""
    std::string kernel; // the kernel OpenBLAS runs ("SkylakeX"), or "" when not OpenBLAS
    std::string detected; // the kernel OpenBLAS picked by itself
    bool chosen = false; // the worker switched from `detected` to `kernel`
    std::string how; // why this kernel, in words
};

// Call first in main(), before any BLAS call and before any thread of the process's own.
// Idempotent: later calls return the first call's result.
const BlasKernel &chooseBlasKernel();

// One line for recipes and reports: "OpenBLAS 0.3.21 ... ; kernel SkylakeX (chosen: ...)".
std::string describeBlas(const BlasKernel &blas);

// The kernels OpenBLAS's detection falls back to on CPUs it does not know.
bool isGenericBlasKernel(const std::string &kernel);

} // namespace scalelab::trainer
