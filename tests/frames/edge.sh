#!/usr/bin/env bash
# check.sh at its edge, on one frame (deliverStream, which every open stream
# holds): a budget equal to the frame's allocation passes, one byte less
# fails naming the frame. The allocation is read from check.sh's own table,
# so this follows the frame as it changes.
#
#   tests/frames/edge.sh BUDGETS FILE...
set -euo pipefail
here=$(dirname "$0")
budgets=$1
shift
match='relay::pipeline::(anonymous namespace)::deliverStream('
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The frame's line alone, with a budget that cannot fail.
grep -F -- "$match" "$budgets" | sed 's/^[0-9]*/1000000/' >"$work/one"
[[ -s $work/one ]] || { echo "no budget for $match in $budgets" >&2; exit 1; }
alloc=$("$here/check.sh" "$work/one" "$@" 2>/dev/null | awk -v m="$match" 'index($0, m) { print $2; exit }')
[[ -n $alloc ]] || { echo "check.sh printed no row for $match" >&2; exit 1; }

sed "s/^[0-9]*/$alloc/" "$work/one" >"$work/at"
if ! "$here/check.sh" "$work/at" "$@" >/dev/null 2>"$work/at.err"; then
  echo "a budget of exactly $alloc bytes (the allocation) failed:" >&2
  cat "$work/at.err" >&2
  exit 1
fi
sed "s/^[0-9]*/$((alloc - 1))/" "$work/one" >"$work/under"
if "$here/check.sh" "$work/under" "$@" >/dev/null 2>"$work/under.err"; then
  echo "a budget of $((alloc - 1)) bytes, one under the allocation, passed" >&2
  exit 1
fi
grep -q "deliverStream.*asks for $alloc, over its budget of $((alloc - 1)) bytes" "$work/under.err" || {
  echo "one byte under: failed without naming the frame and its bytes:" >&2
  cat "$work/under.err" >&2
  exit 1
}
echo "deliverStream: $alloc bytes passes a budget of $alloc, fails one of $((alloc - 1))"
