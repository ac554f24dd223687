#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (packages, Release build) and runs the
# main job on its embedded defaults: the paper's TP=8 fixed replay of
# traces/swe-fixed-30.jsonl on configs/tp8-three-models.toml, all five
# ablation configurations. Extra arguments go to `talaria replay`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/talaria replay "$@"
