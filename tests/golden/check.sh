#!/usr/bin/env bash
# Runs one golden case and compares its CSV with the reference, byte for byte.
# usage: check.sh HCCLSIM SOURCE_DIR CASE
# Fails (printing the diff) on any difference; regenerate on purpose with update.sh.
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
here="$src/tests/golden"
# shellcheck source=cases.sh
. "$here/cases.sh"
if ! golden_args "$name"; then
  echo "unknown golden case '$name'; known: ${GOLDEN_CASES[*]}" >&2
  exit 2
fi
reference="$here/$name.csv"
if [ ! -f "$reference" ]; then
  echo "missing reference $reference (run tests/golden/update.sh)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$hcclsim" "${GOLDEN_ARGS[@]}" >"$tmp/out.csv" 2>"$tmp/err.txt"
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: hcclsim ${GOLDEN_ARGS[*]} exited with $rc" >&2
  cat "$tmp/err.txt" >&2
  exit 1
fi
if ! diff -u "$reference" "$tmp/out.csv" >"$tmp/diff.txt"; then
  echo "FAIL: output of 'hcclsim ${GOLDEN_ARGS[*]}' differs from $reference:" >&2
  cat "$tmp/diff.txt" >&2
  echo "If the change is intended, regenerate with: tests/golden/update.sh $hcclsim $src" >&2
  exit 1
fi
echo "ok: $name matches $reference"
