#!/usr/bin/env bash
# --scenario (issue 43, item 1): the example scenarios of configs/scenarios/
# on perf, moe and run, their slowdowns pinned on small cases, failures as
# HCCL's (exit 1 with the reason), repeatable draws, and bad input (exit 2
# naming the file and JSON path, or the option).
# usage: scenario.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
scen="$src/configs/scenarios"
cm384="$src/configs/topologies/cloudmatrix384.json"

CASES=(hccs_link_down_fails hccs_link_degraded_json plane_lost_cloudmatrix planes_lost_slow_cloudmatrix all_planes_lost_fails
       slow_rank_a2 nic_down_fails jitter_same_seed_same_bytes table_footnote csv_columns moe_slow_rank run_program
       estimate_refused samples_without_scenario bad_scenario_path unmatched_selector trace_refused samples_out_of_range
       help_lists_scenario)
start_cases

fail=0
# refused_scenario JSON TEXT: perf with the scenario JSON exits 2 naming the
# file, the JSON path $.links[0] and TEXT.
refused_scenario() {
  echo "$1" >"$tmp/bad.json"
  args=(perf all_reduce -b 1M -e 1M --scenario "$tmp/bad.json")
  expect_rc=2
  expect=("$tmp/bad.json at \$.links[0]" "$2")
  run_case
}
expect_rc=0
expect=()
# holds JSON_FILE PYTHON_EXPR: the expression over `rows` (the JSON) must hold.
holds() {
  python3 - "$1" "$2" <<'PY' || fail=1
import json, sys
rows = json.load(open(sys.argv[1]))
if not eval(sys.argv[2]):
    print("FAIL: does not hold:", sys.argv[2], file=sys.stderr)
    print(json.dumps(rows, indent=1)[:3000], file=sys.stderr)
    sys.exit(1)
PY
}

