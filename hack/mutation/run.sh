#!/usr/bin/env bash
# Mutation check: every safety check must be guarded by a test. Each line of
# breaks.txt is a one-line break of such a check:
#
#   PACKAGE[:TESTS] FILE OLD ~> NEW
#
# OLD must occur exactly once in FILE. The break is applied to a copy of the
# tree; the mutant must build, and `go test PACKAGE` (only the tests matching
# the TESTS regexp, when given) must fail. A break no test notices fails the
# check. Breaks run in MUTATION_JOBS parallel copies (default: one per CPU),
# since most of the time goes to linking test binaries.
# Usage: hack/mutation/run.sh [LIST]   (default: hack/mutation/breaks.txt)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
list=$(realpath "${1:-$root/hack/mutation/breaks.txt}")
jobs=${MUTATION_JOBS:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Every line is checked before any test runs: a list that no longer matches
# the code is an error at once, not after half an hour.
breaks=()
while IFS= read -r line || [[ -n $line ]]; do
  [[ -z ${line// } || $line == \#* ]] && continue
  read -r pkg file rest <<<"$line"
  old=${rest%% ~> *}
  if [[ $old == "$rest" ]]; then
    echo "breaks.txt: malformed line (want PACKAGE[:TESTS] FILE OLD ~> NEW): $line" >&2
    exit 2
  fi
  orig=$(cat "$root/$file"; echo x); orig=${orig%x}
  once=${orig/"$old"/}
  if [[ $once == "$orig" || $once == *"$old"* ]]; then
    echo "breaks.txt: $file: want exactly one occurrence of: $old" >&2
    exit 2
  fi
  breaks+=("$line")
done <"$list"

# shard N applies every jobs-th break, from the Nth, in its own copy of the
# tracked tree (plus untracked, not ignored, files).
shard() {
  local n=$1 dir="$work/tree$1" i line pkg file rest old new run orig
  mkdir -p "$dir"
  (cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$dir" 2>/dev/null || true)
  cd "$dir"
  for ((i = n; i < ${#breaks[@]}; i += jobs)); do
    line=${breaks[i]}
    read -r pkg file rest <<<"$line"
    old=${rest%% ~> *}
    new=${rest#* ~> }
    run=""
    if [[ $pkg == *:* ]]; then run=${pkg#*:}; pkg=${pkg%%:*}; fi
    orig=$(cat "$file"; echo x); orig=${orig%x}
    printf '%s' "${orig/"$old"/"$new"}" >"$file"
    if ! go build "$pkg" >/dev/null 2>&1; then
      printf '%s' "$orig" >"$file"
      echo "breaks.txt: this break does not build, so it tests nothing: $line" >&2
      echo "$line" >>"$work/unbuilt"
      continue
    fi
    if go test -count=1 ${run:+-run "$run"} "$pkg" >/dev/null 2>&1; then
      echo "$line" >>"$work/missed"
      echo "MISSED  $file: $old ~> $new"
    else
      echo "caught  $file: $old"
    fi
    printf '%s' "$orig" >"$file"
  done
}

for ((n = 0; n < jobs; n++)); do
  shard "$n" &
done
wait

total=${#breaks[@]}
missed=0 unbuilt=0
[[ -f $work/missed ]] && missed=$(wc -l <"$work/missed")
[[ -f $work/unbuilt ]] && unbuilt=$(wc -l <"$work/unbuilt")
echo "mutation check: $((total - missed - unbuilt)) of $total breaks caught"
if ((unbuilt)); then
  exit 2
fi
if ((missed)); then
  sed 's/^/no test fails for: /' "$work/missed" >&2
  exit 1
fi
