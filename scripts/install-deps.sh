#!/usr/bin/env bash
# Installs every package kimi-relay needs to build, run its demo and run its tests
# on Debian 12 (as root). Safe to run again: apt and npm skip what is present.
#   scripts/install-deps.sh          build + runtime + test tools
#   scripts/install-deps.sh --build  only what the build needs (used by docker/Dockerfile)
set -euo pipefail
cd "$(dirname "$0")/.."

build_pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libssl-dev libnghttp2-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev libyaml-cpp-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev libgoogle-perftools-dev
)
test_pkgs=(curl nghttp2-client prometheus procps openssl python3-httpx)

pkgs=("${build_pkgs[@]}")
[[ ${1:-} == --build ]] || pkgs+=("${test_pkgs[@]}")
command -v node >/dev/null || [[ ${1:-} == --build ]] || pkgs+=(nodejs npm)

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
if [[ ${1:-} != --build ]] && [[ -f tests/package.json ]]; then
  (cd tests && npm ci --no-audit --no-fund --loglevel=error)
fi
