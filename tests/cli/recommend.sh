#!/usr/bin/env bash
# hcclsim recommend (issue 43, item 2): the table, JSON and env outputs on the
# A2 server, the recommended settings re-run with perf --algo --expansion,
# and bad input (exit 2 naming the option).
# usage: recommend.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
topology="$src/configs/topologies/a2-server.json"

CASES=(table_a2_server json_best_reproduced_by_perf json_best_reproduced_cloudmatrix384 env_nothing_when_default_best env_exports_best out_file
       unknown_op op_twice bad_format bad_model bad_size_range help_lists_recommend)
start_cases

fail=0
expect_rc=0
expect=()
# best_reproduced JSON TOPOLOGY ROWS: every row has the fields, a best no
# slower than the default, the gain formula, and its best setting re-run with
# perf --algo --expansion gives the predicted time and executor.
best_reproduced() {
  python3 - "$1" "$hcclsim" "$2" "$3" <<'EOF' || fail=1
import json, subprocess, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == int(sys.argv[4]), len(rows)
for r in rows:
    for k in ("op", "data_size", "ranks", "default", "best", "gain_pct"):
        assert k in r, k
    for side in ("default", "best"):
        for k in ("executor", "algo", "expansion", "time_us"):
            assert k in r[side], (side, k)
    d, b = r["default"]["time_us"], r["best"]["time_us"]
    assert b <= d, r
    assert abs(r["gain_pct"] - (d / b - 1) * 100) < 1e-9, r
    out = subprocess.run([sys.argv[2], "perf", r["op"], "--topology", sys.argv[3], "-b", str(r["data_size"]),
                          "-e", str(r["data_size"]), "--algo", r["best"]["algo"], "--expansion",
                          r["best"]["expansion"], "--model", r["model"], "--format", "jsonl"],
                         capture_output=True, text=True, check=True).stdout
    row = json.loads(out.splitlines()[0])
    assert abs(row["time_us"] - b) < 1e-6, (r, row["time_us"])
    assert row["executor"] == r["best"]["executor"], (r, row["executor"])
print("ok:", len(rows), "rows reproduced by perf")
EOF
}

case "$name" in
  table_a2_server)
    args=(recommend --topology "$topology" -b 1M -e 64M)
    run_case
    check "a heading naming the ranks and topology" contains "$tmp/out.txt" "8 ranks of a2-server, fp16, data_size 1M..64M"
    check "6 ops x 7 sizes" [ "$(grep -cE '^(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce) ' "$tmp/out.txt")" -eq 42 ]
    check "the gain column" contains "$tmp/out.txt" "gain_%" ;;
  json_best_reproduced_by_perf)
    args=(recommend --topology "$topology" -b 1M -e 16M -f 4 --format json)
    run_case
    best_reproduced "$tmp/out.txt" "$topology" 18 ;;
  json_best_reproduced_cloudmatrix384)
    cm384="$src/configs/topologies/cloudmatrix384.json"
    args=(recommend --topology "$cm384" --ops all_reduce,all_gather,broadcast -b 1M -e 16M -f 16 --format json)
    run_case
    best_reproduced "$tmp/out.txt" "$cm384" 6 ;;
  env_nothing_when_default_best)
    # Broadcast on the A2 server: the mesh default beats the ring and AIV has
    # no Broadcast executor, so nothing is exported.
    args=(recommend --topology "$topology" --ops broadcast -b 1M -e 64M --format env)
    run_case
    check "the op's block says so" contains "$tmp/out.txt" "already best"
    check "no export line" [ "$(grep -c '^export' "$tmp/out.txt")" -eq 0 ] ;;
  env_exports_best)
    # AllReduce on the A2 server: AIV beats HOST summed over 1M..4M (at 64M the per-NPU AIV limit, npu.aiv.remote_bandwidth, makes HOST win).
    args=(recommend --topology "$topology" --ops all_reduce -b 1M -e 4M --format env)
    run_case
    check "the expansion mode exported" [ "$(grep -c '^export HCCL_OP_EXPANSION_MODE=AIV$' "$tmp/out.txt")" -eq 1 ]
    check "no HCCL_ALGO (the levels stay HCCL's)" [ "$(grep -c '^export HCCL_ALGO' "$tmp/out.txt")" -eq 0 ]
    check "the one-setting-per-process comment" contains "$tmp/out.txt" "one setting per process"
    check "the block names the size range" contains "$tmp/out.txt" "# all_reduce, data_size 1M..4M on 8 ranks"
    (. "$tmp/out.txt" && [ "${HCCL_OP_EXPANSION_MODE:-}" = AIV ])
    check "the output sources and sets the mode" [ $? -eq 0 ]
    # Broadcast on 5 A2 servers, 8K..128K: level 1 H-D_R beats HCCL's NHR by
    # about 1 us a call (the detailed model agrees), in HCCL_ALGO's per-op form.
    "$hcclsim" recommend --topology "$src/configs/topologies/a2-cluster.json" --servers 5 --ops broadcast -b 8K -e 128K \
      -f 4 --format env >"$tmp/cluster.txt" 2>"$tmp/err.txt"
    check "the cluster run exits 0" [ $? -eq 0 ]
    check "HCCL_ALGO exported per op" contains "$tmp/cluster.txt" 'export HCCL_ALGO="broadcast=level0:NA;level1:H-D_R"'
    (. "$tmp/cluster.txt" && [ "${HCCL_ALGO:-}" = "broadcast=level0:NA;level1:H-D_R" ])
    check "the cluster output sources" [ $? -eq 0 ] ;;
  out_file)
    args=(recommend --topology "$topology" --ops all_gather -b 1M -e 4M --format json --out "$tmp/rec.json")
    run_case
    check "nothing on stdout" [ ! -s "$tmp/out.txt" ]
    check "the JSON in the file" python3 -c 'import json,sys; assert len(json.load(open(sys.argv[1]))) == 3' "$tmp/rec.json" ;;
  unknown_op)
    args=(recommend --topology "$topology" --ops all_reduce,allreduce_bogus)
    expect_rc=2
    expect=("option --ops" "allreduce_bogus" "all_reduce")
    run_case ;;
  op_twice)
    args=(recommend --topology "$topology" --ops all_reduce,all_reduce_test)
    expect_rc=2
    expect=("option --ops" "twice")
    run_case ;;
  bad_format)
    args=(recommend --topology "$topology" --format csv)
    expect_rc=2
    expect=("option --format" "env")
    run_case ;;
  bad_model)
    args=(recommend --topology "$topology" --model fast)
    expect_rc=2
    expect=("option --model" "estimate")
    run_case ;;
  bad_size_range)
    args=(recommend --topology "$topology" -b 64M -e 1M)
    expect_rc=2
    expect=("option -b/-e")
    run_case ;;
  help_lists_recommend)
    "$hcclsim" help >"$tmp/out.txt" 2>"$tmp/err.txt"
    check "hcclsim help exits 0" [ $? -eq 0 ]
    check "the usage names recommend" contains "$tmp/out.txt" "hcclsim recommend [opts]"
    "$hcclsim" recommend --help >"$tmp/out.txt" 2>"$tmp/err.txt"
    check "recommend --help exits 0" [ $? -eq 0 ]
    for opt in --topology --servers --ops --minbytes --maxbytes --stepfactor --datatype --model --format --out; do
      check "recommend --help lists $opt" contains "$tmp/out.txt" "$opt"
    done
    check "--help says which model is the default" contains "$tmp/out.txt" "else detailed" ;;
  *) unknown_case ;;
esac
finish_case
