#!/usr/bin/env bash
# `hcclsim run` on program files: bad programs exit with code 2 and a message
# on stderr naming the file and the JSON path (never a crash, exit < 128);
# programs that cannot finish exit with code 1 and the report on stderr; the
# configs/programs examples run (exit 0) and their --format json output parses.
# usage: check.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 HCCLSIM SOURCE_DIR CASE" >&2
  exit 2
fi
hcclsim=$1
src=$2
name=$3
here="$src/tests/programs"
a2="$src/configs/topologies/a2-server.json"
a3="$src/configs/topologies/a3-server.json"

CASES=(malformed_json unknown_key unknown_collective inter_group_sync_on_a2 timeout_without_unit undefined_handle
       never_commits deadlock_lost_record cycle missing_program
       run_seed_alltoall_allgather run_seed_thread_notify run_fused_matmul_allgather sync_order_in_json
       seed_without_sync_on_a2)
if [ "$name" = list ]; then
  printf '%s\n' "${CASES[@]}"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=../lib/run_case.sh
. "$(dirname "$0")/../lib/run_case.sh"

expect_rc=2
expect=()      # substrings stderr must contain
json_check=""  # python3 code run on the --format json output (stdin), for exit-0 cases
case "$name" in
  malformed_json)
    file="$here/bad-malformed.json"
    args=(run --program "$file")
    expect=("$file" "invalid JSON" "line 5") ;;
  unknown_key)
    file="$here/bad-unknown-key.json"
    args=(run --program "$file" --topology "$a3")
    expect=("$file" '$.kernels[0].aiv[3]' "contxt" "unknown key" "expected one of") ;;
  unknown_collective)
    file="$here/bad-unknown-collective.json"
    args=(run --program "$file" --topology "$a3")
    expect=("$file" '$.kernels[0].aiv[4].collective' "all_to_all" "expected one of" "alltoall") ;;
  inter_group_sync_on_a2)
    file="$src/configs/programs/seed-alltoall-allgather.json"
    args=(run --program "$file" --topology "$a2")
    expect=("$file" '$.kernels[0].aiv[5]' "HCCL_E_NOT_SUPPORT" "InterHcclGroupSync") ;;
  timeout_without_unit)
    file="$here/bad-timeout-no-unit.json"
    args=(run --program "$file")
    expect=("$file" '$.host[0].ops[1].timeout' "unit") ;;
  undefined_handle)
    file="$here/bad-undefined-handle.json"
    args=(run --program "$file" --topology "$a3")
    expect=("$file" '$.kernels[0].aiv[8].handle' "group2_handle") ;;
  never_commits)
    file="$here/never-commits.json"
    args=(run --program "$file" --topology "$a3")
    expect_rc=1
    expect=("never-commits" "cannot finish" "never commits" "domain 1") ;;
  deadlock_lost_record)
    file="$here/deadlock-lost-record.json"
    args=(run --program "$file")
    expect_rc=1
    expect=("deadlock-lost-record" "did not finish" "deadlock" "d0/AICPU_TS/thread1" "Notify Wait"
            "waiting for a notify record") ;;
  cycle)
    file="$here/cycle.json"
    args=(run --program "$file")
    expect_rc=1
    expect=("cycle" "d0/CPU_TS/thread0" "d0/CPU_TS/thread1" "Notify Wait") ;;
  missing_program)
    file="$tmp/no-such-program.json"
    args=(run --program "$file")
    expect=("$file") ;;
  run_seed_alltoall_allgather)
    args=(run --program "$src/configs/programs/seed-alltoall-allgather.json" --topology "$a3" --format json)
    expect_rc=0
    json_check='
names = sorted(h["name"] for h in d["handles"])
assert names == ["group0_handle", "group1_handle"], names
assert d["total_us"] > 0
assert len(d["critical_path"]) > 0' ;;
  run_seed_thread_notify)
    args=(run --program "$src/configs/programs/seed-thread-notify.json" --format json)
    expect_rc=0
    json_check='
assert d["handles"] == [] and d["total_us"] > 0
waits = [s for s in d["critical_path"] if s["task"] == "Notify Wait"]
assert waits, d["critical_path"]' ;;
  run_fused_matmul_allgather)
    args=(run --program "$src/configs/programs/fused-matmul-allgather.json" --topology "$a2" --format json)
    expect_rc=0
    json_check='
(h,) = d["handles"]
assert h["name"] == "gather" and h["op"] == "all_gather", h
assert len(h["ranks"]) == 8
assert d["total_us"] >= h["end_us"] - h["start_us"]' ;;
  sync_order_in_json)
    # The CLI per-rank spans of the 1M seed: on every rank the AllGather starts
    # no earlier than the AlltoAll ends (exact: microseconds with 6 decimals = ps).
    args=(run --program "$here/seed-alltoall-allgather-1m.json" --topology "$a3" --format json)
    expect_rc=0
    json_check='
h = {x["domain"]: {r["rank"]: r for r in x["ranks"]} for x in d["handles"]}
assert sorted(h[0]) == [0, 1, 2, 3] and sorted(h[1]) == [0, 1, 2, 3], h
for r in range(4):
    assert round(h[1][r]["start_us"] * 1e6) >= round(h[0][r]["end_us"] * 1e6), (r, h[0][r], h[1][r])' ;;
  seed_without_sync_on_a2)
    # Without its one A3-only call the seed runs on A2 as well.
    args=(run --program "$here/seed-alltoall-allgather-nosync.json" --topology "$a2" --format json)
    expect_rc=0
    json_check='
assert sorted(h["op"] for h in d["handles"]) == ["all_gather", "alltoall"], d["handles"]' ;;
  *)
    echo "unknown case '$name'; known: ${CASES[*]}" >&2
    exit 2 ;;
esac

run_case
if [ $expect_rc -eq 0 ]; then
  if command -v python3 >/dev/null 2>&1; then
    if ! python3 -c 'import json, sys
d = json.load(sys.stdin)
exec(sys.argv[1])' "$json_check" <"$tmp/out.txt"; then
      echo "FAIL: the --format json output does not parse or does not hold" >&2
      fail=1
    fi
  elif ! grep -q '"total_us"' "$tmp/out.txt"; then
    echo "FAIL: no total_us in the --format json output" >&2
    fail=1
  fi
fi
echo "--- stderr of: hcclsim ${args[*]}"
cat "$tmp/err.txt"
if [ $fail -ne 0 ]; then
  echo "--- stdout"
  head -c 4000 "$tmp/out.txt"
  exit 1
fi
echo "ok: $name (exit code $rc)"
