#!/usr/bin/env bash
# The coroutine frames every request, connection or open stream holds,
# against the allocator's size classes (tests/frames/budgets.txt).
#
#   tests/frames/check.sh BUDGETS FILE...
#
# FILE: a binary or object files built with -g (the sanitizer builds are):
# GCC names each coroutine's frame type "<mangled name>.Frame" in the DWARF,
# with its size. A frame is allocated through Asio's recycling allocator,
# which asks operator new for the size rounded up to 4 bytes, plus one; the
# allocator (mimalloc) then serves the next size class. A frame a few bytes
# over a class boundary costs the next class whole, per request or per open
# stream: 1,305 bytes instead of 1,249 for deliverStream cost 1.5 KiB of RSS
# per HTTP/1.1 stream on bench/streams.sh (docs/benchmarks.md). The layout
# is GCC's front end's, the same at -O1 with sanitizers as in the Release
# build (checked on src/pipeline/chat.cpp, 2026-12-05).
#
# Fails when a budget's frame is over it, or when no frame matches a budget
# (a coroutine renamed or no longer one: the budget must follow it).
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 BUDGETS FILE..." >&2
  exit 2
fi
budgets=$1
shift

# "<bytes> <demangled name>" for every frame type in FILE...
frames=$(
  for f in "$@"; do readelf --debug-dump=info "$f" 2>/dev/null || echo "cannot read $f" >&2; done |
    awk '/DW_AT_name.*\.Frame$/ {
           name = $NF; sub(/\.Frame$/, "", name)
           if ((getline line) > 0 && line ~ /DW_AT_byte_size/) { n = split(line, w, " "); print w[n], name }
         }' |
    sort -u | c++filt
)
if [[ -z $frames ]]; then
  echo "no coroutine frame types in $* (built without -g, or not by GCC?)" >&2
  exit 1
fi

# mimalloc's size classes (bytes), to tell a budget that a frame no longer
# needs: the check then says so, so that the saving is locked in.
classes=(8 16 24 32 40 48 56 64 80 96 112 128 160 192 224 256 320 384 448 512 640 768 896 1024
  1280 1536 1792 2048 2560 3072 3584 4096 5120 6144 7168 8192 10240 12288 14336 16384)
classOf() {
  local c
  for c in "${classes[@]}"; do
    if (($1 <= c)); then
      echo "$c"
      return
    fi
  done
  echo "$1"
}

status=0
printf '%7s %7s %7s  %s\n' "bytes" "alloc" "budget" "frame"
while IFS= read -r line; do
  [[ -z ${line// /} || $line == \#* ]] && continue
  # <budget> <match> | <why>
  budget=${line%% *}
  rest=${line#* }
  match=${rest%%|*}
  match=$(sed -e 's/^ *//' -e 's/ *$//' <<<"$match")
  why=${rest#*|}
  why=${why%%#*}
  why=${why%"${why##*[! ]}"}
  found=$(grep -F -- "$match" <<<"$frames" || true)
  if [[ -z $found ]]; then
    echo "FAIL: no frame matches '$match' (budget $budget:$why): renamed, or no longer a coroutine? Update $budgets." >&2
    status=1
    continue
  fi
  while IFS= read -r frame; do
    bytes=${frame%% *}
    name=${frame#* }
    alloc=$(((bytes + 3) / 4 * 4 + 1))
    short=${name//boost::asio::basic_stream_socket<boost::asio::ip::tcp, boost::asio::any_io_executor>/tcp::socket}
    short=${short//boost::asio::ssl::stream/ssl::stream}
    printf '%7d %7d %7d  %s\n' "$bytes" "$alloc" "$budget" "${short:0:120}"
    if ((alloc > budget)); then
      echo "FAIL: $short: a frame of $bytes bytes asks for $alloc, over its budget of $budget bytes (the allocator's size class; paid$why)." >&2
      status=1
    elif (($(classOf "$alloc") < budget)); then
      echo "note: $short now fits the $(classOf "$alloc")-byte class: lower its budget in $budgets to keep it there." >&2
    fi
  done <<<"$found"
done <"$budgets"
exit $status
