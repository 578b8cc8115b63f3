#!/usr/bin/env bash
# Bundling speed against the bar of docs/ARCHITECTURE.md §8: `ultraplan bundle` must take at most
# 0.5x the wall time of `git archive --format=tar HEAD | gzip -1` on the same repository.
# Beside it, the zstd bundle (`ultraplan bundle --encoding zstd`, what a client sends to a server
# that accepts zstd) against `tar | zstd -1 -T0` over the same tracked files: its time and size,
# and both ratios (informational; only the gzip bar sets the exit status).
#
# Before timing anything it checks that both archives hold the same files: every difference must
# be one the bundler explains (a secret or an escaping link it reported as skipped, an untracked
# or edited file that git archive cannot see). Unexplained differences are listed and the script
# exits 1; a ratio over the bar exits 2.
#
# Usage: bench/bundle.sh [REPO]
#   REPO  a git repository with at least one commit. Default: a git copy of the cargo registry
#         sources (~/.cargo/registry/src), made once under $BENCH_DIR (default /tmp/ultraplan-bench).
# Env:    RUNS (default 5), LEVEL (ultraplan's gzip level, default 1), ZSTD_LEVEL (ultraplan's
#         zstd level, default 3 as the client uses).
# Uses hyperfine when installed (apt-get install -y hyperfine), else a `date +%s%N` loop; needs
# the zstd command (apt-get install -y zstd).
# Prints the file-set check, the median wall times, the output sizes and the ratios.
set -euo pipefail

runs=${RUNS:-5}
level=${LEVEL:-1}
zstd_level=${ZSTD_LEVEL:-3}
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
zstd_cmd="'$bin' bundle --encoding zstd --level $zstd_level --out '$out/ultraplan.tar.zst' '$repo' > /dev/null"
tar_zstd_cmd="git -C '$repo' ls-files -z | tar -C '$repo' --null -T - -cf - | zstd -q -1 -T0 > '$out/tar.tar.zst'"

# Same files on both sides, or a reason for each difference.
bash -c "$git_cmd"
"$bin" bundle --level "$level" --out "$out/ultraplan.tar.gz" "$repo" >"$out/report.json"
tar -tzf "$out/git.tar.gz" >"$out/git.list"
tar -tzf "$out/ultraplan.tar.gz" >"$out/ours.list"
python3 - "$out/git.list" "$out/ours.list" "$out/report.json" <<'PY' || exit 1
import json, sys
def entries(path):
    # Directories are implied by their files; compare files and links only.
    return {l.rstrip("\n").removeprefix("./") for l in open(path) if l.strip() and not l.endswith("/\n")}
git, ours = entries(sys.argv[1]), entries(sys.argv[2])
report = json.load(open(sys.argv[3]))
skipped = {s["path"]: s["reason"] for s in report.get("skipped", [])}
local = set(report["manifest"]["untracked_files"]) | set(report["manifest"]["dirty_files"])
only_git = sorted(git - ours)
only_ours = sorted(ours - git)
explained_git = [p for p in only_git if p in skipped or p in local]
explained_ours = [p for p in only_ours if p in local]
bad = [f"only in git archive: {p}" for p in only_git if p not in skipped and p not in local]
bad += [f"only in ultraplan's bundle: {p}" for p in only_ours if p not in local]
print(f"file sets: {len(git & ours)} in both; {len(explained_git)} only in git archive "
      f"(left out by the bundler), {len(explained_ours)} only in the bundle (untracked/edited)")
for p in explained_git[:20]:
    print(f"  left out: {p} ({skipped.get(p, 'edited or deleted locally')})")
for p in explained_ours[:20]:
    print(f"  added: {p} (untracked or edited)")
if bad:
    print(f"FILE SET MISMATCH ({len(bad)} unexplained):")
    for line in bad[:50]:
        print("  " + line)
    sys.exit(1)
PY

files=$(git -C "$repo" ls-files | wc -l)
echo "repository: $repo ($files tracked files, $(du -sh --exclude=.git "$repo" | cut -f1)), $(nproc) cores" >&2

# The zstd bundle holds the very tar stream the gzip one does.
cmp <(gzip -dc "$out/ultraplan.tar.gz") <(bash -c "$zstd_cmd" && zstd -dcq "$out/ultraplan.tar.zst") ||
  { echo "the zstd bundle's tar differs from the gzip bundle's" >&2; exit 1; }

median_with_hyperfine() {
  hyperfine --style basic --warmup 1 --runs "$runs" --export-json "$out/h.json" \
    -n "git archive | gzip -1" "$git_cmd" -n "ultraplan bundle" "$ours_cmd" \
    -n "ultraplan bundle --encoding zstd" "$zstd_cmd" -n "tar | zstd -1 -T0" "$tar_zstd_cmd" >&2
  python3 - "$out/h.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
print(" ".join(f"{r['median']:.4f}" for r in results))
PY
}

median_with_loop() {
  local cmd start end times medians=()
  for cmd in "$git_cmd" "$ours_cmd" "$zstd_cmd" "$tar_zstd_cmd"; do
    bash -c "$cmd" # warm-up
    times=()
    for _ in $(seq "$runs"); do
      start=$(date +%s%N)
      bash -c "$cmd"
      end=$(date +%s%N)
      times+=($((end - start)))
    done
    medians+=("$(python3 -c "import statistics, sys; print(f'{statistics.median(map(int, sys.argv[1:])) / 1e9:.4f}')" "${times[@]}")")
  done
  echo "${medians[*]}"
}

if command -v hyperfine >/dev/null; then
  read -r git_s ours_s zstd_s tar_zstd_s < <(median_with_hyperfine)
else
  read -r git_s ours_s zstd_s tar_zstd_s < <(median_with_loop)
fi

sizes=()
for f in git.tar.gz ultraplan.tar.gz ultraplan.tar.zst tar.tar.zst; do sizes+=("$(stat -c %s "$out/$f")"); done
python3 - "$git_s" "$ours_s" "$zstd_s" "$tar_zstd_s" "${sizes[@]}" "$runs" <<'PY'
import sys
git_s, ours_s, zstd_s, tz_s = map(float, sys.argv[1:5])
git_b, ours_b, zstd_b, tz_b = map(int, sys.argv[5:9])
runs = sys.argv[9]
ratio = ours_s / git_s
print(f"medians of {runs} runs")
print(f"git archive | gzip -1          : {git_s:.3f} s, {git_b / 1e6:.1f} MB")
print(f"ultraplan bundle (gzip)        : {ours_s:.3f} s, {ours_b / 1e6:.1f} MB")
print(f"tar | zstd -1 -T0              : {tz_s:.3f} s, {tz_b / 1e6:.1f} MB")
print(f"ultraplan bundle (zstd)        : {zstd_s:.3f} s, {zstd_b / 1e6:.1f} MB")
print(f"ratio (ultraplan / git)        : {ratio:.2f}  (bar: <= 0.50) -> {'PASS' if ratio <= 0.5 else 'FAIL'}")
print(f"zstd bundle / git archive      : {zstd_s / git_s:.2f} time")
print(f"zstd bundle / tar | zstd -1    : {zstd_s / tz_s:.2f} time, {zstd_b / tz_b:.3f} size")
sys.exit(0 if ratio <= 0.5 else 2)
PY
