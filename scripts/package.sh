#!/usr/bin/env bash
# Builds the Debian package: build-pkg/ds-server_VERSION_amd64.deb (prefix /usr, config in
# /etc). Install it with `dpkg -i` (docs/deploy.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build=${BUILD_DIR:-build-pkg}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DDS_BUILD_TESTS=OFF -DDS_BUILD_BENCH=OFF
cmake --build "$build" -j"$(nproc)"
(cd "$build" && cpack -G DEB)
ls -1 "$build"/ds-server_*.deb
