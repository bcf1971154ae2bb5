#!/usr/bin/env bash
# Installs ScaleLab's build dependencies from Debian (idempotent, non-interactive, as
# root or through sudo) and builds everything into ./build. Sourced by run.sh/test.sh.
set -euo pipefail

SCALELAB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCALELAB_BUILD="${SCALELAB_BUILD:-$SCALELAB_ROOT/build}"

SCALELAB_PACKAGES=(
  cmake ninja-build g++ pkg-config
  lld                           # links in a fifth of GNU ld's time (cmake/ScaleLabSettings.cmake)
  libtorch-dev libgloo-dev libopenblas0-pthread   # without OpenBLAS, torch is ~30x slower
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev libxkbcommon-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  qt6-svg-dev libsqlite3-dev    # chart export as SVG; the study journal
  zlib1g-dev openssl            # the agent unpacks CIFAR-10; tests make TLS certificates
  libssl-dev                    # the agent checks its TLS certificate and key before serving
  prometheus-cpp-dev            # the agent's Prometheus metrics (--metrics-port)
  iproute2                      # tst_cluster: hosts made of network namespaces (ip, ss, tc)
)

# Only for the tests (scripts/test.sh): tst_slurm starts a real Slurm; tst_packaging makes
# the .debs (dpkg-shlibdeps), checks the unit (systemd-analyze) and installs them into a
# fresh Debian root (debootstrap); tst_reports_formats and tst_reports_tune read their PDFs'
# text back (pdftotext);
# tst_tensorboard reads the TensorBoard event files back in Python (python3-protobuf);
# tst_prometheus scrapes an agent with a real Prometheus and checks its output (promtool);
# tst_torchscript trains modules scripted by PyTorch and torchvision; tst_format checks the
# tree against .clang-format.
SCALELAB_TEST_PACKAGES=(slurm-wlm munge dpkg-dev systemd debootstrap poppler-utils python3-protobuf
  prometheus python3-torch python3-torchvision clang-format)

# For scripts/fuzz.sh (and so for the tests, whose fuzz label runs it): clang's libFuzzer and
# sanitizer runtimes (libclang-rt is merely recommended by clang, and recommendations are not
# installed here).
SCALELAB_FUZZ_PACKAGES=(clang libclang-rt-14-dev libfuzzer-14-dev)

# Installs the packages named, or SCALELAB_PACKAGES when none are.
scalelab_install_dependencies() {
  local wanted=("$@") missing=()
  [ ${#wanted[@]} -gt 0 ] || wanted=("${SCALELAB_PACKAGES[@]}")
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all Debian packages present"
    return 0
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo -n)   # never prompt: CI has no standard input
      if ! sudo -n true 2>/dev/null; then
        echo "setup: need root to install: ${missing[*]}" >&2
        echo "setup: run 'sudo apt-get install ${missing[*]}' once, or run this as root." >&2
        return 1
      fi
    else
      echo "setup: not root and no sudo; install these Debian packages first: ${missing[*]}" >&2
      return 1
    fi
  fi
  echo "setup: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "${missing[@]}"
}

scalelab_build() {
  local jobs
  jobs="${SCALELAB_JOBS:-$(nproc)}"
  cmake -S "$SCALELAB_ROOT" -B "$SCALELAB_BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE="${SCALELAB_BUILD_TYPE:-RelWithDebInfo}" "$@"
  cmake --build "$SCALELAB_BUILD" -j "$jobs"
}
