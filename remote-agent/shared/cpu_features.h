// What the CPU can do, read from /proc/cpuinfo. Torch-free and Qt-free, so the agent
// (validating requests) and the worker (validating options) agree.
#pragma once

namespace scalelab::trainer::cpu {

// AVX-512 BF16 or AMX: bf16 autocast runs natively.
bool hasBf16();

} // namespace scalelab::trainer::cpu
