#include "fused_ops.h"

#include "torch_compat.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define SCALELAB_AVX2 1
#include <immintrin.h>
#else
#define SCALELAB_AVX2 0
#endif

#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>

namespace scalelab::trainer {

namespace {

// Route byte of an output: which input of its 2x2 window (0..3 in row order) receives its
// gradient, or none.
constexpr std::uint8_t kNoGradient = 4;

#define SCALELAB_INLINE inline __attribute__((always_inline))

// Dropout draws Bernoulli(1 - p) per output element from a counter-based hash of (seed,
// element index): the same mask whatever the thread count or chunking. Two rounds of
// Wellons' lowbias32 mixer, 32-bit so that it vectorises.
SCALELAB_INLINE std::uint32_t mix32(std::uint32_t h)
{
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

struct Dropout {
    std::uint64_t seed = 0;
    std::uint32_t keepLimit = 0xffffffffu; // an element is kept if its hash is <= keepLimit
    float scale = 1.0f;

    SCALELAB_INLINE bool keep(std::uint32_t index) const
    {
        return mix32(mix32(index ^ std::uint32_t(seed)) + std::uint32_t(seed >> 32)) <= keepLimit;
    }
};

std::uint64_t drawSeed()
{
    auto generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get<at::CPUGeneratorImpl>()->random64();
}

struct Geometry {
    std::int64_t n, c, h, w;
    bool channelsLast;
    std::int64_t oh() const { return h / 2; }
    std::int64_t ow() const { return w / 2; }
};

// `count` windows whose four inputs sit at p0..p3 + Stride * i; outputs and route bytes at
// out + i, numbered first + i for the dropout hash. Each output is the ReLU of its window's
// maximum, dropped or scaled. The maximum is the one ATen's max-pool picks: the first in
// row order, and a NaN over any number (the last NaN: ATen takes every NaN it meets). ReLU
// keeps a NaN and so does its backward (NaN <= 0 is false), so a NaN routes its gradient.
template <int Stride, typename T>
SCALELAB_INLINE void forwardRun(const T *__restrict p0, const T *__restrict p1, const T *__restrict p2,
    const T *__restrict p3, std::int64_t count, T *__restrict out, std::uint8_t *__restrict route,
    std::uint32_t first, const Dropout dropout)
{
    for (std::int64_t i = 0; i < count; ++i) {
        const float v0 = float(p0[Stride * i]), v1 = float(p1[Stride * i]), v2 = float(p2[Stride * i]),
                    v3 = float(p3[Stride * i]);
        float m = v0;
        std::uint8_t k = 0;
        bool take = (v1 > m) | (v1 != v1);
        m = take ? v1 : m;
        k = take ? 1 : k;
        take = (v2 > m) | (v2 != v2);
        m = take ? v2 : m;
        k = take ? 2 : k;
        take = (v3 > m) | (v3 != v3);
        m = take ? v3 : m;
        k = take ? 3 : k;
        const bool live = !(m <= 0.0f) & dropout.keep(first + std::uint32_t(i));
        out[i] = T(live ? m * dropout.scale : 0.0f);
        route[i] = live ? k : kNoGradient;
    }
}

// The gradient of `count` windows laid out as in forwardRun: each input of a window gets
// the output's gradient times the dropout scale if the route names it, else zero.
template <int Stride, typename T>
SCALELAB_INLINE void backwardRun(const T *__restrict gradOut, const std::uint8_t *__restrict route,
    std::int64_t count, T *__restrict q0, T *__restrict q1, T *__restrict q2, T *__restrict q3, float scale)
{
    for (std::int64_t i = 0; i < count; ++i) {
        const std::uint8_t r = route[i];
        const float v = float(gradOut[i]) * scale;
        q0[Stride * i] = T(r == 0 ? v : 0.0f);
        q1[Stride * i] = T(r == 1 ? v : 0.0f);
        q2[Stride * i] = T(r == 2 ? v : 0.0f);
        q3[Stride * i] = T(r == 3 ? v : 0.0f);
    }
}

// One task of the forward pass: planes [begin, end) of [N, C, H, W] (a window's rows are W
// apart, its columns 1), or output rows [begin, end) of [N, H, W, C] in memory (a window's
// four inputs are C-vectors, and one run covers the channels of a window).
template <typename T>
SCALELAB_INLINE void forwardTask(const T *in, T *out, std::uint8_t *route, const Geometry &g,
    const Dropout &dropout, std::int64_t begin, std::int64_t end)
{
    const std::int64_t oh = g.oh(), ow = g.ow();
    if (!g.channelsLast) {
        for (std::int64_t plane = begin; plane < end; ++plane)
            for (std::int64_t y = 0; y < oh; ++y) {
                const T *r0 = in + (plane * g.h + 2 * y) * g.w, *r1 = r0 + g.w;
                const std::int64_t o = (plane * oh + y) * ow;
                forwardRun<2>(r0, r0 + 1, r1, r1 + 1, ow, out + o, route + o, std::uint32_t(o), dropout);
            }
        return;
    }
    const std::int64_t c = g.c;
    for (std::int64_t row = begin; row < end; ++row) {
        const std::int64_t n = row / oh, y = row % oh;
        for (std::int64_t x = 0; x < ow; ++x) {
            const T *a = in + ((n * g.h + 2 * y) * g.w + 2 * x) * c, *d = a + g.w * c;
            const std::int64_t o = (row * ow + x) * c;
            forwardRun<1>(a, a + c, d, d + c, c, out + o, route + o, std::uint32_t(o), dropout);
        }
    }
}

template <typename T>
SCALELAB_INLINE void backwardTask(const T *gradOut, const std::uint8_t *route, T *gradIn, const Geometry &g,
    float scale, std::int64_t begin, std::int64_t end)
{
    const std::int64_t oh = g.oh(), ow = g.ow();
    if (!g.channelsLast) {
        for (std::int64_t plane = begin; plane < end; ++plane)
            for (std::int64_t y = 0; y < oh; ++y) {
                T *r0 = gradIn + (plane * g.h + 2 * y) * g.w, *r1 = r0 + g.w;
                const std::int64_t o = (plane * oh + y) * ow;
                backwardRun<2>(gradOut + o, route + o, ow, r0, r0 + 1, r1, r1 + 1, scale);
            }
        return;
    }
    const std::int64_t c = g.c;
    for (std::int64_t row = begin; row < end; ++row) {
        const std::int64_t n = row / oh, y = row % oh;
        for (std::int64_t x = 0; x < ow; ++x) {
            T *a = gradIn + ((n * g.h + 2 * y) * g.w + 2 * x) * c, *d = a + g.w * c;
            const std::int64_t o = (row * ow + x) * c;
            backwardRun<1>(gradOut + o, route + o, c, a, a + c, d, d + c, scale);
        }
    }
}

void forwardFloat(const float *in, float *out, std::uint8_t *route, const Geometry &g, const Dropout &dropout,
    std::int64_t begin, std::int64_t end)
{
    forwardTask(in, out, route, g, dropout, begin, end);
}
void forwardBFloat16(const c10::BFloat16 *in, c10::BFloat16 *out, std::uint8_t *route, const Geometry &g,
    const Dropout &dropout, std::int64_t begin, std::int64_t end)
{
    forwardTask(in, out, route, g, dropout, begin, end);
}
void backwardFloat(const float *gradOut, const std::uint8_t *route, float *gradIn, const Geometry &g,
    float scale, std::int64_t begin, std::int64_t end)
{
    backwardTask(gradOut, route, gradIn, g, scale, begin, end);
}
void backwardBFloat16(const c10::BFloat16 *gradOut, const std::uint8_t *route, c10::BFloat16 *gradIn,
    const Geometry &g, float scale, std::int64_t begin, std::int64_t end)
{
    backwardTask(gradOut, route, gradIn, g, scale, begin, end);
}

#if SCALELAB_AVX2
// The same with AVX2, eight windows at a time, bit for bit equal to the portable loops
// (same comparisons in the same order, same hash, same products). The portable loops run
// a window's columns at stride 2, and rows of the seed CNN's [N, C, H, W] maps are 4 to
// 16 outputs long: too short for GCC's vectoriser, which wants 32 at that stride.
namespace avx2 {

#define SCALELAB_AVX2_FN __attribute__((target("avx2"))) inline

SCALELAB_AVX2_FN __m256i mix32(__m256i h)
{
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(0x7feb352d));
    h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
    h = _mm256_mullo_epi32(h, _mm256_set1_epi32(std::int32_t(0x846ca68bu)));
    return _mm256_xor_si256(h, _mm256_srli_epi32(h, 16));
}

// ATen's scan step: candidate `c` (window position `index`) replaces the maximum if it is
// greater or NaN.
SCALELAB_AVX2_FN void scan(__m256 c, float index, __m256 &m, __m256 &k)
{
    const __m256 take = _mm256_or_ps(_mm256_cmp_ps(c, m, _CMP_GT_OQ), _mm256_cmp_ps(c, c, _CMP_UNORD_Q));
    m = _mm256_blendv_ps(m, c, take);
    k = _mm256_blendv_ps(k, _mm256_set1_ps(index), take);
}

// Eight windows (candidates c0..c3 in row order, outputs numbered `index`): the outputs and
// their routes (int32 lanes), as forwardRun computes them.
SCALELAB_AVX2_FN void pool(__m256 c0, __m256 c1, __m256 c2, __m256 c3, __m256i index, const Dropout &dropout,
    __m256 &value, __m256i &route)
{
    __m256 m = c0, k = _mm256_setzero_ps();
    scan(c1, 1.0f, m, k);
    scan(c2, 2.0f, m, k);
    scan(c3, 3.0f, m, k);
    __m256 live = _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_NLE_UQ); // NaN lives, as in ReLU
    if (dropout.keepLimit != 0xffffffffu) {
        const __m256i h = mix32(_mm256_add_epi32(
            mix32(_mm256_xor_si256(index, _mm256_set1_epi32(std::int32_t(std::uint32_t(dropout.seed))))),
            _mm256_set1_epi32(std::int32_t(std::uint32_t(dropout.seed >> 32)))));
        const __m256i limit = _mm256_set1_epi32(std::int32_t(dropout.keepLimit));
        const __m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(h, limit), limit); // h <= limit, unsigned
        live = _mm256_and_ps(live, _mm256_castsi256_ps(keep));
    }
    value = _mm256_and_ps(live, _mm256_mul_ps(m, _mm256_set1_ps(dropout.scale)));
    route = _mm256_cvttps_epi32(_mm256_blendv_ps(_mm256_set1_ps(float(kNoGradient)), k, live));
}

SCALELAB_AVX2_FN void storeRoute(std::uint8_t *dst, __m256i route)
{
    const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(route), _mm256_extracti128_si256(route, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i *>(dst), _mm_packus_epi16(words, words));
}

// [N, C, H, W] with ow a multiple of 4 and oh * ow of 8: a group of eight outputs is two
// runs of four within a row, and each run's top (and bottom) inputs are 8 floats in a row.
bool planesFit(const Geometry &g)
{
    return !g.channelsLast && g.ow() % 4 == 0 && (g.oh() * g.ow()) % 8 == 0;
}
bool rowsFit(const Geometry &g)
{
    return g.channelsLast && g.c % 8 == 0;
}

__attribute__((target("avx2"))) void forwardPlanes(const float *in, float *out, std::uint8_t *route,
    const Geometry &g, const Dropout &dropout, std::int64_t begin, std::int64_t end)
{
    const std::int64_t ow = g.ow(), perPlane = g.oh() * ow;
    // Deinterleaving two runs puts their outputs in lanes 0 1 4 5 2 3 6 7.
    const __m256i lanes = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (std::int64_t plane = begin; plane < end; ++plane) {
        const float *src = in + plane * g.h * g.w;
        for (std::int64_t i = 0; i < perPlane; i += 8) {
            const float *ta = src + 2 * (i / ow) * g.w + 2 * (i % ow);
            const float *tb = src + 2 * ((i + 4) / ow) * g.w + 2 * ((i + 4) % ow);
            const __m256 topA = _mm256_loadu_ps(ta), topB = _mm256_loadu_ps(tb);
            const __m256 bottomA = _mm256_loadu_ps(ta + g.w), bottomB = _mm256_loadu_ps(tb + g.w);
            const std::int64_t o = plane * perPlane + i;
            __m256 value;
            __m256i routes;
            pool(_mm256_shuffle_ps(topA, topB, _MM_SHUFFLE(2, 0, 2, 0)),
                _mm256_shuffle_ps(topA, topB, _MM_SHUFFLE(3, 1, 3, 1)),
                _mm256_shuffle_ps(bottomA, bottomB, _MM_SHUFFLE(2, 0, 2, 0)),
                _mm256_shuffle_ps(bottomA, bottomB, _MM_SHUFFLE(3, 1, 3, 1)),
                _mm256_add_epi32(_mm256_set1_epi32(std::int32_t(std::uint32_t(o))), lanes), dropout, value,
                routes);
            value = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(value), _MM_SHUFFLE(3, 1, 2, 0)));
            _mm256_storeu_ps(out + o, value);
            storeRoute(route + o, _mm256_permute4x64_epi64(routes, _MM_SHUFFLE(3, 1, 2, 0)));
        }
    }
}

