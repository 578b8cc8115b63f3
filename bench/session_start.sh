#!/usr/bin/env bash
# Session created -> first model request, for the bwrap and Docker runners (docs/ARCHITECTURE.md §8:
# bwrap < 1 s, docker < 2 s), with release builds of the server and the static agent.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release -p ultraplan-server
agent_dir=$(scripts/build-agent release)
# shellcheck source=scripts/ensure-dockerd
source scripts/ensure-dockerd
ULTRAPLAN_SERVER_BIN="$PWD/target/release/ultraplan-server" \
ULTRAPLAN_AGENT_BIN="$agent_dir/ultraplan-agent" \
  cargo bench --quiet -p ultraplan-tests --bench session_start
