#!/usr/bin/env bash
# Grep/Glob tools vs ripgrep (docs/ARCHITECTURE.md §8: "Grep/Glob tools within 1.5× of rg on the
# same tree").
#
# Usage: bench/grep_glob.sh [TREE]        (default TREE: /root/.cargo/registry/src)
# Env:   RUNS (default 20), WARMUP (default 3), MAX_RATIO (default 1.5)
#
# For each case it first checks that the agent's tool and rg find exactly the same results —
# the same paths (Glob, files_with_matches), the same `path:count` (count) or the same
# `path:line` of every matching line (content) — then times both with hyperfine (output through
# a pipe, so rg cannot take its stdout-is-/dev/null shortcut) and prints the ratio of the median
# wall times, ours/rg (medians: small VMs have noisy outliers). rg runs with the tools' walking
# rules: hidden files included (--hidden), .gitignore honoured even without a .git directory
# (--no-require-git), and `.git/` never searched (-g '!.git'); both use every core. Exits 1 on a
# result mismatch (printing the first differences), 2 when a ratio exceeds MAX_RATIO.
#
# Needs: cargo, rg, hyperfine, jq, python3 (apt-get install -y ripgrep hyperfine jq).
set -euo pipefail

TREE=$(cd "${1:-/root/.cargo/registry/src}" && pwd)
RUNS=${RUNS:-20}
WARMUP=${WARMUP:-3}
MAX_RATIO=${MAX_RATIO:-1.5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
BIN="$REPO/target/release/examples/ultraplan-tool-bench"
RG=(rg --hidden --no-require-git -g '!.git')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for tool in cargo rg hyperfine jq; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 3; }
done

echo "building the bench binary (release)…" >&2
(cd "$REPO" && cargo build --quiet --release -p ultraplan-agent --example ultraplan-tool-bench)

# rg_list MODE RG_ARGS…: rg's results in the tool's --list format, sorted. rg runs inside the
# tree so paths come out relative to it; -0 ends each path with NUL, so any name survives.
rg_list() {
  local mode=$1
  shift
  # rg exits 1 when nothing matches; that is a result, not a failure.
  { (cd "$TREE" && "${RG[@]}" -0 "$@") || [[ $? == 1 ]]; } | python3 -c '
import sys
mode = sys.argv[1]
COLON = bytes([58])
data = sys.stdin.buffer.read()
out = []
# Path lists (-l, --files) end each path with NUL alone; other modes are lines "path NUL rest".
records = data.split(b"\0") if mode == "paths" else data.split(b"\n")
for record in records:
    if not record:
        continue
    path, _, rest = record.partition(b"\0")
    path = path.decode("utf-8", "surrogateescape").removeprefix("./")
    if mode == "paths":
        out.append(path)
    elif mode == "count":
        out.append(f"{path}:{rest.decode()}")
    else:  # content: the line number before the first colon
        line = rest.split(COLON, 1)[0].decode()
        out.append(f"{path}:{line}")
out.sort()
sys.stdout.buffer.write("".join(p + "\n" for p in out).encode("utf-8", "surrogateescape"))
' "$mode"
}

status=0
i=0
# run_case NAME TOOL JSON_INPUT LIST_MODE RG_ARGS…
# LIST_MODE says how to read rg's output: "paths", "count" (rg -c) or "content" (rg -n).
run_case() {
  local name=$1 tool=$2 input=$3 mode=$4
  shift 4
  i=$((i + 1))
  "$BIN" "$TREE" "$tool" "$input" --list >"$WORK/$i.ours" || { echo "$name: tool failed" >&2; exit 3; }
  rg_list "$mode" "$@" >"$WORK/$i.rg"
  if ! cmp -s "$WORK/$i.ours" "$WORK/$i.rg"; then
    printf '%-24s RESULT MISMATCH: ours %s, rg %s results; first differences:\n' "$name" \
      "$(wc -l <"$WORK/$i.ours")" "$(wc -l <"$WORK/$i.rg")"
    diff "$WORK/$i.ours" "$WORK/$i.rg" | head -20 | sed 's/^/    /'
    status=1
    return
  fi
  local ours
  ours=$(wc -l <"$WORK/$i.ours" | tr -d ' ')
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

run_case 'content literal' Grep '{"pattern":"unsafe","output_mode":"content"}' content -n 'unsafe'
run_case 'content regex' Grep '{"pattern":"impl\\s+\\w+\\s+for\\s+\\w+","output_mode":"content"}' \
  content -n 'impl\s+\w+\s+for\s+\w+'
run_case 'content -i alternation' Grep '{"pattern":"todo|fixme","-i":true,"output_mode":"content"}' \
  content -n -i 'todo|fixme'
run_case 'files_with_matches' Grep '{"pattern":"unsafe"}' paths -l 'unsafe'
run_case 'files_with_matches rare' Grep '{"pattern":"ZXQJ_never_there"}' paths -l 'ZXQJ_never_there'
run_case 'count' Grep '{"pattern":"Result<","output_mode":"count"}' count -c 'Result<'
run_case 'Glob **/*.rs' Glob '{"pattern":"**/*.rs"}' paths --files -g '*.rs'
exit "$status"
