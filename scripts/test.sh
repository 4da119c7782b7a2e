#!/usr/bin/env bash
# The one command that installs, builds and runs every test (README, .ci/run).
#   scripts/test.sh                                 all tests
#   scripts/test.sh -L unit                         only one label (unit | integration | e2e)
#   scripts/test.sh --sanitize address,undefined    all tests on an ASan+UBSan build (build-asan-ubsan/)
#   scripts/test.sh --sanitize thread -L unit       unit tests on a TSan build (build-tsan/)
# Arguments after the --sanitize list go to ctest, as without it. JOBS sets the
# build's parallelism, TEST_JOBS ctest's. docs/fuzzing.md describes the
# sanitizer builds and how a report in a gateway started by a test fails it.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=
case ${1:-} in
  --sanitize) sanitize=${2:?--sanitize takes address,undefined or thread}; shift 2 ;;
  --sanitize=*) sanitize=${1#--sanitize=}; shift ;;
esac

scripts/install-deps.sh

if [[ -z $sanitize ]]; then
  scripts/build.sh
  cd "${BUILD_DIR:-build}"
  exec ctest --output-on-failure --timeout 300 -j "${TEST_JOBS:-2}" "$@"
fi

case $sanitize in
  address,undefined | undefined,address)
    sanitize=address,undefined
    default_dir=build-asan-ubsan
    # halt_on_error: the first report ends the process (non-zero exit), so a
    # test cannot pass over it; leaks are reported when a process exits.
    export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
    ;;
  thread)
    default_dir=build-tsan
    export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
    ;;
  *)
    echo "scripts/test.sh: --sanitize takes address,undefined or thread, not '$sanitize'" >&2
    exit 2
    ;;
esac

# gcc, -O1 -g and frame pointers (cmake/RelaySanitizers.cmake), the system allocator, no
# benchmarks. RelWithDebInfo keeps NDEBUG, as in the shipped build.
BUILD_DIR=${SANITIZE_BUILD_DIR:-$default_dir} BUILD_TYPE=RelWithDebInfo \
  scripts/build.sh -DRELAY_SANITIZE="$sanitize" -DRELAY_MALLOC=system -DRELAY_BUILD_BENCH=OFF
cd "${SANITIZE_BUILD_DIR:-$default_dir}"
exec ctest --output-on-failure --timeout 300 -j "${TEST_JOBS:-2}" "$@"
