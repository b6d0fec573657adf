#!/usr/bin/env bash
# `hcclsim import` on the command line (issue 40, item 4): hccl_test's output
# and a torch_npu profile become a measurement file that `hcclsim validate`
# runs; the file perf's --format hccl_test wrote reproduces within what the
# printed table's rounding allows; bad input exits 2 naming the file and line,
# JSON path or option; --out is replaced only by a complete file.
# usage: import.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
CASES=(hccl_test_round_trip hccl_test_sample_log torch_profile_validates torch_profile_dir_forms out_replaced_only_whole
       out_not_a_regular_file no_table non_numeric_cell wrong_columns missing_op missing_out missing_topology unknown_op
       unknown_dtype log_fifo log_dev_zero p_disagrees_with_ranks topology_missing every_row_failed
       communication_json_bad_value communication_json_syntax no_communication_json help_says_what_is_read)
start_cases
a2="$src/configs/topologies/a2-server.json"
sample_log="$src/tests/import/hccl_test_a2_8p.log"
profile="$src/tests/import/rank0_ascend_pt"
header='data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:'
py() { /usr/bin/python3 - "$@"; }
expect_rc=2
expect=()
log="$tmp/run.log"
case "$name" in
  no_table)
    printf 'the minbytes is 8192, maxbytes is 8192, iters is 20, warmup_iters is 5\nmpirun: job aborted\n' >"$log"
    args=(import hccl-test "$log" --op all_reduce --topology "$a2" --out "$tmp/m.json"); expect=("$log" "no hccl_test table") ;;
  non_numeric_cell)
    printf '%s\n8192 | 12.50 | 0.65 | success\n16384 | 1x.00 | 1.3 | success\n' "$header" >"$log"
    args=(import hccl-test "$log" --op all_reduce --topology "$a2" --out "$tmp/m.json")
    expect=("$log:3" "aveg_time '1x.00' is not a decimal number") ;;
  wrong_columns)
    printf '%s\n8192 | 12.50 | 0.65\n' "$header" >"$log"
    args=(import hccl-test "$log" --op all_reduce --topology "$a2" --out "$tmp/m.json")
    expect=("$log:2" "expected 4 columns" "found 3") ;;
  missing_op)
    args=(import hccl-test "$sample_log" --topology "$a2" --out "$tmp/m.json"); expect=("--op" "required") ;;
  missing_out)
    args=(import hccl-test "$sample_log" --op all_reduce --topology "$a2"); expect=("--out" "required") ;;
  missing_topology)
    args=(import torch-npu-profile "$profile" --out "$tmp/m.json"); expect=("--topology" "required") ;;
  unknown_op)
    args=(import hccl-test "$sample_log" --op scatter_test --topology "$a2" --out "$tmp/m.json")
    expect=("option --op" "scatter_test" "all_reduce") ;;
  unknown_dtype)
    args=(import hccl-test "$sample_log" --op all_reduce -d uint8 --topology "$a2" --out "$tmp/m.json")
    expect=("option -d" "uint8") ;;
  log_fifo)
    mkfifo "$tmp/fifo"
    args=(import hccl-test "$tmp/fifo" --op all_reduce --topology "$a2" --out "$tmp/m.json"); expect=("$tmp/fifo" "FIFO") ;;
  log_dev_zero)
    args=(import hccl-test /dev/zero --op all_reduce --topology "$a2" --out "$tmp/m.json")
    expect=("/dev/zero" "character device") ;;
  p_disagrees_with_ranks)
    args=(import hccl-test "$sample_log" --op all_reduce -p 8 --ranks 4 --topology "$a2" --out "$tmp/m.json")
    expect=("option -p" "disagree") ;;
  topology_missing)
    args=(import hccl-test "$sample_log" --op all_reduce --topology "$tmp/nope.json" --out "$tmp/m.json")
    expect=("$tmp/nope.json") ;;
  every_row_failed)
    printf '%s\n8192 | 12.50 | 0.65 | failed\n' "$header" >"$log"
    args=(import hccl-test "$log" --op all_reduce --topology "$a2" --out "$tmp/m.json")
    expect=("$log:2: check_result failed" "$log: nothing to import") ;;
  communication_json_bad_value)
    mkdir -p "$tmp/p/ASCEND_PROFILER_OUTPUT"
    printf '{"step1": {"p2p": {}, "collective": {"hcom_allReduce__1_1_1@7": {"Communication Time Info": {"Elapse Time(ms)": "0.4"}, "Communication Bandwidth Info": {"SDMA": {"Transit Size(MB)": 1.75}}}}}}\n' \
      >"$tmp/p/ASCEND_PROFILER_OUTPUT/communication.json"
    args=(import torch-npu-profile "$tmp/p" --topology "$a2" --out "$tmp/m.json")
    expect=("$tmp/p/ASCEND_PROFILER_OUTPUT/communication.json at \$.step1.collective.hcom_allReduce__1_1_1@7.Communication Time Info.Elapse Time(ms)"
            "expected a number >= 0") ;;
  communication_json_syntax)
    printf '{"step1": {"collective": {\n' >"$tmp/communication.json"
    args=(import torch-npu-profile "$tmp/communication.json" --topology "$a2" --out "$tmp/m.json")
    expect=("$tmp/communication.json" "invalid JSON at line 2") ;;
  no_communication_json)
    mkdir -p "$tmp/empty_ascend_pt/ASCEND_PROFILER_OUTPUT"
    args=(import torch-npu-profile "$tmp/empty_ascend_pt" --topology "$a2" --out "$tmp/m.json")
    expect=("$tmp/empty_ascend_pt" "no communication.json") ;;
  hccl_test_round_trip | hccl_test_sample_log | torch_profile_validates | torch_profile_dir_forms | \
    out_replaced_only_whole | out_not_a_regular_file | help_says_what_is_read) ;;
  *) echo "unknown case '$name'; cases: ${CASES[*]}" >&2; exit 2 ;;
