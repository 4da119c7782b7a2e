# What the container tests share (sourced): reporting checks, counting
# failures, and a free TCP port on 127.0.0.1.
failures=0

log() { printf '\n== %s\n' "$*"; }
pass() { printf '   ok   %s\n' "$*"; }
fail() {
  printf '   FAIL %s\n' "$*" >&2
  failures=$((failures + 1))
}
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

# A TCP port on 127.0.0.1 nothing listens on (bound by the kernel, then released).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
