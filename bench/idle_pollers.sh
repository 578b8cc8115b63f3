#!/usr/bin/env bash
# Thousands of idle sessions polled every 3 s the way the client polls (docs/ARCHITECTURE.md §8:
# p99 < 50 ms per poll on 2 cores, memory per idle session in kilobytes), then REVIEW sessions
# awaiting review with their live agents (memory per session on the server and in the agents).
#   bench/idle_pollers.sh [SESSIONS=2000] [SECONDS=30] [REVIEW=100] [ACTIVE%=10]
# ULTRAPLAN_BENCH_DATABASE_URL=postgres://… runs it on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 65536 2>/dev/null || true
cargo build --quiet --release -p ultraplan-server
agent_dir=$(scripts/build-agent dev)
ULTRAPLAN_SERVER_BIN="$PWD/target/release/ultraplan-server" \
ULTRAPLAN_AGENT_BIN="$agent_dir/ultraplan-agent" \
  cargo bench --quiet -p ultraplan-tests --bench idle_pollers -- "${1:-2000}" "${2:-30}" "${3:-100}" "${4:-10}"