__attribute__((target("avx2"))) void forwardRows(const float *in, float *out, std::uint8_t *route,
    const Geometry &g, const Dropout &dropout, std::int64_t begin, std::int64_t end)
{
    const std::int64_t oh = g.oh(), ow = g.ow(), c = g.c;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (std::int64_t row = begin; row < end; ++row) {
        const std::int64_t n = row / oh, y = row % oh;
        for (std::int64_t x = 0; x < ow; ++x) {
            const float *a = in + ((n * g.h + 2 * y) * g.w + 2 * x) * c, *d = a + g.w * c;
            for (std::int64_t k = 0; k < c; k += 8) {
                const std::int64_t o = (row * ow + x) * c + k;
                __m256 value;
                __m256i routes;
                pool(_mm256_loadu_ps(a + k), _mm256_loadu_ps(a + c + k), _mm256_loadu_ps(d + k),
                    _mm256_loadu_ps(d + c + k),
                    _mm256_add_epi32(_mm256_set1_epi32(std::int32_t(std::uint32_t(o))), lanes), dropout,
                    value, routes);
                _mm256_storeu_ps(out + o, value);
                storeRoute(route + o, routes);
            }
        }
    }
}

// The gradients of eight windows for window positions 0..3, in output order.
SCALELAB_AVX2_FN void unpool(const float *gradOut, const std::uint8_t *route, float scale, __m256 v[4])
{
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gradOut), _mm256_set1_ps(scale));
    const __m256i r = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(route)));
    for (int k = 0; k < 4; ++k)
        v[k] = _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(r, _mm256_set1_epi32(k))), g);
}

