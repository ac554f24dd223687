#!/usr/bin/env bash
# Installs the Debian 12 packages Talaria builds with (idempotent: only what
# is missing, and apt-get update only then) and builds the tree.
# Usage: scripts/setup.sh [--build-type Release|Sanitize|Debug] [--build-dir DIR] [--deps-only]
#   defaults: --build-type Release --build-dir build
set -euo pipefail

build_type=Release
build_dir=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-type) build_type="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --deps-only) deps_only=1; shift ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake ninja-build pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  libspdlog-dev libfmt-dev libxxhash-dev libhiredis-dev libboost-dev libopenblas-dev libabsl-dev libsimdjson-dev
  libjs-chart.js
  curl
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  echo "setup.sh: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ -n "${deps_only:-}" ]]; then exit 0; fi

cd "$(dirname "$0")/.."
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
