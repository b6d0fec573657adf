#!/usr/bin/env bash
# Regenerates the golden reference CSVs, on purpose, after an intended change
# of the simulator's results. Review the diff (git diff tests/golden) before
# committing.
# usage: update.sh [HCCLSIM [SOURCE_DIR]] [CASE...]
#   HCCLSIM defaults to SOURCE_DIR/build/hcclsim; SOURCE_DIR to this repository;
#   no CASE: every case.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
hcclsim="$src/build/hcclsim"
if [ $# -ge 1 ] && [ -x "$1" ] && [ ! -d "$1" ]; then hcclsim=$1; shift; fi
if [ $# -ge 1 ] && [ -d "$1" ]; then src=$(cd "$1" && pwd); here="$src/tests/golden"; shift; fi
# shellcheck source=cases.sh
. "$here/cases.sh"
cases=("$@")
if [ ${#cases[@]} -eq 0 ]; then cases=("${GOLDEN_CASES[@]}"); fi
for name in "${cases[@]}"; do
  if ! golden_args "$name"; then
    echo "unknown golden case '$name'; known: ${GOLDEN_CASES[*]}" >&2
    exit 2
  fi
  "$hcclsim" "${GOLDEN_ARGS[@]}" >"$here/$name.csv.new"
  mv "$here/$name.csv.new" "$here/$name.csv"
  echo "wrote $here/$name.csv"
done
