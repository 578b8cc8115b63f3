#!/usr/bin/env bash
# Grep/Glob tools vs ripgrep (DESIGN.md §6: "Grep/Glob tools within 1.5× of rg on the same tree").
#
# Usage: bench/grep_glob.sh [TREE]        (default TREE: /root/.cargo/registry/src)
# Env:   RUNS (default 20), WARMUP (default 3), MAX_RATIO (default 1.5)
#
# For each case it first checks that the agent's tool and rg find exactly the same number of
# results, then times both with hyperfine (output through a pipe, so rg cannot take its
# stdout-is-/dev/null shortcut) and prints the ratio of the median wall times, ours/rg (medians:
# small VMs have noisy outliers). rg runs with the tools' walking rules:
# hidden files included (--hidden) and .gitignore honoured even without a .git directory
# (--no-require-git); both use every core. Exits 1 on a count mismatch, 2 when a ratio exceeds
# MAX_RATIO.
#
# Needs: cargo, rg, hyperfine, jq (apt-get install -y ripgrep hyperfine jq).
set -euo pipefail

TREE=$(cd "${1:-/root/.cargo/registry/src}" && pwd)
RUNS=${RUNS:-20}
WARMUP=${WARMUP:-3}
MAX_RATIO=${MAX_RATIO:-1.5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN="$REPO/target/release/examples/ultraplan-tool-bench"
RG=(rg --hidden --no-require-git)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for tool in cargo rg hyperfine jq; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 3; }
done

echo "building the bench binary (release)…" >&2
(cd "$REPO" && cargo build --quiet --release -p ultraplan-agent --example ultraplan-tool-bench)

rg_count() { # $1 = lines|sum, then rg's arguments
  local mode=$1
  shift
  # rg exits 1 when nothing matches; that is a result, not a failure.
  if [[ $mode == sum ]]; then
    { "${RG[@]}" "$@" "$TREE" || [[ $? == 1 ]]; } | awk -F: '{ s += $NF } END { print s + 0 }'
  else
    { "${RG[@]}" "$@" "$TREE" || [[ $? == 1 ]]; } | wc -l | tr -d ' '
  fi
}

status=0
i=0
# run_case NAME TOOL JSON_INPUT COUNT_MODE RG_ARGS…
# COUNT_MODE says how to count rg's results: "lines" (one per output line) or "sum" (sum of
# rg -c's per-file counts).
run_case() {
  local name=$1 tool=$2 input=$3 mode=$4
  shift 4
  local ours theirs
  ours=$("$BIN" "$TREE" "$tool" "$input")
  theirs=$(rg_count "$mode" "$@")
  if [[ $ours != "$theirs" ]]; then
    printf '%-24s COUNT MISMATCH: ours %s, rg %s\n' "$name" "$ours" "$theirs"
    status=1
    return
  fi
  i=$((i + 1))
  # --ignore-failure: rg exits 1 on no match (counts were checked above).
  hyperfine --style none --output pipe --ignore-failure --warmup "$WARMUP" --runs "$RUNS" \
    --export-json "$WORK/$i.json" \
    -n ours "$(printf '%q ' "$BIN" "$TREE" "$tool" "$input")" \
    -n rg "$(printf '%q ' "${RG[@]}" "$@" "$TREE")" >/dev/null 2>"$WORK/hyperfine.err" ||
    { cat "$WORK/hyperfine.err" >&2; exit 3; }
  local ours_ms rg_ms ratio
  ours_ms=$(jq '.results[] | select(.command == "ours") | .median * 1000' "$WORK/$i.json")
  rg_ms=$(jq '.results[] | select(.command == "rg") | .median * 1000' "$WORK/$i.json")
  ratio=$(jq -n "$ours_ms / $rg_ms")
  printf '%-24s %10.1f %10.1f %8.2f %10s\n' "$name" "$ours_ms" "$rg_ms" "$ratio" "$ours"
  if jq -e -n "$ratio > $MAX_RATIO" >/dev/null && [[ $status == 0 ]]; then
    status=2
  fi
}

printf 'tree: %s (%s files), %s cores, %s\n\n' "$TREE" "$(find "$TREE" -type f | wc -l | tr -d ' ')" \
  "$(nproc)" "$(rg --version | head -1)"
printf '%-24s %10s %10s %8s %10s\n' case ours_ms rg_ms ratio results

run_case 'content literal' Grep '{"pattern":"unsafe","output_mode":"content"}' lines -n 'unsafe'
run_case 'content regex' Grep '{"pattern":"impl\\s+\\w+\\s+for\\s+\\w+","output_mode":"content"}' \
  lines -n 'impl\s+\w+\s+for\s+\w+'
run_case 'content -i alternation' Grep '{"pattern":"todo|fixme","-i":true,"output_mode":"content"}' \
  lines -n -i 'todo|fixme'
run_case 'files_with_matches' Grep '{"pattern":"unsafe"}' lines -l 'unsafe'
run_case 'files_with_matches rare' Grep '{"pattern":"ZXQJ_never_there"}' lines -l 'ZXQJ_never_there'
run_case 'count' Grep '{"pattern":"Result<","output_mode":"count"}' sum -c 'Result<'
run_case 'Glob **/*.rs' Glob '{"pattern":"**/*.rs"}' lines --files -g '*.rs'
exit "$status"
