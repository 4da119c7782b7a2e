# Shared set-up of the bench scripts (sourced, not run): the build to
# measure, a scratch directory removed on exit together with every process
# started into `pids`, the bench key and its digest, and the request body.
#
#   source "$(dirname "$0")/lib.sh"
#   bench_need h2load taskset        # tools, each checked with a hint
#   bench_start                      # work, pids, cleanup, key, body.json
# Extra clean-up before the processes go: define bench_cleanup_extra.

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
bin=${BUILD_DIR:-build}
duration=${DURATION:-10}
warmup=${WARMUP:-2}
key=kr-bench-key-not-secret
key_sha=$(printf %s "$key" | sha256sum | cut -d' ' -f1)
upstream_key=bench-upstream-key

bench_need() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null ||
      { echo "bench: $tool missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
  done
}

bench_cleanup() {
  declare -F bench_cleanup_extra >/dev/null && bench_cleanup_extra
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}

bench_start() {
  [[ -x $bin/kimi-relay && -x $bin/kimi-relay-mock ]] || scripts/build.sh
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
  # A ~300-byte chat request, JSON and streamed.
  cat >"$work/body.json" <<'JSON'
{"model":"kimi-k2","messages":[{"role":"system","content":"You are a planner in an agent swarm. Answer briefly."},{"role":"user","content":"Split the task 'summarise the quarterly report and draft three follow-up emails' into subtasks for worker agents."}],"temperature":0.6,"max_tokens":256}
JSON
  sed 's/"max_tokens":256}/"max_tokens":256,"stream":true}/' "$work/body.json" >"$work/stream.json"
}
