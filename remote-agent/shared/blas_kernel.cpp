#include "blas_kernel.h"

#include "cpu_features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <csetjmp>
#include <csignal>
#include <cstdlib>
#include <dlfcn.h>
#include <limits>
#include <random>
#include <strings.h>
#include <vector>

namespace scalelab::trainer {

namespace {

// OpenBLAS's C interface (cblas.h), reached by name so that nothing links to it.
enum { kRowMajor = 101, kNoTrans = 111 };
using Sgemm = void (*)(
    int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
using Dgemm = void (*)(
    int, int, int, int, int, int, double, const double *, int, const double *, int, double, double *, int);

template <typename F> F symbol(const char *name)
{
    return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

std::string coreName()
{
    const auto name = symbol<char *(*)()>("openblas_get_corename");
    return name ? std::string(name()) : std::string();
}

// The best kernels first, each with the CPU flags its code uses and the gotoblas table that
// tells this OpenBLAS was built with it.
struct Candidate {
    const char *kernel;
    const char *flags;
    const char *features; // the flags in words
    const char *table;
};
const Candidate kCandidates[] = {
    { "Cooperlake", "avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16 fma", "AVX-512 with BF16",
        "gotoblas_COOPERLAKE" },
    { "SkylakeX", "avx512f avx512cd avx512bw avx512dq avx512vl fma", "AVX-512", "gotoblas_SKYLAKEX" },
    { "Haswell", "avx2 fma", "AVX2 and FMA", "gotoblas_HASWELL" },
};

sigjmp_buf g_illegalInstruction;
void onIllegalInstruction(int)
{
    siglongjmp(g_illegalInstruction, 1);
}

// The largest error of C = A·B against a product summed in long double, over the bound
// k·eps·sum|a||b| that a correct kernel stays well inside (any order of summation, FMA or
// not). Sizes that are not multiples of any kernel's block, and one whose k spans the
// depth blocks of every x86 kernel (GEMM_Q is 512 or less). Every worker start on a CPU
// that OpenBLAS does not know runs this: 97x61x520 costs a fifth of 256x256x256.
template <typename T, typename Gemm> double worstError(Gemm gemm)
{
    std::mt19937 random(7);
    std::uniform_real_distribution<T> value(-1, 1);
    double worst = 0;
    for (const auto [m, n, k] :
        { std::array { 67, 45, 129 }, std::array { 97, 61, 520 }, std::array { 5, 300, 3 } }) {
        std::vector<T> a(std::size_t(m) * k), b(std::size_t(k) * n), c(std::size_t(m) * n, T(0));
        std::generate(a.begin(), a.end(), [&] { return value(random); });
        std::generate(b.begin(), b.end(), [&] { return value(random); });
        gemm(kRowMajor, kNoTrans, kNoTrans, m, n, k, T(1), a.data(), k, b.data(), n, T(0), c.data(), n);
        const double bound = k * std::numeric_limits<T>::epsilon();
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                long double exact = 0, size = 0;
                for (int p = 0; p < k; ++p) {
                    exact += static_cast<long double>(a[i * k + p]) * b[p * n + j];
                    size += std::fabs(static_cast<long double>(a[i * k + p]) * b[p * n + j]);
                }
                const double error
                    = static_cast<double>(std::fabs(c[i * n + j] - exact) / (size * bound + 1e-30L));
                worst = std::max(worst, std::isfinite(error) ? error : 1e9);
            }
    }
    return worst;
}

// "" when sgemm and dgemm of the running kernel are right, else what went wrong.
std::string checkKernel()
{
    const auto sgemm = symbol<Sgemm>("cblas_sgemm");
    const auto dgemm = symbol<Dgemm>("cblas_dgemm");
    if (!sgemm || !dgemm)
        return "OpenBLAS has no cblas_sgemm/cblas_dgemm to check it with";
    // One thread, so that an instruction this CPU lacks stops here and not in a pool thread.
    const auto getThreads = symbol<int (*)()>("openblas_get_num_threads");
    const auto setThreads = symbol<void (*)(int)>("openblas_set_num_threads");
    const int threads = getThreads ? getThreads() : 1;
    if (setThreads)
        setThreads(1);
    struct sigaction handler = {}, previous = {};
    handler.sa_handler = onIllegalInstruction;
    sigemptyset(&handler.sa_mask);
    sigaction(SIGILL, &handler, &previous);
    std::string problem;
    if (sigsetjmp(g_illegalInstruction, 1) == 0) {
        const double single = worstError<float>(sgemm);
        const double twice = worstError<double>(dgemm);
        // A correct kernel is within a few per cent of the bound; a wrong one is far out.
        if (single > 1 || twice > 1)
            problem = "its products disagree with a reference (error "
                + std::to_string(std::max(single, twice)) + "x the rounding bound)";
    } else {
        problem = "it used an instruction this CPU lacks (SIGILL)";
    }
    sigaction(SIGILL, &previous, nullptr);
    if (setThreads)
        setThreads(threads);
    return problem;
}

// OpenBLAS's own selection, run again: it reads OPENBLAS_CORETYPE as it does at load time.
bool selectKernel(const char *kernel)
{
    const auto quit = symbol<void (*)()>("gotoblas_dynamic_quit");
    const auto init = symbol<void (*)()>("gotoblas_dynamic_init");
    if (!quit || !init)
        return false;
    if (kernel)
        setenv("OPENBLAS_CORETYPE", kernel, 1);
    else
        unsetenv("OPENBLAS_CORETYPE");
    quit();
    init();
    return true;
}

BlasKernel choose()
{
    BlasKernel blas;
    if (const auto config = symbol<char *(*)()>("openblas_get_config"))
        blas.library = config();
    blas.kernel = blas.detected = coreName();
    if (blas.library.empty() || blas.kernel.empty()) {
        blas.how = "not OpenBLAS: left as it is";
        return blas;
    }
    if (const char *asked = std::getenv("OPENBLAS_CORETYPE"); asked && *asked) {
        blas.how = std::string("OPENBLAS_CORETYPE=") + asked;
        return blas;
    }
    if (!isGenericBlasKernel(blas.detected)) {
        blas.how = "OpenBLAS's own choice for this CPU";
        return blas;
    }
    const Candidate *candidate = nullptr;
    for (const Candidate &c : kCandidates)
        if (cpu::hasFlags(c.flags) && dlsym(RTLD_DEFAULT, c.table)) {
            candidate = &c;
            break;
        }
    if (!candidate) {
        blas.how = "OpenBLAS's generic kernel: this CPU has neither AVX2 nor AVX-512";
        return blas;
    }
    if (!selectKernel(candidate->kernel) || coreName() != candidate->kernel) {
        selectKernel(nullptr);
        blas.kernel = coreName();
        blas.how = std::string("OpenBLAS would not switch to ") + candidate->kernel + "; kept its own choice";
        return blas;
    }
    if (const std::string problem = checkKernel(); !problem.empty()) {
        selectKernel(nullptr);
        blas.kernel = coreName();
        blas.how
            = std::string("kept OpenBLAS's choice: ") + candidate->kernel + " failed the check, " + problem;
        return blas;
    }
    blas.kernel = candidate->kernel;
    blas.chosen = true;
    blas.how = "chosen by the worker: OpenBLAS does not know this CPU model and picked " + blas.detected
        + "; the CPU has " + candidate->features + ", and " + blas.kernel
        + "'s sgemm and dgemm matched a reference product";
    return blas;
}

} // namespace

bool isGenericBlasKernel(const std::string &kernel)
{
    for (const char *generic : { "Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias",
             "Core2", "Athlon", "Opteron", "Opteron_SSE3", "Barcelona" })
        if (strcasecmp(kernel.c_str(), generic) == 0)
            return true;
    return false;
}

const BlasKernel &chooseBlasKernel()
{
    static const BlasKernel blas = [] {
        BlasKernel chosen = choose();
        // The configuration names the kernel running now.
        if (const auto config = symbol<char *(*)()>("openblas_get_config"); config && !chosen.library.empty())
            chosen.library = config();
        return chosen;
    }();
    return blas;
}

std::string describeBlas(const BlasKernel &blas)
{
    if (blas.library.empty())
        return "reference BLAS (install libopenblas0-pthread: ~30x faster linear layers)";
    return blas.library + "; kernel " + blas.kernel + " (" + blas.how + ")";
}

} // namespace scalelab::trainer
