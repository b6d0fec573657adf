#!/usr/bin/env bash
# `hcclsim moe` and `hcclsim validate` on the command line: bad parameters
# exit 2 naming the option; good runs exit 0 with the fields they promise;
# the calibration file's point-to-point rows hold their stated tolerances.
# usage: moe_validate.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
CASES=(moe_topk_over_experts moe_experts_not_divisible moe_zero_tokens moe_hidden_not_multiple moe_bad_routing
       moe_zipf_nan moe_routing_file_bad moe_good_a3_normal moe_good_a2_one_server moe_good_a2_two_servers
       moe_routing_deterministic moe_routing_file moe_trace validate_bad_file validate_p2p_within_tolerance
       validate_json_plot moe_ep_uneven_servers)
start_cases
cm="$src/configs/topologies/cloudmatrix384.json"
a2c="$src/configs/topologies/a2-cluster.json"
small=(--ep 8 --tokens 64 --hidden 1024 --topk 4 --experts 32)
expect_rc=2
expect=()
py() { /usr/bin/python3 - "$@"; }
case "$name" in
  moe_topk_over_experts)
    args=(moe dispatch --ep 8 --tokens 64 --hidden 1024 --topk 9 --experts 8); expect=("--topk" "8") ;;
  moe_experts_not_divisible)
    args=(moe dispatch --ep 8 --tokens 64 --hidden 1024 --topk 4 --experts 36); expect=("--experts" "divide") ;;
  moe_zero_tokens)
    args=(moe dispatch --ep 8 --tokens 0 --hidden 1024 --topk 4 --experts 32); expect=("--tokens") ;;
  moe_hidden_not_multiple)
    args=(moe dispatch --ep 8 --tokens 64 --hidden 1000 --topk 4 --experts 32); expect=("--hidden" "128") ;;
  moe_bad_routing)
    args=(moe dispatch "${small[@]}" --routing hotspot); expect=("--routing" "uniform") ;;
  moe_zipf_nan)
    args=(moe dispatch "${small[@]}" --routing zipf:nan); expect=("--routing" "zipf") ;;
  moe_routing_file_bad)
    echo '{"experts": [[[1, 2, 3, 40]]]}' >"$tmp/r.json"
    args=(moe dispatch "${small[@]}" --routing "file:$tmp/r.json"); expect=("$tmp/r.json" '$.experts') ;;
  moe_good_a3_normal)
    args=(moe both "${small[@]}" --topology "$cm" --format json); expect_rc=0 ;;
  moe_good_a2_one_server)
    args=(moe both "${small[@]}" --mode low_latency --format json); expect_rc=0 ;;
  moe_good_a2_two_servers)
    args=(moe both --ep 16 --tokens 64 --hidden 1024 --topk 4 --experts 32 --topology "$a2c" --servers 2 --format json)
    expect_rc=0 ;;
  moe_ep_uneven_servers)
    # 12 ranks over two A2 servers (8 + 4): a row to the other server goes to
    # the rank of the same local index there, which the 4-rank half lacks.
    args=(moe dispatch --ep 12 --tokens 64 --hidden 1024 --topk 4 --experts 48 --topology "$a2c" --servers 2)
    expect=("--ep" "SDMA domains" "8 and 4") ;;
  moe_routing_deterministic|moe_routing_file|moe_trace|validate_bad_file|validate_p2p_within_tolerance|validate_json_plot) ;;
  *) echo "unknown case '$name'; cases: ${CASES[*]}" >&2; exit 2 ;;
esac
fail=0
case "$name" in
  moe_routing_deterministic)
    "$hcclsim" moe both "${small[@]}" --routing zipf:1 --seed 7 --format csv >"$tmp/a.csv" || fail=1
    "$hcclsim" moe both "${small[@]}" --routing zipf:1 --seed 7 --format csv >"$tmp/b.csv" || fail=1
    "$hcclsim" moe both "${small[@]}" --routing zipf:1 --seed 8 --format csv >"$tmp/c.csv" || fail=1
    cmp -s "$tmp/a.csv" "$tmp/b.csv" || { echo "FAIL: the same seed gave different results" >&2; fail=1; }
    cmp -s "$tmp/a.csv" "$tmp/c.csv" && { echo "FAIL: another seed gave the same routing and times" >&2; fail=1; } ;;
  moe_routing_file)
    # Every token of every rank picks experts 0..3 (rank 0's): all rows go to rank 0.
    py "$tmp/r.json" <<'PY'
