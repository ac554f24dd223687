#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, Release build) and runs the
# main job on its embedded default: `talaria serve`, the OpenAI-compatible
# gateway in front of the paper's TP=8 three-model server, emulated by the
# sim engine, on http://127.0.0.1:8080 until Ctrl-C. Extra arguments go to
# `talaria serve` (e.g. --port 9000, --config FILE). The paper's replay:
# build/talaria replay.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/talaria serve "$@"
