// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TensorBoard's
// record framing (TFRecord): crc32c("123456789") = 0xE3069283. Records store it masked,
// ((crc >> 15) | (crc << 17)) + 0xA282EAD8, so that a CRC of bytes holding CRCs is not
// degenerate. Pure functions, any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace scalelab::core {

// The CRC-32C of `size` bytes at `data`; `crc` continues an earlier one (0 to start).
std::uint32_t crc32c(const void *data, std::size_t size, std::uint32_t crc = 0);

// The masked form records carry.
constexpr std::uint32_t maskCrc32c(std::uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

} // namespace scalelab::core
