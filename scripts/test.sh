#!/usr/bin/env bash
# The one command that installs, builds and runs every test (README, .ci/run).
#   scripts/test.sh              all tests
#   scripts/test.sh -L unit      only one label (unit | integration | e2e)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 300 -j "${TEST_JOBS:-2}" "$@"
