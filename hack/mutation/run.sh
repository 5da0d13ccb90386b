#!/usr/bin/env bash
# Mutation check: every safety check must be guarded by a test. Each line of
# breaks.txt is a one-line break of such a check:
#
#   PACKAGE[:TESTS] FILE OLD ~> NEW
#
# OLD must occur exactly once in FILE. The break is applied to a copy of the
# tree; the mutant must build, and `go test PACKAGE` (only the tests matching
# the TESTS regexp, when given) must fail. A break no test notices fails the
# check. Usage: hack/mutation/run.sh [LIST]   (default: hack/mutation/breaks.txt)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
list=$(realpath "${1:-$root/hack/mutation/breaks.txt}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy of the tracked tree (plus untracked, not ignored, files).
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$work" 2>/dev/null || true)
cd "$work"

total=0 caught=0
missed=()
while IFS= read -r line || [[ -n $line ]]; do
  [[ -z ${line// } || $line == \#* ]] && continue
  total=$((total + 1))
  read -r pkg file rest <<<"$line"
  old=${rest%% ~> *}
  new=${rest#* ~> }
  if [[ $old == "$rest" ]]; then
    echo "breaks.txt: malformed line (want PACKAGE[:TESTS] FILE OLD ~> NEW): $line" >&2
    exit 2
  fi
  run=""
  if [[ $pkg == *:* ]]; then run=${pkg#*:}; pkg=${pkg%%:*}; fi
  orig=$(cat "$file"; echo x); orig=${orig%x}
  once=${orig/"$old"/}
  if [[ $once == "$orig" || $once == *"$old"* ]]; then
    echo "breaks.txt: $file: want exactly one occurrence of: $old" >&2
    exit 2
  fi
  printf '%s' "${orig/"$old"/"$new"}" >"$file"
  if ! go build "$pkg" >/dev/null 2>&1; then
    printf '%s' "$orig" >"$file"
    echo "breaks.txt: this break does not build, so it tests nothing: $line" >&2
    exit 2
  fi
  if go test -count=1 ${run:+-run "$run"} "$pkg" >/dev/null 2>&1; then
    missed+=("$line")
    echo "MISSED  $file: $old ~> $new"
  else
    caught=$((caught + 1))
    echo "caught  $file: $old"
  fi
  printf '%s' "$orig" >"$file"
done <"$list"

echo "mutation check: $caught of $total breaks caught"
if ((${#missed[@]})); then
  printf 'no test fails for: %s\n' "${missed[@]}" >&2
  exit 1
fi
