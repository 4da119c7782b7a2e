#!/usr/bin/env bash
# Soak run (bench/soak.mjs): mixed traffic with upstream faults and hostile
# callers for SOAK_SECONDS (default 1800), then a report of every outcome and
# of the gateway's RSS and open file descriptors. Exit status 0 only when no
# caller was left hanging, no stream ended without [DONE] or an error event,
# and the gateway was alive at the end. docs/soak.md holds the last report.
#
#   bench/soak.sh                      # 30 minutes
#   SOAK_SECONDS=120 bench/soak.sh     # a short run
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}
[[ -x $bin/kimi-relay && -x $bin/kimi-relay-mock ]] || scripts/build.sh
[[ -d tests/node_modules ]] || (cd tests && npm ci --no-audit --no-fund --loglevel=error)
RELAY_BIN=$PWD/$bin/kimi-relay MOCK_BIN=$PWD/$bin/kimi-relay-mock exec node bench/soak.mjs