__attribute__((target("avx2"))) void backwardPlanes(const float *gradOut, const std::uint8_t *route,
    float *gradIn, const Geometry &g, float scale, std::int64_t begin, std::int64_t end)
{
    const std::int64_t ow = g.ow(), perPlane = g.oh() * ow;
    for (std::int64_t plane = begin; plane < end; ++plane) {
        float *dst = gradIn + plane * g.h * g.w;
        for (std::int64_t i = 0; i < perPlane; i += 8) {
            const std::int64_t o = plane * perPlane + i;
            __m256 v[4];
            unpool(gradOut + o, route + o, scale, v);
            // Interleave positions 0/1 (top) and 2/3 (bottom) back into rows: the first
            // run's eight floats, then the second's.
            const __m256 topLo = _mm256_unpacklo_ps(v[0], v[1]), topHi = _mm256_unpackhi_ps(v[0], v[1]);
            const __m256 bottomLo = _mm256_unpacklo_ps(v[2], v[3]), bottomHi = _mm256_unpackhi_ps(v[2], v[3]);
            float *ta = dst + 2 * (i / ow) * g.w + 2 * (i % ow);
            float *tb = dst + 2 * ((i + 4) / ow) * g.w + 2 * ((i + 4) % ow);
            _mm256_storeu_ps(ta, _mm256_permute2f128_ps(topLo, topHi, 0x20));
            _mm256_storeu_ps(tb, _mm256_permute2f128_ps(topLo, topHi, 0x31));
            _mm256_storeu_ps(ta + g.w, _mm256_permute2f128_ps(bottomLo, bottomHi, 0x20));
            _mm256_storeu_ps(tb + g.w, _mm256_permute2f128_ps(bottomLo, bottomHi, 0x31));
        }
    }
}

