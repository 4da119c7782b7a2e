#!/usr/bin/env bash
# Installs every package kimi-relay needs to build, run its demo and run its tests
# on Debian 12 (as root). Safe to run again: apt and npm skip what is present.
#   scripts/install-deps.sh          build + runtime + test tools
#   scripts/install-deps.sh --build  only what the build needs (used by docker/Dockerfile)
#   scripts/install-deps.sh --fuzz   what the build needs, plus clang and libFuzzer (scripts/fuzz.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

build_pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libssl-dev libnghttp2-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libyaml-cpp-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libmimalloc-dev
)
# python3-yaml: tests/deploy/k8s_manifests_test.py (the Kubernetes manifests).
# chromium, chromium-driver: tests/e2e/console_browser.test.mjs drives the
# operator console in headless Chromium through chromedriver.
# iproute2 (ss): tests/integration/send_buffer.test.mjs reads a socket's buffers.
test_pkgs=(curl nghttp2-client prometheus procps openssl python3-httpx python3-yaml redis-server
  chromium chromium-driver iproute2)
# libFuzzer and the ASan/UBSan runtimes clang links fuzz targets with
# (libclang_rt.fuzzer, .asan, .ubsan_standalone) are in libclang-rt-14-dev.
fuzz_pkgs=(clang-14 libclang-rt-14-dev)

pkgs=("${build_pkgs[@]}")
case $mode in
  --build) ;;
  --fuzz) pkgs+=("${fuzz_pkgs[@]}") ;;
  *)
    pkgs+=("${test_pkgs[@]}")
    command -v node >/dev/null || pkgs+=(nodejs npm)
    ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The Node packages the integration and end-to-end tests drive the gateway with
# (the official openai SDK, MCP SDK and server), pinned by tests/package-lock.json.
if [[ -z $mode ]] && [[ -f tests/package.json ]]; then
  (cd tests && npm ci --no-audit --no-fund --loglevel=error)
fi
