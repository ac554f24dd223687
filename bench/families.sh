# Sourced by the matrix scripts (policy-matrix.sh, hold-matrix.sh,
# hint-matrix.sh): the setting they share and the workload families' traces.
# Expects to run from the repository root; sets B (the binary, $TALARIA or
# build/talaria), OUT (created; $OUT or the given default), SEED ($SEED or
# 1) and FAMILIES. REPLAY_FLAGS, when set, is passed to every replay (for
# example REPLAY_FLAGS=--lease-replica-check). SESSIONS, when set, is each
# family's session count (the presets' 60 by default): cells of 60 sessions
# move by several percent with any schedule change, and larger ones resolve
# finer differences between policies (docs/policy-matrix.md). LOADS, when
# set, is every replay's --load (all by default: low, medium, high, the
# generated arrival rate halved, as is and quadrupled); for example
# LOADS=util:0.5,util:0.8,util:0.95 offers each testbed a share of what it
# can serve (docs/replay.md), where more sessions give a steady state
# rather than a longer overload.
#   source bench/families.sh build/policy-matrix
B=${TALARIA:-build/talaria}
OUT=${OUT:-$1}
SEED=${SEED:-1}
LOADS=${LOADS:-all}
mkdir -p "$OUT"
FAMILIES="agent-short long-gap-tools chat-paced burst flat-popularity steep-popularity"
TP4_MODELS=qwen3-32b,qwen2.5-32b-instruct,qwen3.5-35b-a3b
TP8_MODELS=qwen3-235b-a22b,glm-5-nvfp4,qwen3.5-122b-a10b

# Writes family $1's traces for the two testbeds: $OUT/$1-tp4.jsonl (the
# TP=4 models) and $OUT/$1-tp8.jsonl (the TP=8 models).
gen_family() {
  local sessions=()
  [[ -n "${SESSIONS:-}" ]] && sessions=(--sessions "$SESSIONS")
  "$B" trace gen --preset "$1" --seed "$SEED" "${sessions[@]}" --models "$TP4_MODELS" -o "$OUT/$1-tp4.jsonl"
  "$B" trace gen --preset "$1" --seed "$SEED" "${sessions[@]}" --models "$TP8_MODELS" -o "$OUT/$1-tp8.jsonl"
}
