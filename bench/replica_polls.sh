#!/usr/bin/env bash
# Server replicas on one PostgreSQL under polling sessions (docs/ARCHITECTURE.md §5): REPLICAS
# `serve --no-local-runner` processes (default 2) share the database, the sessions are spread
# over them and each is polled every 3 s through its replica the way the client polls; first
# all idle, then ACTIVE % getting a message every interval written through another replica.
# Each replica's CPU (from /proc/<pid>/stat over the window) per poll and per 1,000 polling
# sessions, p50/p99 poll latency, and every posted message seen by its poller (exit 1 if not).
#   ULTRAPLAN_BENCH_DATABASE_URL=postgres://… bench/replica_polls.sh [SESSIONS=1000] [SECONDS=30] [ACTIVE%=10] [REPLICAS=2]
# A throwaway database: `source scripts/pg-throwaway.sh` sets ULTRAPLAN_TEST_POSTGRES_URL, which
# is used when ULTRAPLAN_BENCH_DATABASE_URL is unset.
set -euo pipefail
cd "$(dirname "$0")/.."
export ULTRAPLAN_BENCH_DATABASE_URL=${ULTRAPLAN_BENCH_DATABASE_URL:-${ULTRAPLAN_TEST_POSTGRES_URL:?set ULTRAPLAN_BENCH_DATABASE_URL or source scripts/pg-throwaway.sh}}
ulimit -n 65536 2>/dev/null || true
cargo build --quiet --release -p ultraplan-server
agent_dir=$(scripts/build-agent dev)
ULTRAPLAN_BENCH_REPLICAS="${4:-2}" \
ULTRAPLAN_SERVER_BIN="$PWD/target/release/ultraplan-server" \
ULTRAPLAN_AGENT_BIN="$agent_dir/ultraplan-agent" \
  cargo bench --quiet -p ultraplan-tests --bench idle_pollers -- "${1:-1000}" "${2:-30}" 0 "${3:-10}"
