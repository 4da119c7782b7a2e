#!/usr/bin/env bash
# Configures and builds kimi-relay (Release, Ninja, ccache when present) into build/.
#   BUILD_DIR=build-debug BUILD_TYPE=Debug scripts/build.sh
#   scripts/build.sh -DRELAY_BUILD_BENCH=OFF     extra arguments go to cmake's configure step
#
# A Release build with GCC is built from a profile (cmake/RelayPgo.cmake):
# the first time, an instrumented kimi-relay is built in BUILD_DIR/pgo-generate
# and trained (scripts/pgo-train.sh, ~12 s), and its profile in
# BUILD_DIR/pgo-profile is then used by every later build of BUILD_DIR.
#   PGO=0 scripts/build.sh       without a profile
#   PGO=train scripts/build.sh   train again (after large changes, before measuring)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
build_type=${BUILD_TYPE:-Release}
jobs=${JOBS:-$(($(nproc) < 2 ? 1 : 2))}
pgo=${PGO:-1}

profile_args=(-DRELAY_PGO=)
if [[ $pgo != 0 && $build_type == Release ]] && "${CXX:-c++}" --version 2>/dev/null | grep -q 'Free Software Foundation'; then
  mkdir -p "$build_dir"
  profile=$(cd "$build_dir" && pwd)/pgo-profile
  if [[ $pgo == train ]] || ! compgen -G "$profile/*.gcda" >/dev/null; then
    generate=$build_dir/pgo-generate
    echo "scripts/build.sh: building an instrumented kimi-relay in $generate to train a profile" >&2
    cmake -S . -B "$generate" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRELAY_BUILD_TESTS=OFF \
      -DRELAY_BUILD_BENCH=OFF -DRELAY_PGO=generate -DRELAY_PGO_DIR="$profile" "$@" >/dev/null
    cmake --build "$generate" -j "$jobs" --target kimi-relay kimi-relay-mock
    # A second try with other ports: a port picked free can be taken before
    # the bind (scripts/pgo-train.sh).
    trained=0
    for attempt in 1 2; do
      rm -rf "$profile"
      status=0
      timeout 600 scripts/pgo-train.sh "$generate" || status=$?
      if ((status == 0)); then
        trained=1
        break
      fi
      echo "scripts/build.sh: training run $attempt failed" >&2
      ((status != 124)) || break  # a run that hangs would hang again
    done
    if ((!trained)); then
      echo "scripts/build.sh: the training run failed: building without a profile" >&2
      rm -rf "$profile"
    fi
    # Same flags, new profile: ninja would keep the objects built from the old one.
    if [[ -f $build_dir/build.ninja ]]; then cmake --build "$build_dir" --target clean >/dev/null; fi
  fi
  if compgen -G "$profile/*.gcda" >/dev/null; then
    profile_args=(-DRELAY_PGO=use -DRELAY_PGO_DIR="$profile")
  fi
fi

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" "${profile_args[@]}" "$@" >/dev/null
cmake --build "$build_dir" -j "$jobs"
