#!/usr/bin/env bash
# Installs what ssmc needs from Debian 12 (only what is missing) and builds it in build/.
# Usage: tools/setup.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# libclang-rt-14-dev: libFuzzer and clang 14's sanitizer runtimes (tools/fuzz.sh); clang-14 only
# recommends it, and recommendations are not installed here. libtorch-dev: LibTorch, for the
# runtime's nn and vi rooms (a module that `vi` loads; no executable links it), and OpenBLAS, the
# BLAS its matrix products then run in (Debian's default, the reference BLAS, is 3x slower there);
# the serial build: its threaded one starts threads that LeakSanitizer and --threads do not expect.
# lld: ssmc links the executables it builds with it when it is there (half GNU ld's time).
packages=(cmake g++ ninja-build llvm-14-dev clang-14 libclang-rt-14-dev libboost-dev libeigen3-dev
          catch2 libfmt-dev libcli11-dev nlohmann-json3-dev librandom123-dev zlib1g-dev libzstd-dev
          libtinfo-dev libxml2-dev libedit-dev libffi-dev python3 clang-format liblbfgspp-dev libtorch-dev
          libopenblas0-serial lld)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j2
