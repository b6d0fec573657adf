# Shared by the command-line case scripts (tests/cli/*.sh, tests/programs/check.sh).
# run_case runs "$hcclsim" "${args[@]}" and checks what every case checks: no
# crash (an exit code >= 128 is a signal), the exit code $expect_rc, and for an
# expected failure a message on stderr containing every string of "${expect[@]}"
# and no sign of an unhandled error; a valid run writes nothing to stderr.
# Leaves the output in $tmp/out.txt and $tmp/err.txt and sets fail=0 or 1.
run_case() {
  "$hcclsim" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
  rc=$?
  fail=0
  if [ $rc -ge 128 ]; then
    echo "FAIL: hcclsim ${args[*]} crashed (exit code $rc, signal $((rc - 128)))" >&2
    fail=1
  elif [ $rc -ne "$expect_rc" ]; then
    echo "FAIL: hcclsim ${args[*]} exited with $rc, expected $expect_rc" >&2
    fail=1
  fi
  if [ "$expect_rc" -ne 0 ]; then
    if [ ! -s "$tmp/err.txt" ]; then
      echo "FAIL: nothing on stderr" >&2
      fail=1
    fi
    for s in "${expect[@]}"; do
      if ! grep -qF -- "$s" "$tmp/err.txt"; then
        echo "FAIL: stderr does not mention '$s'" >&2
        fail=1
      fi
    done
    if grep -q "uncaught exception\|terminate called\|Segmentation" "$tmp/err.txt"; then
      echo "FAIL: stderr shows an unhandled error" >&2
      fail=1
    fi
  elif [ -s "$tmp/err.txt" ]; then
    echo "FAIL: a valid run wrote to stderr" >&2
    fail=1
  fi
}

# check DESCRIPTION COMMAND...: fails the case (fail=1) unless COMMAND succeeds.
check() {
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what" >&2
    fail=1
  fi
}
# contains FILE TEXT: FILE holds TEXT (fixed string).
contains() { grep -qF -- "$2" "$1"; }
# differs A B: the two files differ.
differs() { ! cmp -s "$1" "$2"; }

# The end of a case script: an unknown CASE exits 2 with the known ones;
# finish_case prints the outputs of a failed case and exits 1, or "ok: CASE".
unknown_case() {
  echo "unknown case '$name'; known: ${CASES[*]}" >&2
  exit 2
}
finish_case() {
  if [ "$fail" -ne 0 ]; then
    echo "--- stdout"; head -c 3000 "$tmp/out.txt" 2>/dev/null
    echo "--- stderr"; head -c 3000 "$tmp/err.txt" 2>/dev/null
    exit 1
  fi
  echo "ok: $name"
}
