#!/usr/bin/env bash
# SHA-256 throughput of common/sha256.cpp (every checkpoint's MANIFEST, the agent's copies
# and verifications) with each compression this CPU has, beside coreutils' sha256sum and
# OpenSSL's on the same 256 MB, in one run. Prints MB/s; compare ratios, not figures
# across machines.
#   bench/sha256.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/bench.cpp" <<'CPP'
#include "sha256.h"
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>
using scalelab::common::Sha256;
int main(int, char **argv)
{
    std::ifstream in(argv[1], std::ios::binary);
    const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const auto kernel : { Sha256::Kernel::Portable, Sha256::Kernel::ShaExtensions }) {
        if (!Sha256::setKernel(kernel)) {
            std::printf("%-28s not on this CPU\n", "ScaleLab, SHA extensions");
            continue;
        }
        double best = 1e9;
        std::string digest;
        for (int i = 0; i < 3; ++i) {
            const auto start = std::chrono::steady_clock::now();
            digest = Sha256::ofBytes(data.data(), data.size());
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        std::printf("%-28s %6.0f MB/s  %s\n",
            kernel == Sha256::Kernel::Portable ? "ScaleLab, portable" : "ScaleLab, SHA extensions",
            double(data.size()) / best / 1e6, digest.substr(0, 16).c_str());
    }
}
CPP
g++ -O2 -std=c++20 -I"$root/common" "$work/bench.cpp" "$root/common/sha256.cpp" -o "$work/bench"
head -c $((256 << 20)) /dev/urandom >"$work/data"
"$work/bench" "$work/data"
peer() { # NAME COMMAND...: the best of three
    local best=1e9 t
    for _ in 1 2 3; do
        t=$( { /usr/bin/time -f %e "${@:2}" "$work/data" >/dev/null; } 2>&1 )
        best=$(awk -v a="$best" -v b="$t" 'BEGIN { print (b < a) ? b : a }')
    done
    awk -v n="$1" -v t="$best" 'BEGIN { printf "%-28s %6.0f MB/s  (whole process)\n", n, 256 * 1.048576 / t }'
}
peer "coreutils sha256sum" sha256sum
command -v openssl >/dev/null && peer "OpenSSL dgst -sha256" openssl dgst -sha256
