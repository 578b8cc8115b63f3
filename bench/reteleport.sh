#!/usr/bin/env bash
# Re-teleport after editing one file, against the bars of docs/ARCHITECTURE.md §8: at most
# 0.05x the wall time of a full teleport, at most 1 % of the full archive's bytes sent, and the
# server's tree byte-identical to a whole bundle's of the same state.
#
# Release builds of the real client and server (`serve --no-local-runner`, so no agent runs
# during the measurements; sessions are created and wait). Each teleport is one
# `ultraplan launch --yes --json --no-watch`, timed from start to exit:
#   full         the whole bundle (ULTRAPLAN_INCREMENTAL=0) to a fresh server;
#   first        the first incremental teleport (no hash cache, no contents on the server);
#   unchanged    again with nothing changed;
#   re-teleport  after appending a line to one file (RUNS times, another file each time).
# Bytes: the full archive's size against what the re-teleport sent (manifest + contents,
# from the client's own log). Each teleport starts once the archive the server writes after
# the previous one is in the blob store, so no background work shares the cores. After the last re-teleport the same state is sent whole and the
# two trees on the server are compared (paths, modes, symlink targets, sha256 of contents);
# a mismatch exits 1, a missed bar exits 2.
#
# Usage: bench/reteleport.sh [REPO]
#   REPO  a git repository. Default: the git copy of the cargo registry sources bench/bundle.sh
#         makes under $BENCH_DIR (default /tmp/ultraplan-bench). Edited files are restored.
# Env:    RUNS (default 5).
set -euo pipefail

runs=${RUNS:-5}
workspace=$(cd "$(dirname "$0")/.." && pwd)
echo "building ultraplan and ultraplan-server (release)..." >&2
cargo build --quiet --release -p ultraplan -p ultraplan-server --manifest-path "$workspace/Cargo.toml"
target_dir=$(cargo metadata --format-version 1 --no-deps --manifest-path "$workspace/Cargo.toml" |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
client="$target_dir/release/ultraplan"
server_bin="$target_dir/release/ultraplan-server"

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
work=$(mktemp -d)
server_pid=""
edited=()
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  for f in "${edited[@]}"; do cp -p "$work/saved/$(echo "$f" | tr / _)" "$repo/$f"; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/saved"

data="$work/data"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
token=$("$server_bin" --data-dir "$data" user add bench | tail -n 1 | tr -d '[:space:]')
# No quota: a materialised bundle counts its unpacked size, and a dozen launches of this corpus
# would pass the default.
ULTRAPLAN_BUNDLE_QUOTA=0 ULTRAPLAN_MODEL=offline ULTRAPLAN_LOG=warn "$server_bin" --data-dir "$data" serve \
  --bind "127.0.0.1:$port" --no-local-runner >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

home="$work/home"
launch() { # launch LABEL [ENV=VALUE...]: prints "seconds bundle_id log"
  local label=$1 start end out
  shift
  start=$(date +%s%N)
  out=$(cd "$repo" && env -i PATH="$PATH" HOME="$home" XDG_STATE_HOME="$home/.state" \
    XDG_CACHE_HOME="$home/.cache" XDG_CONFIG_HOME="$home/.config" \
    ULTRAPLAN_SERVER="http://127.0.0.1:$port" ULTRAPLAN_TOKEN="$token" ULTRAPLAN_LOG=info \
    NO_COLOR=1 "$@" "$client" launch --yes --json --no-watch "ultraplan bench $label" \
    2>"$work/$label.log") || true
  end=$(date +%s%N)
  local bundle
  if ! bundle=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["bundle_id"])' "$out" 2>/dev/null); then
    echo "launch $label failed:" >&2
    cat "$work/$label.log" >&2
    exit 1
  fi
  echo "$(( (end - start) / 1000000 )) $bundle $work/$label.log"
}

settle() { # wait until bundle $1's archive is in the blob store: nothing runs in the background
  for _ in $(seq 600); do
    ls "$data/blobs/bundles/$1".tar.* >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "the archive of $1 never reached the blob store" >&2
  exit 1
}

sent_bytes() { # the manifest and contents bytes of an incremental teleport's log
  python3 - "$1" <<'PY'
import re, sys
text = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
line = next(l for l in text.splitlines() if "incremental bundle sent" in l)
field = lambda name: re.search(name + r"=(\S+)", line).group(1)
print(field("manifest_bytes"), field("contents_bytes"), field("delta"), field("hashed"),
      field("scan_ms"), field("manifest_ms"), field("contents_ms"))
PY
}

