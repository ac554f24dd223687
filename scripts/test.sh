#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, Release build, Node.js and the
# openai and playwright-core npm packages for the end-to-end tests, promtool,
# redis-server, nginx and Chromium) and runs every test: the
# Release tree, then the same tests under AddressSanitizer and
# UndefinedBehaviorSanitizer (build type Sanitize, in build-sanitize/).
# Usage: scripts/test.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done

jobs=$(nproc)
scripts/setup.sh
# What only the tests use: Node.js and npm (the end-to-end clients, with
# the openai and playwright-core npm packages), Prometheus' promtool (the
# metrics lint), redis-server and nginx (the gateway-replica deployment
# test), and Chromium (the dashboard and report in a real browser).
test_packages=()
command -v node > /dev/null || test_packages+=(nodejs)
command -v npm > /dev/null || test_packages+=(npm)
command -v promtool > /dev/null || test_packages+=(prometheus)
command -v redis-server > /dev/null || test_packages+=(redis-server)
command -v nginx > /dev/null || [[ -x /usr/sbin/nginx ]] || test_packages+=(nginx)
[[ -x /usr/bin/chromium ]] || test_packages+=(chromium)
if [[ ${#test_packages[@]} -gt 0 ]]; then
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${test_packages[@]}"
fi
(cd tests/e2e && npm install --no-audit --no-fund --no-package-lock --silent)
ctest --test-dir build --output-on-failure -j "$jobs"
if [[ $sanitize -eq 1 ]]; then
  scripts/setup.sh --build-type Sanitize --build-dir build-sanitize
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-sanitize --output-on-failure -j "$jobs"
fi