__attribute__((target("avx2"))) void backwardRows(const float *gradOut, const std::uint8_t *route,
    float *gradIn, const Geometry &g, float scale, std::int64_t begin, std::int64_t end)
{
    const std::int64_t oh = g.oh(), ow = g.ow(), c = g.c;
    for (std::int64_t row = begin; row < end; ++row) {
        const std::int64_t n = row / oh, y = row % oh;
        for (std::int64_t x = 0; x < ow; ++x) {
            float *a = gradIn + ((n * g.h + 2 * y) * g.w + 2 * x) * c, *d = a + g.w * c;
            for (std::int64_t k = 0; k < c; k += 8) {
                const std::int64_t o = (row * ow + x) * c + k;
                __m256 v[4];
                unpool(gradOut + o, route + o, scale, v);
                _mm256_storeu_ps(a + k, v[0]);
                _mm256_storeu_ps(a + c + k, v[1]);
                _mm256_storeu_ps(d + k, v[2]);
                _mm256_storeu_ps(d + c + k, v[3]);
            }
        }
    }
}

bool available()
{
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}

} // namespace avx2
#endif

std::atomic<bool> g_vectorKernels { true };

bool useAvx2(const Geometry &g, torch::ScalarType type)
{
#if SCALELAB_AVX2
    return type == torch::kFloat && g_vectorKernels.load(std::memory_order_relaxed) && avx2::available()
        && (avx2::planesFit(g) || avx2::rowsFit(g));
#else
    (void)g;
    (void)type;
    return false;
#endif
}

