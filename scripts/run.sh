#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, Release build) and runs the
# main job on its embedded default: the statistics of the shipped fixed-replay
# trace. Extra arguments are passed to `talaria trace stats`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/talaria trace stats traces/swe-fixed-30.jsonl "$@"
