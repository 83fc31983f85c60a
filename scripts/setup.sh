#!/usr/bin/env bash
# Installs the build and test dependencies from Debian packages (idempotent: only what is
# missing is installed). Needs root (or sudo) the first time.
#   scripts/setup.sh            what the default build and the tests need
#   scripts/setup.sh --onednn   also oneDNN, for builds with -DDS_WITH_ONEDNN=ON
set -euo pipefail

# nodejs, npm: the OpenAI JS SDK test (tests/sdk) installs the `openai` package with npm.
packages=(build-essential cmake ninja-build pkg-config git
          nlohmann-json3-dev libspdlog-dev libhwloc-dev
          libpcre2-dev libicu-dev libsystemd-dev libgtest-dev libgmock-dev libbenchmark-dev
          clang libclang-rt-dev clang-format curl python3
          systemd numactl nginx-light nodejs npm)
# ocl-icd-opencl-dev: Debian's oneDNN CMake package config calls find_package(OpenCL REQUIRED)
# (its GPU runtime is OpenCL), but libdnnl-dev only recommends it, and recommends are not installed.
if [ "${1:-}" = "--onednn" ]; then packages+=(libdnnl-dev ocl-icd-opencl-dev); fi

missing=()
for p in "${packages[@]}"; do
  # NodeSource's nodejs package carries npm itself and conflicts with Debian's npm.
  if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