// Tasks: planes of [N, C, H, W], output rows of [N, H, W, C].
std::int64_t taskCount(const Geometry &g)
{
    return g.channelsLast ? g.n * g.oh() : g.n * g.c;
}

std::optional<Geometry> fusedGeometry(const torch::Tensor &x)
{
    // The dropout hash numbers outputs with 32 bits.
    if (!x.device().is_cpu() || x.dim() != 4 || x.size(2) % 2 != 0 || x.size(3) % 2 != 0 || x.numel() == 0
        || x.numel() / 4 > std::int64_t(0xffffffff)
        || (x.scalar_type() != torch::kFloat && x.scalar_type() != torch::kBFloat16))
        return std::nullopt;
    const bool channelsLast = !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
    if (!channelsLast && !x.is_contiguous())
        return std::nullopt;
    return Geometry { x.size(0), x.size(1), x.size(2), x.size(3), channelsLast };
}

at::MemoryFormat memoryFormat(const Geometry &g)
{
    return g.channelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
}

// ATen's dropout multiplies by 1 / (1 - p) computed in the tensor's own type.
float dropoutScale(double p, bool training, torch::ScalarType type)
{
    if (!training || p == 0.0)
        return 1.0f;
    const float scale = 1.0f / float(1.0 - p);
    return type == torch::kBFloat16 ? float(c10::BFloat16(scale)) : scale;
}

// The output and one route byte per output.
std::pair<torch::Tensor, torch::Tensor> fusedForward(
    const torch::Tensor &x, const Geometry &g, double p, bool training)
{
    torch::Tensor out
        = torch::empty({ g.n, g.c, g.oh(), g.ow() }, x.options().memory_format(memoryFormat(g)));
    torch::Tensor route = torch::empty({ out.numel() }, x.options().dtype(torch::kUInt8));
    Dropout dropout;
    if (training && p > 0.0) {
        dropout.seed = drawSeed();
        const double limit = std::floor((1.0 - p) * 4294967296.0) - 1.0; // kept: hash < (1 - p) * 2^32
        dropout.keepLimit = limit < 0.0 ? 0u : std::uint32_t(limit);
        dropout.scale = dropoutScale(p, training, x.scalar_type());
    }
    std::uint8_t *routeData = route.data_ptr<std::uint8_t>();
    const bool vector = useAvx2(g, x.scalar_type());
    at::parallel_for(0, taskCount(g), 1, [&](std::int64_t begin, std::int64_t end) {
#if SCALELAB_AVX2
        if (vector) {
            (g.channelsLast ? avx2::forwardRows : avx2::forwardPlanes)(
                x.data_ptr<float>(), out.data_ptr<float>(), routeData, g, dropout, begin, end);
            return;
        }
#endif
        if (x.scalar_type() == torch::kFloat)
            forwardFloat(x.data_ptr<float>(), out.data_ptr<float>(), routeData, g, dropout, begin, end);
        else
            forwardBFloat16(x.data_ptr<c10::BFloat16>(), out.data_ptr<c10::BFloat16>(), routeData, g, dropout,
                begin, end);
    });
    return { out, route };
}

