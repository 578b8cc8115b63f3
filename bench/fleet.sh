#!/usr/bin/env bash
# A fleet on one PostgreSQL: a front replica with no runner and 1, 2 and 3 runners (bwrap, 2
# slots each, offline planner), either `serve` replicas on the database or keyless
# `ultraplan-runner`s linked to the front. Claim latency (queued → claimed) p50/p95 on an idle
# fleet, and sessions per minute for a burst (docs/ARCHITECTURE.md §5.2, §5.3).
#   bench/fleet.sh [BURST=24] [replicas|keyless|both]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p ultraplan-server -p ultraplan-runner
agent_dir=$(scripts/build-agent release)
ULTRAPLAN_SERVER_BIN="$PWD/target/release/ultraplan-server" \
ULTRAPLAN_AGENT_BIN="$agent_dir/ultraplan-agent" \
  cargo bench --quiet -p ultraplan-tests --bench fleet -- "${1:-24}" "${2:-both}"
