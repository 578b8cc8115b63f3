#!/usr/bin/env bash
# Slow uploads against the real server binary: ATTACKERS connections of one user send their
# headers, then one byte a second, while another user uploads a small bundle. Reports the
# server's threads (Threads: of /proc/<pid>/status) before, during and after, what the
# attackers got back, and how the other user's upload fared. No agents run.
#   bench/slow_uploads.sh [ATTACKERS=600] [SECONDS=40]
# ULTRAPLAN_SERVER_BIN picks the binary (default: a debug build of this checkout).
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 65536 2>/dev/null || true
attackers=${1:-600}
seconds=${2:-40}
if [ -z "${ULTRAPLAN_SERVER_BIN:-}" ]; then
  cargo build --quiet -p ultraplan-server
  ULTRAPLAN_SERVER_BIN="$PWD/target/debug/ultraplan-server"
fi
data=$(mktemp -d /tmp/ultraplan-slow.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT
export ULTRAPLAN_DATA_DIR="$data"
mallory=$("$ULTRAPLAN_SERVER_BIN" user add mallory 2>/dev/null)
alice=$("$ULTRAPLAN_SERVER_BIN" user add alice 2>/dev/null)
ULTRAPLAN_RUNNER=process ULTRAPLAN_LOG=warn \
  "$ULTRAPLAN_SERVER_BIN" serve --bind "127.0.0.1:$port" 2>"$data/server.log" &
server_pid=$!
python3 - "$port" "$server_pid" "$mallory" "$alice" "$attackers" "$seconds" <<'PY'
import gzip, hashlib, io, socket, sys, tarfile, threading, time, urllib.request

port, pid, mallory, alice = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
attackers, seconds = int(sys.argv[5]), float(sys.argv[6])

def threads():
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("Threads:"))

for _ in range(200):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
print(f"server threads idle: {threads()}")

# A valid gzip header and a stored deflate block of 64 KiB: the validator keeps waiting.
prefix = bytes([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 0, 0xff, 0xff, 0, 0])
outcomes, lock = {}, threading.Lock()
def attack(i):
    status = "open"
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=seconds + 30)
        head = (f"PUT /v1/bundles/{'ab' * 32} HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {mallory}\r\nContent-Type: application/gzip\r\n"
                f"Content-Length: 1000000\r\n\r\n").encode()
        s.sendall(head + prefix)
        s.settimeout(1)
        end = time.time() + seconds
        while time.time() < end:
            try:
                got = s.recv(4096)
                status = got.split(b" ")[1].decode() if got else "closed"
                break
            except socket.timeout:
                try:
                    s.sendall(b"\0")
                except OSError:
                    pass
        s.close()
    except OSError as e:
        status = f"error {e.errno}"
    with lock:
        outcomes[status] = outcomes.get(status, 0) + 1

workers = [threading.Thread(target=attack, args=(i,), daemon=True) for i in range(attackers)]
for w in workers:
    w.start()
time.sleep(3)
peak = threads()
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tar:
    data = b"# alice\n"
    info = tarfile.TarInfo("README.md"); info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
body = gzip.compress(buf.getvalue())
sha = hashlib.sha256(body).hexdigest()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/bundles/{sha}", data=body, method="PUT",
    headers={"Authorization": f"Bearer {alice}", "Content-Type": "application/gzip"})
start = time.time()
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        victim = f"{r.status} in {time.time() - start:.2f} s ({len(body)} bytes)"
except Exception as e:
    victim = f"failed after {time.time() - start:.2f} s: {e}"
samples = [peak]
while any(w.is_alive() for w in workers):
    samples.append(threads())
    time.sleep(0.5)
print(f"alice's upload during the attack: {victim}")
print(f"server threads during {attackers} slow uploads: max {max(samples)}")
print(f"attackers' outcomes: {dict(sorted(outcomes.items()))}")
time.sleep(1)
print(f"server threads after: {threads()}")
PY
