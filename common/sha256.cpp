#include "sha256.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace scalelab::common {

namespace {
constexpr std::uint32_t kK[64]
    = { 0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
          0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
          0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
          0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
          0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
          0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
          0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
          0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2 };

inline std::uint32_t rotr(std::uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

void compressPortable(std::uint32_t *state, const std::uint8_t *p, std::size_t count)
{
    for (; count > 0; --count, p += 64) {
        std::uint32_t w[64];
        for (int i = 0; i < 16; ++i)
            w[i] = std::uint32_t(p[4 * i]) << 24 | std::uint32_t(p[4 * i + 1]) << 16
                | std::uint32_t(p[4 * i + 2]) << 8 | std::uint32_t(p[4 * i + 3]);
        for (int i = 16; i < 64; ++i) {
            const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::uint32_t a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5],
                      g = state[6], h = state[7];
        for (int i = 0; i < 64; ++i) {
            const std::uint32_t t1
                = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kK[i] + w[i];
            const std::uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
        }
        state[0] += a, state[1] += b, state[2] += c, state[3] += d;
        state[4] += e, state[5] += f, state[6] += g, state[7] += h;
    }
}

#if defined(__x86_64__)
// The SHA extensions keep the state as ABEF and CDGH and do two rounds per sha256rnds2;
// sha256msg1/msg2 extend the message schedule four words at a time (Intel's "New
// Instructions Supporting the Secure Hash Algorithm on Intel Architecture Processors").
__attribute__((target("sha,sse4.1,ssse3"))) void compressShaExtensions(
    std::uint32_t *state, const std::uint8_t *p, std::size_t count)
{
    const __m128i byteSwap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(state)), 0xB1); // CDAB
    __m128i state1
        = _mm_shuffle_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(state + 4)), 0x1B); // EFGH
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8); // ABEF
    state1 = _mm_blend_epi16(state1, tmp, 0xF0); // CDGH
    for (; count > 0; --count, p += 64) {
        const __m128i abefSaved = state0, cdghSaved = state1;
        __m128i message[4];
        for (int i = 0; i < 4; ++i)
            message[i]
                = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16 * i)), byteSwap);
        // Sixteen groups of four rounds; group g uses schedule words 4g..4g+3.
        for (int g = 0; g < 16; ++g) {
            __m128i &current = message[g % 4];
            __m128i &next = message[(g + 1) % 4];
            __m128i &previous = message[(g + 3) % 4];
            __m128i words
                = _mm_add_epi32(current, _mm_loadu_si128(reinterpret_cast<const __m128i *>(kK + 4 * g)));
            state1 = _mm_sha256rnds2_epu32(state1, state0, words);
            if (g >= 3 && g <= 14) // words 4(g+1).. of the schedule
                next = _mm_sha256msg2_epu32(
                    _mm_add_epi32(next, _mm_alignr_epi8(current, previous, 4)), current);
            words = _mm_shuffle_epi32(words, 0x0E);
            state0 = _mm_sha256rnds2_epu32(state0, state1, words);
            if (g >= 1 && g <= 12)
                previous = _mm_sha256msg1_epu32(previous, current);
        }
        state0 = _mm_add_epi32(state0, abefSaved);
        state1 = _mm_add_epi32(state1, cdghSaved);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B); // FEBA
    state1 = _mm_shuffle_epi32(state1, 0xB1); // DCHG
    _mm_storeu_si128(reinterpret_cast<__m128i *>(state), _mm_blend_epi16(tmp, state1, 0xF0)); // DCBA
    _mm_storeu_si128(reinterpret_cast<__m128i *>(state + 4), _mm_alignr_epi8(state1, tmp, 8)); // HGFE
}

bool cpuHasShaExtensions()
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSSE3) || !(c & bit_SSE4_1))
        return false;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
}
#else
void compressShaExtensions(std::uint32_t *, const std::uint8_t *, std::size_t)
{ }
bool cpuHasShaExtensions()
{
    return false;
}
#endif

const bool kShaExtensions = cpuHasShaExtensions();
std::atomic<bool> useShaExtensions { kShaExtensions };
} // namespace

Sha256::Kernel Sha256::kernel()
{
    return useShaExtensions.load(std::memory_order_relaxed) ? Kernel::ShaExtensions : Kernel::Portable;
}

bool Sha256::setKernel(Kernel kernel)
{
    if (kernel == Kernel::ShaExtensions && !kShaExtensions)
        return false;
    useShaExtensions.store(kernel == Kernel::ShaExtensions, std::memory_order_relaxed);
    return true;
}

Sha256::Sha256()
    : m_h { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 }
{ }

void Sha256::compress(const std::uint8_t *blocks, std::size_t count)
{
    if (useShaExtensions.load(std::memory_order_relaxed))
        compressShaExtensions(m_h, blocks, count);
    else
        compressPortable(m_h, blocks, count);
}

void Sha256::update(const void *data, std::size_t size)
{
    const auto *p = static_cast<const std::uint8_t *>(data);
    m_bits += std::uint64_t(size) * 8;
    if (m_used > 0) { // top up the partial block first
        const std::size_t n = std::min(size, 64 - m_used);
        std::memcpy(m_buffer + m_used, p, n);
        m_used += n, p += n, size -= n;
        if (m_used < 64)
            return;
        compress(m_buffer, 1);
        m_used = 0;
    }
    compress(p, size / 64); // whole blocks straight from the input
    p += size / 64 * 64;
    size %= 64;
    std::memcpy(m_buffer, p, size);
    m_used = size;
}

std::string Sha256::hexDigest()
{
    const std::uint64_t bits = m_bits;
    const std::uint8_t pad = 0x80;
    update(&pad, 1);
    const std::uint8_t zero = 0;
    while (m_used != 56)
        update(&zero, 1);
    std::uint8_t length[8];
    for (int i = 0; i < 8; ++i)
        length[i] = std::uint8_t(bits >> (56 - 8 * i));
    update(length, 8);
    std::string hex;
    char buf[9];
    for (std::uint32_t v : m_h) {
        std::snprintf(buf, sizeof buf, "%08x", v);
        hex += buf;
    }
    return hex;
}

std::string Sha256::ofFile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return {};
    Sha256 sha;
    std::vector<char> buffer(1 << 16);
    while (in) {
        in.read(buffer.data(), std::streamsize(buffer.size()));
        sha.update(buffer.data(), std::size_t(in.gcount()));
    }
    return sha.hexDigest();
}

std::string Sha256::ofBytes(const void *data, std::size_t size)
{
    Sha256 sha;
    sha.update(data, size);
    return sha.hexDigest();
}

} // namespace scalelab::common
