#!/usr/bin/env bash
# A large repository uploaded by the real client through a link that drops at 50 % of the
# archive: the upload resumes where the server's bytes end. Prints the archive size, the bytes
# sent after the cut (the bar: at most 60 % of the archive) and the launch's wall time.
#   bench/resume_upload.sh [MEGABYTES=200]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${ULTRAPLAN_AGENT_BIN:-}" ]; then
  ULTRAPLAN_AGENT_BIN="$(scripts/build-agent dev)/ultraplan-agent"
  export ULTRAPLAN_AGENT_BIN
fi
cargo build --quiet -p ultraplan -p ultraplan-server --bins
ULTRAPLAN_RESUME_MB="${1:-200}" cargo test --quiet -p ultraplan-tests --test e2e \
  resumable_upload -- --nocapture 2>&1 | grep -E "resumable upload:|test result|panicked"
