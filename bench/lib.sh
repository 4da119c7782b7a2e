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
    # nginx is the benchmarks' line, not a dependency of the gateway:
    # installed here when first needed, as bench/run.sh does.
    if [[ $tool == nginx ]] && ! command -v nginx >/dev/null; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null || true
    fi
    local hint="scripts/install-deps.sh installs it"
    [[ $tool == nginx ]] && hint="apt-get install nginx-light failed"
    command -v "$tool" >/dev/null || { echo "bench: $tool missing ($hint)" >&2; exit 1; }
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

# bench_mock PORT [ARGS...]: a kimi-relay-mock (one worker, 19 content chunks,
# no delay) on 127.0.0.1:PORT, checking the bench upstream key.
bench_mock() {
  local port=$1
  shift
  "$bin/kimi-relay-mock" --listen "127.0.0.1:$port" --name bench --api-key "$upstream_key" \
    --workers 1 --chunks 19 --chunk-delay-ms 0 --no-record "$@" >"$work/mock-$port.log" 2>&1 &
  pids+=($!)
}

# bench_relay_yaml FILE RELAY_PORT MOCK_PORT: one worker, the bench key, one
# plain-HTTP upstream serving kimi-k2. SEND_BUFFER: the callers' sockets' send
# buffer (server.send_buffer_bytes; nginx: listen ... sndbuf=), unset: the
# kernel's.
bench_relay_yaml() {
  cat >"$1" <<YAML
server:
  listen: ["127.0.0.1:$2"]
  workers: 1
${SEND_BUFFER:+  send_buffer_bytes: $SEND_BUFFER}
keys:
  - name: bench
    sha256: "$key_sha"
upstreams:
  - name: mock
    base_url: "http://127.0.0.1:$3/v1"
    api_key: "$upstream_key"
    allow_insecure_http: true
    models: {kimi-k2: kimi-k2}
log: {level: warn}
YAML
}

# bench_nginx_conf FILE PORT MOCK_PORT: nginx as the same reverse proxy (one
# worker, upstream keep-alive, no buffering, the upstream key injected).
# NGINX_KEEPALIVE: idle upstream connections it keeps (128).
bench_nginx_conf() {
  cat >"$1" <<CONF
worker_processes 1;
master_process off;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  # kimi-relay keeps a connection for any number of requests: so does nginx
  # here (its default closes after 1,000, and h2load has hung on the close).
  keepalive_requests 1000000;
  upstream mock { server 127.0.0.1:$3; keepalive ${NGINX_KEEPALIVE:-128}; keepalive_requests 1000000; }
  server {
    listen 127.0.0.1:$2${SEND_BUFFER:+ sndbuf=$SEND_BUFFER};
    location / {
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Authorization "Bearer $upstream_key";
      proxy_buffering off;
    }
  }
}
CONF
}

# bench_nginx_pinned PORT MOCK_PORT: nginx as the reference proxy
# (bench_nginx_conf), in the foreground of a background job pinned to CPU 1
# as the proxies under measure are; sets nginx_pid and adds it to pids.
bench_nginx_pinned() {
  bench_nginx_conf "$work/nginx.conf" "$1" "$2"
  sed -i '1i daemon off;' "$work/nginx.conf"
  taskset -c 1 nginx -c "$work/nginx.conf" -p "$work" >"$work/nginx.out" 2>&1 &
  nginx_pid=$!
  pids+=($nginx_pid)
}

# bench_wait_ready PORT...: until each proxy on 127.0.0.1 answers /v1/models
# (at most 10 s each).
bench_wait_ready() {
  local port
  for port in "$@"; do
    for _ in $(seq 100); do
      curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$port/v1/models" && break
      sleep 0.1
    done
  done
}