echo "repository: $repo ($(git -C "$repo" ls-files | wc -l) tracked files), $(nproc) cores" >&2
read -r full_ms full_id _ < <(launch full ULTRAPLAN_INCREMENTAL=0)
archive=$(stat -c %s "$data/bundles/$full_id".tar.*)
read -r first_ms first_id first_log < <(launch first)
settle "$first_id"
read -r first_manifest first_contents _ _ _ _ _ < <(sent_bytes "$first_log")
read -r unchanged_ms _ unchanged_log < <(launch unchanged)
read -r unchanged_manifest unchanged_contents _ _ _ _ _ < <(sent_bytes "$unchanged_log")

mapfile -t candidates < <(git -C "$repo" ls-files -- '*.rs' | head -n "$runs")
re_ms=() re_bytes=() re_id=""
for i in $(seq 0 $((runs - 1))); do
  f=${candidates[$i]}
  cp -p "$repo/$f" "$work/saved/$(echo "$f" | tr / _)"
  edited+=("$f")
  echo "// edited by bench/reteleport.sh run $i" >>"$repo/$f"
  read -r ms re_id log < <(launch "re$i")
  settle "$re_id"
  read -r manifest contents delta hashed scan_ms manifest_ms contents_ms < <(sent_bytes "$log")
  echo "re-teleport $i: ${ms} ms (walk+hash ${scan_ms} ms, manifest ${manifest_ms} ms, contents ${contents_ms} ms; ${hashed} files hashed), sent $((manifest + contents)) B, delta=$delta" >&2
  re_ms+=("$ms")
  re_bytes+=($((manifest + contents)))
done

# The same state sent whole: its tree must be the re-teleport's.
read -r _ whole_id _ < <(launch whole ULTRAPLAN_INCREMENTAL=0)
python3 - "$data/bundles/$re_id" "$data/bundles/$whole_id" <<'PY' || { echo "TREES DIFFER" >&2; exit 1; }
import hashlib, os, stat, sys
def digest(root):
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                h.update(f"l {rel} {os.readlink(path)}\n".encode())
            elif stat.S_ISDIR(st.st_mode):
                h.update(f"d {rel} {stat.S_IMODE(st.st_mode):o}\n".encode())
            else:
                content = hashlib.sha256(open(path, "rb").read()).hexdigest()
                h.update(f"f {rel} {stat.S_IMODE(st.st_mode):o} {content}\n".encode())
    return h.hexdigest()
a, b = digest(sys.argv[1]), digest(sys.argv[2])
print(f"trees: re-teleport {a[:16]}, whole bundle {b[:16]}: {'identical' if a == b else 'DIFFER'}")
sys.exit(0 if a == b else 1)
PY

python3 - "$full_ms" "$archive" "$first_ms" "$first_manifest" "$first_contents" "$unchanged_ms" \
  "$unchanged_manifest" "$unchanged_contents" "${re_ms[*]}" "${re_bytes[*]}" <<'PY'
import statistics, sys
full_ms, archive, first_ms, first_m, first_c, unch_ms, unch_m, unch_c = map(int, sys.argv[1:9])
re_ms = [int(x) for x in sys.argv[9].split()]
re_bytes = [int(x) for x in sys.argv[10].split()]
ms, sent = statistics.median(re_ms), statistics.median(re_bytes)
time_ratio, byte_ratio = ms / full_ms, sent / archive
print(f"full teleport (whole bundle)     : {full_ms} ms, archive {archive} B")
print(f"first incremental teleport       : {first_ms} ms, sent {first_m + first_c} B "
      f"(manifest {first_m} B, contents {first_c} B)")
print(f"unchanged re-teleport            : {unch_ms} ms, sent {unch_m + unch_c} B")
print(f"re-teleport after one edit       : median {ms:.0f} ms of {re_ms}, sent median {sent:.0f} B")
print(f"time ratio (re-teleport / full)  : {time_ratio:.3f}  (bar: <= 0.05) -> {'PASS' if time_ratio <= 0.05 else 'FAIL'}")
print(f"bytes ratio (sent / archive)     : {byte_ratio:.5f}  (bar: <= 0.01) -> {'PASS' if byte_ratio <= 0.01 else 'FAIL'}")
sys.exit(0 if time_ratio <= 0.05 and byte_ratio <= 0.01 else 2)
PY
