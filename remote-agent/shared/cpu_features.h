// What the CPU can do, read from /proc/cpuinfo. Torch-free and Qt-free, so the agent
// (validating requests) and the worker (validating options) agree.
#pragma once

namespace scalelab::trainer::cpu {

// AVX-512 BF16 or AMX: bf16 autocast runs natively.
bool hasBf16();

// Whether /proc/cpuinfo's flags line lists every one of `flags` (" avx2 fma", say).
bool hasFlags(const char *flags);

} // namespace scalelab::trainer::cpu
