// SHA-256 (FIPS 180-4), for checkpoint manifests and data set digests. Torch-free, Qt-free.
// Where the CPU has the x86 SHA extensions (Intel since Ice Lake and Goldmont, AMD since
// Zen) the compression runs on them, about five times faster than the portable code: the
// worker and the agent hash every checkpoint they write, copy or verify.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace scalelab::common {

class Sha256 {
public:
    Sha256();
    void update(const void *data, std::size_t size);
    std::string hexDigest(); // finalises; call once

    // Hex digest of a file's contents; empty string when it cannot be read.
    static std::string ofFile(const std::string &path);
    static std::string ofBytes(const void *data, std::size_t size);

    // The compression in use, for tests and benchmarks: the SHA extensions where the CPU
    // has them, else the portable code. setKernel(ShaExtensions) is false on a CPU
    // without them. Process-wide; not for use while another thread hashes.
    enum class Kernel { Portable, ShaExtensions };
    static Kernel kernel();
    static bool setKernel(Kernel kernel);

private:
    void compress(const std::uint8_t *blocks, std::size_t count);
    std::uint32_t m_h[8];
    std::uint8_t m_buffer[64];
    std::size_t m_used = 0;
    std::uint64_t m_bits = 0;
};

} // namespace scalelab::common