esac
fail=0
case "$name" in
  hccl_test_round_trip)
    # The issue's contract: what perf printed in hccl_test's layout, imported,
    # is what validate simulates again, within the rounding of the printed
    # times (%.2f us: at most 0.005 us, under 0.02% of the smallest time here).
    "$hcclsim" perf all_reduce -b 8K -e 1M -f 4 --format hccl_test >"$log" || fail=1
    (cd "$src" && "$hcclsim" import hccl-test "$log" --op all_reduce --topology configs/topologies/a2-server.json \
      --out "$tmp/m.json") >"$tmp/out.txt" 2>"$tmp/err.txt" || { echo "FAIL: import exited $?" >&2; fail=1; }
    [ -s "$tmp/err.txt" ] && { echo "FAIL: import wrote to stderr:" >&2; cat "$tmp/err.txt" >&2; fail=1; }
    grep -qF "4 point(s) of group 'run all_reduce' written to $tmp/m.json" "$tmp/out.txt" ||
      { echo "FAIL: no summary line" >&2; fail=1; }
    (cd "$src" && "$hcclsim" validate "$tmp/m.json" --format json) >"$tmp/v.json" || fail=1
    py "$tmp/v.json" "$tmp/m.json" "$log" <<'PY' || fail=1
import json, sys
v = json.load(open(sys.argv[1]))
m = json.load(open(sys.argv[2]))["points"]
rows = [l.split("|") for l in open(sys.argv[3]) if l[:1].isdigit()]
assert len(v["points"]) == len(m) == len(rows) == 4, (len(v["points"]), len(m), len(rows))
for p, row in zip(m, rows):
    assert p["size_bytes"] == int(row[0]) and p["value"] == float(row[1]), (p, row)
    assert (p["op"], p["metric"], p["size_means"], p["dtype"]) == ("all_reduce", "time_us", "hccl_test", "fp32"), p
    assert p["topology"] == "configs/topologies/a2-server.json" and "ranks" not in p and "servers" not in p, p
for r in v["points"]:
    assert abs(r["error_pct"]) <= 0.5, r