case "$name" in
  hccs_link_down_fails)
    # Inside an A2 server HCCL's mesh has no path around a link that is down.
    args=(perf all_reduce -b 1M -e 1M --scenario "$scen/a2-hccs-link-down.json")
    expect_rc=1
    expect=("scenario $scen/a2-hccs-link-down.json" "npu0 cannot reach npu1" "hccs link npu0<->npu1 is down"
            "HCCL fails the operation")
    run_case
    check "no rows written" [ ! -s "$tmp/out.txt" ] ;;
  hccs_link_degraded_json)
    # All-gather of 64M on the A2 mesh: the halved link npu0-npu1 sets the pace.
    args=(perf all_gather -b 64M -e 64M --scenario "$scen/a2-hccs-link-degraded.json" --format json)
    run_case
    holds "$tmp/out.txt" 'rows[0]["scenario"]["healthy_time_us"] == 442.710399 and rows[0]["time_us"] == 843.3125'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["slowdown"] == 1.904885 and rows[0]["scenario"]["p50_us"] == rows[0]["time_us"]'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["changes"] == ["hccs npu0<->npu1 degraded: bandwidth x0.5 ($.links[0])"]'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["bottleneck"].startswith("hccs npu0->npu1 ")'
    holds "$tmp/out.txt" 'rows[0]["check_result"] == "success" and rows[0]["scenario"]["samples"] == 1' ;;
  plane_lost_cloudmatrix)
    # One UB plane of 7 lost on 2 CloudMatrix384 servers: AlltoAll's traffic
    # moves to the 6 left, which still carry it (the die ports limit it).
    args=(perf alltoall -b 4M -e 4M --topology "$cm384" --servers 2 --scenario "$scen/a3-plane-lost.json" --format json)
    run_case
    holds "$tmp/out.txt" 'rows[0]["scenario"]["healthy_time_us"] == 59.202231 and rows[0]["time_us"] == 59.223257'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["changes"][0].startswith("UB plane 3 lost: 2 server-switch links to its L2 switch down, traffic over the other 6 planes")'
    holds "$tmp/out.txt" 'rows[0]["check_result"] == "success"' ;;
  planes_lost_slow_cloudmatrix)
    # Five of seven planes lost: the two left are the bottleneck.
    echo '{"planes_lost": [0, 1, 2, 3, 4]}' >"$tmp/five.json"
    args=(perf alltoall -b 4M -e 4M --topology "$cm384" --servers 2 --scenario "$tmp/five.json" --format json)
    run_case
    holds "$tmp/out.txt" 'rows[0]["time_us"] == 72.726884 and rows[0]["scenario"]["slowdown"] == 1.228448'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["bottleneck"].startswith("ub switch")' ;;
  all_planes_lost_fails)
    echo '{"planes_lost": [0, 1, 2, 3, 4, 5, 6]}' >"$tmp/all.json"
    args=(perf all_gather -b 1M -e 1M --topology "$cm384" --servers 2 --scenario "$tmp/all.json")
    expect_rc=1
    expect=("cannot reach" "ub link" "is down" "HCCL fails the operation")
    run_case ;;
  slow_rank_a2)
    args=(perf all_reduce -b 1M -e 1M --scenario "$scen/slow-rank.json" --format json)
    run_case
    holds "$tmp/out.txt" 'rows[0]["scenario"]["healthy_time_us"] == 63.141765 and rows[0]["time_us"] == 164.981765'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["changes"] == ["slow rank 3: compute x1.5, +2.000 us per task ($.slow_ranks[0])"]' ;;
  nic_down_fails)
    args=(perf all_reduce -b 1M -e 1M --topology "$src/configs/topologies/a2-cluster.json" --servers 2
          --scenario "$scen/a2-nic-down.json")
    expect_rc=1
    expect=("roce link npu8<->switch0 is down" "a NIC down" "not modelled")
    run_case ;;
  jitter_same_seed_same_bytes)
    args=(perf all_reduce -b 1M -e 4M -f 4 --scenario "$scen/jitter-lognormal.json" --samples 20 --seed 7 --format json)
    run_case
    cp "$tmp/out.txt" "$tmp/first.json"
    run_case
    check "the same seed gives the same bytes" cmp -s "$tmp/first.json" "$tmp/out.txt"
    args=(perf all_reduce -b 1M -e 4M -f 4 --scenario "$scen/jitter-lognormal.json" --samples 20 --seed 8 --format json)
    run_case
    check "another seed gives other draws" differs "$tmp/first.json" "$tmp/out.txt"
    holds "$tmp/first.json" 'all(len(r["scenario"]["times_us"]) == 20 and r["scenario"]["samples"] == 20 and r["scenario"]["seed"] == 7 for r in rows)'
    holds "$tmp/first.json" 'all(r["scenario"]["p50_us"] <= r["scenario"]["p90_us"] <= r["scenario"]["p99_us"] <= r["scenario"]["max_us"] == max(r["scenario"]["times_us"]) for r in rows)'
    holds "$tmp/first.json" 'all(sorted(r["scenario"]["times_us"])[9] == r["scenario"]["p50_us"] == r["time_us"] for r in rows)'
    holds "$tmp/first.json" 'len(set(rows[0]["scenario"]["times_us"])) > 10' ;;
  table_footnote)
    args=(perf all_reduce -b 1M -e 8M -f 8 --scenario "$scen/a2-hccs-link-degraded.json")
    run_case
    check "what changed" contains "$tmp/out.txt" "# scenario $scen/a2-hccs-link-degraded.json: hccs npu0<->npu1 degraded: bandwidth x0.5 (\$.links[0])"
    check "one run" contains "$tmp/out.txt" "# no random part: one run; aveg_time above is its time"
    check "the columns" contains "$tmp/out.txt" "healthy_us       p50_us       p90_us       p99_us       max_us  slowdown  bottleneck (healthy -> scenario)"
    check "a line per row" [ "$(grep -cE '^# +(1048576|8388608) ' "$tmp/out.txt")" -eq 2 ]
    check "the 8M slowdown" contains "$tmp/out.txt" "154.417      254.113      254.113      254.113      254.113    1.6456" ;;
  csv_columns)
    args=(perf all_reduce -b 1M -e 1M --scenario "$scen/slow-rank.json" --format csv)
    run_case
    check "the scenario columns" contains "$tmp/out.txt" ",model,healthy_us,p50_us,p90_us,p99_us,max_us,slowdown,bottleneck"
    check "the row's" contains "$tmp/out.txt" ",detailed,63.141765,164.981765,164.981765,164.981765,164.981765,2.612879," ;;
  moe_slow_rank)
    args=(moe dispatch --ep 8 --tokens 64 --hidden 7168 --topk 8 --experts 64 --scenario "$scen/slow-rank.json" --format json)
    run_case
    holds "$tmp/out.txt" 'round(rows[0]["scenario"]["healthy_time_us"], 3) == 102.527 and rows[0]["time_us"] == 135.035'
    holds "$tmp/out.txt" 'rows[0]["scenario"]["slowdown"] == 1.317075 and rows[0]["scenario"]["changes"][0].startswith("slow rank 3")' ;;
  run_program)
    args=(run --program "$src/configs/programs/seed-thread-notify.json" --scenario "$scen/jitter-lognormal.json" --samples 5 --format json)
    run_case
    holds "$tmp/out.txt" 'rows["scenario"]["samples"] == 5 and rows["total_us"] == rows["scenario"]["p50_us"]'
    holds "$tmp/out.txt" 'rows["critical_path"][-1]["end_us"] == rows["total_us"]' ;;
  estimate_refused)
    args=(perf all_reduce -b 1M -e 1M --model estimate --scenario "$scen/slow-rank.json")
    expect_rc=2
    expect=("option --scenario" "--model estimate has no scenarios")
    run_case ;;
  samples_without_scenario)
    args=(perf all_reduce -b 1M -e 1M --samples 4)
    expect_rc=2
    expect=("option --samples" "needs --scenario")
    run_case ;;
  bad_scenario_path)
    refused_scenario '{"links": [{"kind": "hccs", "down": true, "bandwidth_factor": 0.5}]}' "down" ;;
  unmatched_selector)
    refused_scenario '{"links": [{"kind": "sio", "down": true}]}' "matches no link of topology 'a2-server'" ;;
  trace_refused)
    args=(perf all_reduce -b 1M -e 1M --scenario "$scen/slow-rank.json" --trace "$tmp/t.json")
    expect_rc=2
    expect=("option --trace")
    run_case
    check "no trace written" [ ! -e "$tmp/t.json" ] ;;
  samples_out_of_range)
    args=(perf all_reduce -b 1M -e 1M --scenario "$scen/jitter-lognormal.json" --samples 0)
    expect_rc=2
    expect=("option --samples" "[1, 10000]")
    run_case ;;
  help_lists_scenario)
    for cmd in perf moe run; do
      "$hcclsim" "$cmd" --help >"$tmp/out.txt" 2>"$tmp/err.txt"
      check "$cmd --help exits 0" [ $? -eq 0 ]
      for opt in --scenario --samples; do check "$cmd --help lists $opt" contains "$tmp/out.txt" "$opt"; done
      check "$cmd --help says what is simplified" contains "$tmp/out.txt" "Simplified"
    done
    "$hcclsim" perf --help >"$tmp/out.txt" 2>&1
    check "perf --help says the estimate refuses scenarios" contains "$tmp/out.txt" "--scenario (refused, exit 2)" ;;
  *) unknown_case ;;
esac
finish_case