struct MaxPoolReluDropoutFunction : torch::autograd::Function<MaxPoolReluDropoutFunction> {
    static torch::Tensor forward(
        torch::autograd::AutogradContext *ctx, const torch::Tensor &x, double p, bool training)
    {
        const Geometry g = *fusedGeometry(x);
        auto [out, route] = fusedForward(x, g, p, training);
        ctx->save_for_backward({ route });
        ctx->saved_data["sizes"] = x.sizes();
        ctx->saved_data["channels_last"] = g.channelsLast;
        ctx->saved_data["scale"] = double(dropoutScale(p, training, x.scalar_type()));
        return out;
    }

    static torch::autograd::variable_list backward(
        torch::autograd::AutogradContext *ctx, torch::autograd::variable_list grads)
    {
        const torch::Tensor route = ctx->get_saved_variables().at(0);
        const auto sizes = ctx->saved_data["sizes"].toIntVector();
        const Geometry g { sizes[0], sizes[1], sizes[2], sizes[3],
            ctx->saved_data["channels_last"].toBool() };
        const torch::Tensor gradOut = grads.at(0).contiguous(memoryFormat(g));
        torch::Tensor gradIn = torch::empty(sizes, gradOut.options().memory_format(memoryFormat(g)));
        const float scale = float(ctx->saved_data["scale"].toDouble());
        const std::uint8_t *routeData = route.data_ptr<std::uint8_t>();
        const bool vector = useAvx2(g, gradOut.scalar_type());
        at::parallel_for(0, taskCount(g), 1, [&](std::int64_t begin, std::int64_t end) {
#if SCALELAB_AVX2
            if (vector) {
                (g.channelsLast ? avx2::backwardRows : avx2::backwardPlanes)(
                    gradOut.data_ptr<float>(), routeData, gradIn.data_ptr<float>(), g, scale, begin, end);
                return;
            }
#endif
            if (gradOut.scalar_type() == torch::kFloat)
                backwardFloat(
                    gradOut.data_ptr<float>(), routeData, gradIn.data_ptr<float>(), g, scale, begin, end);
            else
                backwardBFloat16(gradOut.data_ptr<c10::BFloat16>(), routeData,
                    gradIn.data_ptr<c10::BFloat16>(), g, scale, begin, end);
        });
        return { gradIn, torch::Tensor(), torch::Tensor() };
    }
};

} // namespace

namespace {

// The momentum buffer of `p` in the optimizer's state, or null before its first step (a
// state without a buffer counts as none).
torch::Tensor *momentumBufferOf(torch::optim::SGD &optimizer, const torch::Tensor &p)
{
    const auto it = optimizer.state().find(optimizerStateKey(p));
    if (it == optimizer.state().end() || !it->second)
        return nullptr;
    torch::Tensor &buffer = static_cast<torch::optim::SGDParamState &>(*it->second).momentum_buffer();
    return buffer.defined() ? &buffer : nullptr;
}

void keepMomentumBuffer(torch::optim::SGD &optimizer, const torch::Tensor &p, torch::Tensor buffer)
{
    auto state = std::make_unique<torch::optim::SGDParamState>();
    state->momentum_buffer(std::move(buffer));
    optimizer.state()[optimizerStateKey(p)] = std::move(state);
}

// Whether two tensors of one shape put each element at the same offset. Strides of
// dimensions of size 1 do not count: a 1x1 convolution's weight, [128, 64, 1, 1], may be
// (64, 1, 1, 1) while its gradient is (64, 1, 64, 64).
bool sameLayout(const torch::Tensor &a, const torch::Tensor &b)
{
    if (a.sizes() != b.sizes())
        return false;
    for (std::int64_t d = 0; d < a.dim(); ++d)
        if (a.size(d) > 1 && a.stride(d) != b.stride(d))
            return false;
    return true;
}

// A float CPU parameter whose gradient has its layout (contiguous, or channels-last for a
// convolution's weight in a channels-last run): one loop over the three arrays in memory order.
bool fusableOnCpu(const torch::Tensor &p)
{
    const auto &g = p.grad();
    return p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_non_overlapping_and_dense()
        && g.device().is_cpu() && g.scalar_type() == torch::kFloat && sameLayout(g, p);
}

void fusedCpuStep(torch::optim::SGD &optimizer, const torch::optim::SGDOptions &options,
    const std::vector<torch::Tensor> &params)
{
    const float lr = float(options.lr()), decay = float(options.weight_decay()),
                momentum = float(options.momentum()), dampening = float(1.0 - options.dampening());
    for (const auto &p : params) {
        float *w = p.data_ptr<float>();
        const float *g = p.grad().data_ptr<float>();
        float *v = nullptr;
        bool first = false;
        if (momentum != 0.0f) {
            torch::Tensor *buffer = momentumBufferOf(optimizer, p);
            if (!buffer) {
                keepMomentumBuffer(optimizer, p, torch::empty_like(p)); // p's layout
                buffer = momentumBufferOf(optimizer, p);
                first = true;
            } else if (!sameLayout(*buffer, p)) {
                *buffer = torch::empty_like(p).copy_(*buffer); // a checkpoint's, in p's layout
            }
            v = buffer->data_ptr<float>();
        }
        at::parallel_for(0, p.numel(), 1 << 16, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) {
                const float d = g[i] + decay * w[i];
                float step = d;
                if (v) {
                    step = first ? d : v[i] * momentum + dampening * d;
                    v[i] = step;
                }
                w[i] = w[i] + -lr * step;
            }
        });
    }
}

} // namespace

