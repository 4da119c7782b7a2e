#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang-14, ASan+UBSan) into
# build-fuzz/ and runs each for a while (docs/fuzzing.md).
#   scripts/fuzz.sh [SECONDS]                every target, SECONDS each (default 60)
#   scripts/fuzz.sh --target NAME [SECONDS]  one target (NAME as in tests/fuzz/CMakeLists.txt)
#   scripts/fuzz.sh --build-only             build, run nothing
#
# Each run starts from a fresh copy of tests/fuzz/corpus/NAME (and of
# tests/fuzz/regressions/NAME, the inputs of bugs found before) in
# build-fuzz/fuzz-work/NAME/corpus (the seeds are never written to); inputs
# that crash land in build-fuzz/fuzz-work/NAME/ as crash-*, leak-*, timeout-*
# or oom-*, and libFuzzer's output in build-fuzz/fuzz-work/NAME/log. Exits
# non-zero if any target found anything. Replay one input:
#   build-fuzz/tests/fuzz/fuzz_NAME path/to/input
# JOBS sets the build's parallelism (default: as scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=()
seconds=60
build_only=0
while (($#)); do
  case $1 in
    --target) targets+=("${2:?--target takes a target name}"); shift 2 ;;
    --build-only) build_only=1; shift ;;
    [0-9]*) seconds=$1; shift ;;
    *) echo "scripts/fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh --fuzz

build_dir=build-fuzz
jobs=${JOBS:-$(($(nproc) < 2 ? 1 : 2))}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRELAY_FUZZ=ON >/dev/null
cmake --build "$build_dir" -j "$jobs"
((build_only)) && exit 0

# Target names and their -max_len, as tests/fuzz/CMakeLists.txt declared them.
declare -A max_len
while read -r name len; do
  [[ -n $name ]] && max_len[$name]=$len
done <"$build_dir/fuzz-targets.txt"
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(cut -d' ' -f1 "$build_dir/fuzz-targets.txt" | sed '/^$/d')
fi
for t in "${targets[@]}"; do
  [[ -n ${max_len[$t]:-} ]] || { echo "scripts/fuzz.sh: no fuzz target '$t'" >&2; exit 2; }
done

# libFuzzer sets ASan's options it needs itself; UBSan must stop at the first
# report (the code is built with -fno-sanitize-recover=all as well).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

failed=()
printf '%-14s %8s %12s %10s  %s\n' target seconds executions exec/s result
for t in "${targets[@]}"; do
  work=$build_dir/fuzz-work/$t
  rm -rf "$work"
  mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
  # Inputs that once found a bug (docs/fuzzing.md) run first, with the seeds.
  if [[ -d tests/fuzz/regressions/$t ]]; then cp tests/fuzz/regressions/"$t"/* "$work/corpus/"; fi
  args=(-max_total_time="$seconds" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048
        -print_final_stats=1 -artifact_prefix="$work/")
  [[ -f tests/fuzz/$t.dict ]] && args+=(-dict="tests/fuzz/$t.dict")
  status=0
  "$build_dir/tests/fuzz/fuzz_$t" "${args[@]}" "$work/corpus" >"$work/log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  artifacts=$(find "$work" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' \
    -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  if ((status == 0)) && [[ -z $artifacts ]]; then
    result=ok
  else
    result="FAILED (exit $status)"
    failed+=("$t")
  fi
  printf '%-14s %8s %12s %10s  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "$result"
  if [[ $result != ok ]]; then
    grep -E -m1 -A30 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|runtime error:|invariant violated' \
      "$work/log" | sed 's/^/    /' || tail -n 40 "$work/log" | sed 's/^/    /'
    for a in $artifacts; do echo "    input: $a"; done
  fi
done

echo "fuzz: $((${#targets[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
if ((${#failed[@]})); then
  echo "fuzzing found problems in: ${failed[*]} (logs in $build_dir/fuzz-work/<target>/log)" >&2
  exit 1
fi