import json, sys
json.dump({"experts": [[[0, 1, 2, 3] for _ in range(64)] for _ in range(8)]}, open(sys.argv[1], "w"))
PY
    "$hcclsim" moe dispatch "${small[@]}" --routing "file:$tmp/r.json" --format json >"$tmp/out.json" || fail=1
    py "$tmp/out.json" <<'PY' || fail=1
import json, sys
row = json.load(open(sys.argv[1]))[0]
# 32 experts: 4 per rank, so experts 0..3 are all rank 0's: imbalance = 32 / 4 = 8.
assert abs(row["expert_imbalance"] - 8.0) < 1e-9, row
assert row["time_min_us"] <= row["time_mean_us"] <= row["time_us"], row
PY
    ;;
  moe_trace)
    "$hcclsim" moe dispatch "${small[@]}" --topology "$cm" --trace "$tmp/t.json" >/dev/null || fail=1
    py "$tmp/t.json" <<'PY' || fail=1
import json, sys
names = {e.get("name") for e in json.load(open(sys.argv[1]))["traceEvents"]}
for n in ("AIV Copy", "Flag Set", "Flag Wait"):
    assert n in names, (n, sorted(x for x in names if x))
PY
    ;;
  validate_bad_file)
    echo '{"points": [{"id": "x", "group": "g", "topology": "nope.json", "op": "all_reduce", "metric": "time_us", "value": 1, "source": "s", "size_bytes": 1024, "size_means": "hccl_test"}]}' >"$tmp/m.json"
    args=(validate "$tmp/m.json"); expect=("$tmp/m.json" '$.points[0].topology' "nope.json")
    run_case ;;
  validate_p2p_within_tolerance)
    # Every point-to-point row with a stated tolerance holds it (--check exits 1 otherwise).
    "$hcclsim" validate "$src/configs/calibration/measurements.json" --only A2-1,A2-2,A2-3,A2-4,A3-1,A3-2 --check --format csv >"$tmp/v.csv" || fail=1
    [ "$(grep -c ',ok,' "$tmp/v.csv")" -ge 40 ] || { echo "FAIL: fewer than 40 rows within tolerance" >&2; fail=1; } ;;
  validate_json_plot)
    "$hcclsim" validate "$src/configs/calibration/measurements.json" --only A2-1 --format json --plot "$tmp/p.svg" >"$tmp/v.json" || fail=1
    py "$tmp/v.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["points"]) == 16 and all({"id", "group", "measured", "simulated", "error_pct", "executor"} <= set(p) for p in d["points"])
assert d["groups"][0]["points"] == 16 and d["groups"][0]["mean_abs_error_pct"] < 5
PY
    grep -q "<svg" "$tmp/p.svg" && grep -q "<circle" "$tmp/p.svg" || { echo "FAIL: no SVG scatter" >&2; fail=1; } ;;
  *)
    run_case
    if [ "$expect_rc" -eq 0 ]; then
      py "$tmp/out.txt" <<'PY' || fail=1
import json, sys
rows = json.load(open(sys.argv[1]))
need = {"phase", "mode", "ep", "tokens", "hidden", "topk", "experts", "dtype", "time_us", "time_min_us", "time_mean_us",
        "bandwidth_GBps", "bytes_per_rank", "link_bytes"}
assert len(rows) == 2 and all(need <= set(r) for r in rows), rows
assert all(r["time_us"] > 0 and r["bandwidth_GBps"] > 0 for r in rows), rows
PY
    fi ;;
esac
[ $fail -eq 0 ] && echo "ok: $name"
exit $fail
