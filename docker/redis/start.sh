#!/bin/sh
# The image's command: redis-server with /etc/redis/kimi-relay.conf and the
# password from REDIS_PASSWORD, given on stdin so that it is in neither the
# image nor the command line. exec leaves redis-server as PID 1, where the
# stop signal reaches it (it then fsyncs the append-only file). Extra
# arguments are Redis options (`--loglevel verbose`).
set -eu
: "${REDIS_PASSWORD:?set REDIS_PASSWORD (no spaces or quotes: openssl rand -hex 32)}"
exec redis-server /etc/redis/kimi-relay.conf "$@" - <<EOF
requirepass $REDIS_PASSWORD
EOF