void sgdStepMultiTensor(torch::optim::SGD &optimizer)
{
    torch::NoGradGuard noGrad;
    for (auto &group : optimizer.param_groups()) {
        const auto &options = static_cast<const torch::optim::SGDOptions &>(group.options());
        std::vector<torch::Tensor> params, grads;
        for (const auto &p : group.params())
            if (p.grad().defined()) {
                params.push_back(p);
                grads.push_back(p.grad());
            }
        if (params.empty())
            continue;
        std::vector<torch::Tensor> d
            = options.weight_decay() != 0 ? at::_foreach_add(grads, params, options.weight_decay()) : grads;
        if (options.momentum() != 0) {
            // A parameter's first step starts its momentum at d; the others are updated in one go.
            std::vector<torch::Tensor> buffers, updated, from;
            for (std::size_t i = 0; i < params.size(); ++i) {
                if (torch::Tensor *buffer = momentumBufferOf(optimizer, params[i])) {
                    updated.push_back(*buffer);
                    from.push_back(d[i]);
                    buffers.push_back(*buffer);
                } else {
                    buffers.push_back(torch::clone(d[i]).detach());
                    keepMomentumBuffer(optimizer, params[i], buffers.back());
                }
            }
            if (!updated.empty()) {
                at::_foreach_mul_(updated, options.momentum());
                at::_foreach_add_(updated, from, 1.0 - options.dampening());
            }
            d = options.nesterov() ? at::_foreach_add(d, buffers, options.momentum()) : buffers;
        }
        at::_foreach_add_(params, d, -options.lr());
    }
}

bool sgdStepIsFused(torch::optim::SGD &optimizer)
{
    bool fused = true;
    for (const auto &group : optimizer.param_groups()) {
        fused = fused && !static_cast<const torch::optim::SGDOptions &>(group.options()).nesterov();
        for (const auto &p : group.params())
            fused = fused && (!p.grad().defined() || fusableOnCpu(p));
    }
    return fused;
}

void sgdStep(torch::optim::SGD &optimizer)
{
    if (!sgdStepIsFused(optimizer)) {
        sgdStepMultiTensor(optimizer);
        return;
    }
    torch::NoGradGuard noGrad;
    for (auto &group : optimizer.param_groups()) {
        std::vector<torch::Tensor> params;
        for (const auto &p : group.params())
            if (p.grad().defined())
                params.push_back(p);
        fusedCpuStep(optimizer, static_cast<const torch::optim::SGDOptions &>(group.options()), params);
    }
}

void setFusedVectorKernels(bool enabled)
{
    g_vectorKernels.store(enabled, std::memory_order_relaxed);
}

torch::Tensor maxPoolReluDropoutReference(const torch::Tensor &x, double p, bool training)
{
    return torch::dropout(torch::max_pool2d(torch::relu(x), 2), p, training);
}

torch::Tensor maxPoolReluDropout(const torch::Tensor &x, double p, bool training)
{
    const auto g = fusedGeometry(x);
    if (!g)
        return maxPoolReluDropoutReference(x, p, training);
    if (torch::GradMode::is_enabled() && x.requires_grad())
        return MaxPoolReluDropoutFunction::apply(x, p, training);
    return fusedForward(x, *g, p, training).first;
}

} // namespace scalelab::trainer
