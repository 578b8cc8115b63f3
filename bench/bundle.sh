#!/usr/bin/env bash
# Bundling speed against the bar of DESIGN §6: `ultraplan bundle` must take at most 0.5x the wall
# time of `git archive --format=tar HEAD | gzip -1` on the same repository.
#
# Usage: bench/bundle.sh [REPO]
#   REPO  a git repository with at least one commit. Default: a git copy of the cargo registry
#         sources (~/.cargo/registry/src), made once under $BENCH_DIR (default /tmp/ultraplan-bench).
# Env:    RUNS (default 10), LEVEL (ultraplan's gzip level, default 1).
# Uses hyperfine when installed (apt-get install -y hyperfine), else a `date +%s%N` loop.
# Prints the two mean wall times, the output sizes and the ratio ultraplan / git archive.
set -euo pipefail

runs=${RUNS:-10}
level=${LEVEL:-1}
workspace=$(cd "$(dirname "$0")/.." && pwd)

echo "building ultraplan (release)..." >&2
cargo build --quiet --release -p ultraplan --manifest-path "$workspace/Cargo.toml"
target_dir=$(cargo metadata --format-version 1 --no-deps --manifest-path "$workspace/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target_dir/release/ultraplan"

make_registry_repo() {
  local repo=$1
  if [ -d "$repo/.git" ] && git -C "$repo" rev-parse -q --verify HEAD >/dev/null; then
    return
  fi
  echo "making a git copy of the cargo registry sources in $repo..." >&2
  rm -rf "$repo"
  mkdir -p "$repo"
  for src in "$HOME"/.cargo/registry/src/*/; do cp -a "$src." "$repo/"; done
  git -C "$repo" init -q -b main
  git -C "$repo" add -A
  git -C "$repo" -c user.name=bench -c user.email=bench@example.com commit -q -m snapshot
}

repo=${1:-}
if [ -z "$repo" ]; then
  repo="${BENCH_DIR:-/tmp/ultraplan-bench}/registry"
  make_registry_repo "$repo"
fi
repo=$(cd "$repo" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

git_cmd="git -C '$repo' archive --format=tar HEAD | gzip -1 > '$out/git.tar.gz'"
ours_cmd="'$bin' bundle --level $level --out '$out/ultraplan.tar.gz' '$repo' > /dev/null"

files=$(git -C "$repo" ls-files | wc -l)
echo "repository: $repo ($files tracked files, $(du -sh --exclude=.git "$repo" | cut -f1)), $(nproc) cores" >&2

mean_with_hyperfine() {
  hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$out/h.json" \
    -n "git archive | gzip -1" "$git_cmd" -n "ultraplan bundle" "$ours_cmd" >&2
  python3 - "$out/h.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
print(" ".join(f"{r['mean']:.4f}" for r in results))
PY
}

mean_with_loop() {
  local cmd total start end means=()
  for cmd in "$git_cmd" "$ours_cmd"; do
    bash -c "$cmd" # warm-up
    total=0
    for _ in $(seq "$runs"); do
      start=$(date +%s%N)
      bash -c "$cmd"
      end=$(date +%s%N)
      total=$((total + end - start))
    done
    means+=("$(python3 -c "print(f'{$total / $runs / 1e9:.4f}')")")
  done
  echo "${means[*]}"
}

if command -v hyperfine >/dev/null; then
  read -r git_s ours_s < <(mean_with_hyperfine)
else
  read -r git_s ours_s < <(mean_with_loop)
fi

git_bytes=$(stat -c %s "$out/git.tar.gz")
ours_bytes=$(stat -c %s "$out/ultraplan.tar.gz")
python3 - "$git_s" "$ours_s" "$git_bytes" "$ours_bytes" <<'PY'
import sys
git_s, ours_s, git_b, ours_b = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ratio = ours_s / git_s
print(f"git archive | gzip -1 : {git_s:.3f} s, {git_b / 1e6:.1f} MB")
print(f"ultraplan bundle      : {ours_s:.3f} s, {ours_b / 1e6:.1f} MB")
print(f"ratio (ultraplan / git): {ratio:.2f}  (bar: <= 0.50) -> {'PASS' if ratio <= 0.5 else 'FAIL'}")
PY