assert [g["group"] for g in v["groups"]] == ["run all_reduce"], v["groups"]
PY
    ;;
  hccl_test_sample_log)
    # hccl_test's binary name, its -d bfp16 and -p: the failed row passed over with a warning naming its line.
    "$hcclsim" import hccl-test "$sample_log" --op all_reduce_test -d bfp16 -p 8 --group mine --topology "$a2" \
      --out "$tmp/m.json" >"$tmp/out.txt" 2>"$tmp/err.txt" || { echo "FAIL: import failed" >&2; cat "$tmp/err.txt" >&2; fail=1; }
    grep -qF "warning: $sample_log:11: check_result failed" "$tmp/err.txt" || { echo "FAIL: no warning for line 11" >&2; fail=1; }
    [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] || { echo "FAIL: more than the one warning" >&2; fail=1; }
    py "$tmp/m.json" "$sample_log" <<'PY' || fail=1
import json, sys
points = json.load(open(sys.argv[1]))["points"]
assert [p["size_bytes"] for p in points] == [8192, 65536, 4194304, 33554432], points
assert [p["value"] for p in points] == [25.31, 31.02, 187.93, 1164.07], points
for p in points:
    assert (p["op"], p["dtype"], p["ranks"], p["group"]) == ("all_reduce", "bf16", 8, "mine"), p
    assert p["id"] == "mine/all_reduce/%d" % p["size_bytes"], p
    assert p["source"].startswith("hccl_test output %s, line " % sys.argv[2]), p
PY
    "$hcclsim" validate "$tmp/m.json" --format csv >"$tmp/v.csv" || { echo "FAIL: validate failed" >&2; fail=1; }
    [ "$(grep -c '^mine/' "$tmp/v.csv")" -eq 4 ] || { echo "FAIL: validate did not run 4 points" >&2; fail=1; } ;;
  torch_profile_validates)
    "$hcclsim" import torch-npu-profile "$profile" --topology "$a2" --out "$tmp/m.json" >"$tmp/out.txt" 2>"$tmp/err.txt" ||
      { echo "FAIL: import failed" >&2; cat "$tmp/err.txt" >&2; fail=1; }
    for w in "'alltoallv' operator(s) passed over" "'broadcast' operator(s) passed over" "1 point-to-point operator(s)"; do
      grep -qF "$w" "$tmp/err.txt" || { echo "FAIL: no warning '$w'" >&2; fail=1; }
    done
    "$hcclsim" validate "$tmp/m.json" --format json >"$tmp/v.json" || { echo "FAIL: validate failed" >&2; fail=1; }
    py "$tmp/m.json" "$tmp/v.json" <<'PY' || fail=1
