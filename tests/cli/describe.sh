#!/usr/bin/env bash
# `hcclsim describe`: the module hierarchy a topology elaborates into, read
# back from SystemC: each NPU's stream engine with its units (counts from
# the profile), local memories and links by kind; bad options exit 2.
# usage: describe.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
CASES=(describe_a2_server describe_a3_server describe_bad_format describe_bad_topology describe_too_large)
start_cases
expect_rc=2
expect=()
fail=0
case "$name" in
  describe_a2_server|describe_a3_server)
    if [ "$name" = describe_a2_server ]; then
      topo=(--topology "$src/configs/topologies/a2-server.json"); npus=8; links='hccs_npu#__npu#'; nlinks=56
    else
      topo=(--topology "$src/configs/topologies/a3-server.json"); npus=16; links='sio_npu#__npu#'; nlinks=16
    fi
    "$hcclsim" describe "${topo[@]}" --format json >"$tmp/out.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    /usr/bin/python3 - "$tmp/out.json" "$npus" "$links" "$nlinks" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
npus, links, nlinks = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
m = {x["pattern"]: x for x in d["modules"]}
assert d["npus"] == npus, d["npus"]
assert m["npu#"]["kind"] == "hcclsim::TaskEngine" and m["npu#"]["count"] == npus, m["npu#"]
for unit, kind in (("notify", "NotifyUnit"), ("flags", "FlagMemory"), ("sdma", "UnitPool"), ("aic", "UnitPool"),
                   ("aiv", "UnitPool"), ("rdma", "RdmaQueuePairs")):
    u = m["npu#." + unit]
    assert u["kind"] == "hcclsim::" + kind and u["count"] == npus, u
assert m["npu#.sdma"]["detail"] == "16 SDMA engines", m["npu#.sdma"]
assert m["npu#.aic"]["detail"] == "24 AI Cube cores" and m["npu#.aiv"]["detail"] == "48 AI Vector cores"
assert m[links]["count"] == nlinks and m[links]["kind"] == "hcclsim::Channel", m[links]
assert m["npu#_memory"]["count"] == npus
# The product record the topology is built of (its profile's npu.product).
assert d["product"]["devices_per_server"] == npus and d["product"]["name"] == ("A2" if npus == 8 else "A3"), d["product"]
assert d["product"]["dies_per_chip"] == (1 if npus == 8 else 2), d["product"]
PY
    "$hcclsim" describe "${topo[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt" || fail=1
    grep -q "npu0.sdma .. npu$((npus - 1)).sdma" "$tmp/out.txt" || { echo "FAIL: table lacks the SDMA units" >&2; fail=1; }
    grep -q "^# product A[23]: servers of $npus " "$tmp/out.txt" || { echo "FAIL: table lacks the product line" >&2; fail=1; }
    # The links' per-task caps: HCCL's transport on A2 HCCS, one SDMA task
    # through an A3 die's switch port.
    if [ "$name" = describe_a2_server ]; then cap="one task of HCCL's transport at most 20.94 GB/s"; else cap="one SDMA read task at most 142.40 GB/s"; fi
    grep -q "^hccs_.*$cap" "$tmp/out.txt" || { echo "FAIL: the hccs links do not say '$cap'" >&2; fail=1; } ;;
  describe_too_large)
    args=(describe --topology "$src/configs/topologies/a2-cluster.json" --servers 65536); expect=("--servers" "--max-memory"); run_case
    # (a platform has no tasks to count: the message gives none)
    ! grep -q "tasks)" "$tmp/err.txt" || { echo "FAIL: the refusal counts tasks a platform does not have" >&2; fail=1; } ;;
  describe_bad_format) args=(describe --format yaml); expect=("--format" "yaml"); run_case ;;
  describe_bad_topology)
    echo '{"name": "x"}' >"$tmp/t.json"
    args=(describe --topology "$tmp/t.json"); expect=("$tmp/t.json"); run_case ;;
  *) echo "unknown case '$name'; cases: ${CASES[*]}" >&2; exit 2 ;;
esac
[ $fail -eq 0 ] && echo "ok: $name"
exit $fail
