#!/usr/bin/env bash
# `hcclsim run` on program files: bad programs exit with code 2 and a message
# on stderr naming the file and the JSON path (never a crash, exit < 128);
# programs that cannot finish exit with code 1 and the report on stderr; the
# configs/programs examples run (exit 0) and their --format json output parses.
# usage: check.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
here="$src/tests/programs"
a2="$src/configs/topologies/a2-server.json"
a3="$src/configs/topologies/a3-server.json"

CASES=(malformed_json unknown_key unknown_collective inter_group_sync_on_a2 timeout_without_unit undefined_handle
       never_commits deadlock_lost_record cycle missing_program
       run_seed_alltoall_allgather run_seed_thread_notify run_fused_matmul_allgather sync_order_in_json
       seed_without_sync_on_a2 run_moe_layer_a3 run_moe_layer_a2 moe_layer_deterministic bad_moe_topk bad_moe_ep
       bad_moe_on_aic moe_matmul_never_released)
start_cases

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
  run_moe_layer_a3)
    # The shipped fused MoE layer: dispatch, grouped matmul, combine. On every
    # rank combine starts no earlier than the two matmuls after that rank's
    # dispatch could have run (their time from the flops and the profile's AIC rate).
    args=(run --program "$src/configs/programs/moe-layer-a3.json" --topology "$a3" --format json)
    expect_rc=0
    json_check='
m = {x["name"]: x for x in d["moe"]}
assert sorted(m) == ["combine", "dispatch"], m
assert m["dispatch"]["op"] == "moe_dispatch" and m["combine"]["op"] == "moe_combine", m
assert m["dispatch"]["ep"] == 16 and m["dispatch"]["mode"] == "normal" and m["dispatch"]["dtype"] == "int8"
dr = {r["rank"]: r for r in m["dispatch"]["ranks"]}
cr = {r["rank"]: r for r in m["combine"]["ranks"]}
assert sorted(dr) == list(range(16)) and sorted(cr) == list(range(16))
rate = 24 * 15.6e12
matmuls_us = (2 * 32768 * 4096 * 7168 + 2 * 32768 * 7168 * 2048) / rate * 1e6
for r in range(16):
    assert cr[r]["start_us"] - dr[r]["end_us"] >= matmuls_us - 1e-3, (r, dr[r], cr[r], matmuls_us)
assert any(s["label"] == "matmul" for s in d["critical_path"]), d["critical_path"]
assert d["total_us"] >= m["combine"]["end_us"]' ;;
  run_moe_layer_a2)
    args=(run --program "$src/configs/programs/moe-layer-a2.json" --format json)
    expect_rc=0
    json_check='
m = {x["name"]: x for x in d["moe"]}
assert m["dispatch"]["ep"] == 8 and len(m["combine"]["ranks"]) == 8, m
dr = {r["rank"]: r for r in m["dispatch"]["ranks"]}
for r in m["combine"]["ranks"]:
    assert r["start_us"] > dr[r["rank"]]["end_us"], (r, dr[r["rank"]])' ;;
  moe_layer_deterministic)
    # Same inputs, same output bit for bit (table and JSON).
    args=(run --program "$src/configs/programs/moe-layer-a2.json" --format json)
    expect_rc=0
    json_check='assert len(d["moe"]) == 2' ;;
  bad_moe_topk)
    file="$here/bad-moe-topk.json"
    args=(run --program "$file")
    expect=("$file" '$.kernels[0].aiv[0].topk' "at least that many experts") ;;
  bad_moe_ep)
    file="$here/bad-moe-ep.json"
    args=(run --program "$file")
    expect=("$file" '$.kernels[0].aiv[1].ep' "8 ranks" '$.kernels[0].ranks') ;;
  bad_moe_on_aic)
    file="$here/bad-moe-on-aic.json"
    args=(run --program "$file")
    expect=("$file" '$.kernels[0].aic[0].op' '"aiv" list') ;;
  moe_matmul_never_released)
    file="$here/moe-matmul-never-released.json"
    args=(run --program "$file")
    expect_rc=1
    expect=("moe-matmul-never-released" "cannot finish" "cross-core flag 1" "AIC list") ;;
  *)
    echo "unknown case '$name'; known: ${CASES[*]}" >&2
    exit 2 ;;
esac

run_case
if [ "$name" = moe_layer_deterministic ] && [ $fail -eq 0 ]; then
  for f in json table; do
    "$hcclsim" run --program "$src/configs/programs/moe-layer-a2.json" --format $f >"$tmp/a.$f" 2>&1 || fail=1
    "$hcclsim" run --program "$src/configs/programs/moe-layer-a2.json" --format $f >"$tmp/b.$f" 2>&1 || fail=1
    cmp -s "$tmp/a.$f" "$tmp/b.$f" || { echo "FAIL: two runs gave different --format $f output" >&2; fail=1; }
  done
  cmp -s "$tmp/a.json" "$tmp/out.txt" || { echo "FAIL: the first run differs from a later one" >&2; fail=1; }
fi
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