import json, sys
points = {p["id"]: p for p in json.load(open(sys.argv[1]))["points"]}
ar = points["rank0_ascend_pt/step1/hcom_allReduce__844_1_1@13681369207305868844"]
# 29.360128 MB of SDMA (HCCS holds the same bytes and is not added) over 2 * 7 / 8.
assert (ar["op"], ar["size_bytes"], ar["value"], ar["dtype"]) == ("all_reduce", 16777216, 412.27, "fp16"), ar
assert sorted(p["op"] for p in points.values()) == ["all_gather", "all_reduce", "all_reduce", "alltoall", "reduce_scatter"]
v = json.load(open(sys.argv[2]))
assert len(v["points"]) == 5 and all(r["simulated"] > 0 for r in v["points"]), v
PY
    ;;
  torch_profile_dir_forms)
    # The profiler's directory, its ASCEND_PROFILER_OUTPUT and the file itself give the same points.
    i=0
    for input in "$profile" "$profile/ASCEND_PROFILER_OUTPUT" "$profile/ASCEND_PROFILER_OUTPUT/communication.json"; do
      i=$((i + 1))
      "$hcclsim" import torch-npu-profile "$input" --topology "$a2" --group g --out "$tmp/m$i.json" >/dev/null 2>&1 ||
        { echo "FAIL: import of $input failed" >&2; fail=1; }
    done
    cmp -s "$tmp/m1.json" "$tmp/m2.json" && cmp -s "$tmp/m1.json" "$tmp/m3.json" ||
      { echo "FAIL: the three forms differ" >&2; fail=1; } ;;
  out_replaced_only_whole)
    # A failed import leaves --out as it was (and no temporary file); a good one replaces it, keeping its mode.
    echo keep >"$tmp/m.json"
    chmod 640 "$tmp/m.json"
    printf 'no table here\n' >"$log"
    "$hcclsim" import hccl-test "$log" --op all_reduce --topology "$a2" --out "$tmp/m.json" >/dev/null 2>&1
    [ $? -eq 2 ] || { echo "FAIL: a bad log did not exit 2" >&2; fail=1; }
    [ "$(cat "$tmp/m.json")" = keep ] || { echo "FAIL: --out changed by a failed import" >&2; fail=1; }
    "$hcclsim" import hccl-test "$sample_log" --op all_reduce --topology "$a2" --out "$tmp/m.json" >/dev/null 2>&1 ||
      { echo "FAIL: the good import failed" >&2; fail=1; }
    grep -q '"points"' "$tmp/m.json" || { echo "FAIL: --out not replaced" >&2; fail=1; }
    [ "$(stat -c %a "$tmp/m.json")" = 640 ] || { echo "FAIL: the mode of --out changed" >&2; fail=1; }
    ln -s m.json "$tmp/link.json"
    "$hcclsim" import hccl-test "$sample_log" --op reduce --topology "$a2" --out "$tmp/link.json" >/dev/null 2>&1 ||
      { echo "FAIL: import through a link failed" >&2; fail=1; }
    [ -L "$tmp/link.json" ] && grep -q '"op": "reduce"' "$tmp/m.json" || { echo "FAIL: the link's target not replaced" >&2; fail=1; }
    leftover=$(find "$tmp" -name '.*tmp-*')
    [ -z "$leftover" ] || { echo "FAIL: temporary files left: $leftover" >&2; fail=1; } ;;
  out_not_a_regular_file)
    mkdir "$tmp/dir"
    touch "$tmp/dir/inside"
    any=0
    for out in "$tmp/dir" /dev/null; do
      args=(import hccl-test "$sample_log" --op all_reduce --topology "$a2" --out "$out")
      expect=("option --out" "$out" "not a regular file")
      run_case
      [ $fail -eq 0 ] || any=1
    done
    fail=$any
    [ -f "$tmp/dir/inside" ] || { echo "FAIL: the directory was touched" >&2; fail=1; } ;;
  help_says_what_is_read)
    "$hcclsim" import hccl-test --help >"$tmp/h1.txt" || fail=1
    "$hcclsim" import torch-npu-profile --help >"$tmp/h2.txt" || fail=1
    "$hcclsim" help import >"$tmp/h3.txt" || fail=1
    for s in "Usage: hcclsim import hccl-test" "Not read" "check_result" "--op OP REQUIRED" "--out FILE REQUIRED"; do
      grep -qF -- "$s" "$tmp/h1.txt" || { echo "FAIL: hccl-test help lacks '$s'" >&2; fail=1; }
    done
    for s in "Usage: hcclsim import torch-npu-profile" "Not read" "Transit Size(MB)" "Elapse Time(ms)" "p2p"; do
      grep -qF -- "$s" "$tmp/h2.txt" || { echo "FAIL: torch-npu-profile help lacks '$s'" >&2; fail=1; }
    done
    grep -qF "hccl-test" "$tmp/h3.txt" && grep -qF "torch-npu-profile" "$tmp/h3.txt" ||
      { echo "FAIL: 'hcclsim help import' does not list both" >&2; fail=1; } ;;
  *)
    run_case
    [ -e "$tmp/m.json" ] && { echo "FAIL: a refused import wrote --out" >&2; fail=1; } ;;
esac
[ $fail -eq 0 ] && echo "ok: $name"
exit $fail
