// SHA-256 (FIPS 180-4), for checkpoint manifests. Torch-free, Qt-free.
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

private:
    void block(const std::uint8_t *p);
    std::uint32_t m_h[8];
    std::uint8_t m_buffer[64];
    std::size_t m_used = 0;
    std::uint64_t m_bits = 0;
};

} // namespace scalelab::common
