#!/usr/bin/env bash
# Cluster input to the hcclsim command line (--servers, --rank-table,
# --profile, --ranks and --algo across servers). A bad case must exit with
# code 2 (never >= 128, which would be a crash by signal) and print a message
# on stderr naming the problem; a good case must exit 0, write nothing on
# stderr and pass the data check on every row.
# usage: cluster_input.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
topologies="$src/configs/topologies"
a2_cluster="$topologies/a2-cluster.json"
a2_profile="$src/configs/profiles/a2-910b.json"
a3_profile="$src/configs/profiles/a3-910c.json"
a3_table="$src/configs/ranktables/a3_2superpods_4servers_64dies.json"
a2_table="$src/configs/ranktables/a2_doc_example.json"
sweep=(-b 8K -e 64K -f 8)

CASES=(servers_zero servers_on_listed_topology servers_not_whole_supernodes rank_table_without_profile
       rank_table_with_topology rank_table_with_servers bad_rank_table missing_rank_table a3_table_with_a2_profile
       ranks_cut_server algo_pipeline algo_bogus good_level0_ring_across_servers uneven_servers_rank_table
       good_a2_cluster_all_reduce good_a3_rank_table_alltoall good_cluster_json good_a2_rank_table
       good_one_npu_per_server)
start_cases

# An A2 rank table (version 1.0) with the given device counts per server.
a2_rank_table() {  # a2_rank_table OUT COUNT...
  local out=$1
  shift
  local rank=0 s=0 first_server=1
  {
    printf '{"status": "completed", "version": "1.0", "server_count": "%d", "server_list": [\n' $#
    for count in "$@"; do
      [ $first_server -eq 1 ] || printf ',\n'
      first_server=0
      printf '  {"server_id": "node_%d", "device": [' $s
      for ((d = 0; d < count; ++d)); do
        [ $d -eq 0 ] || printf ', '
        printf '{"device_id": "%d", "device_ip": "192.168.%d.%d", "device_port": "16667", "rank_id": "%d"}' \
          $d $((s + 1)) $((d + 8)) $rank
        rank=$((rank + 1))
      done
      printf ']}'
      s=$((s + 1))
    done
    printf '\n]}\n'
  } >"$out"
}

expect_rc=2
expect=()        # substrings stderr must contain (bad cases)
expect_out=()    # substrings stdout must contain (good cases)
json=0           # good case: stdout is --format json, checked by parse_json
args=()
case "$name" in
  servers_zero)
    args=(perf all_reduce --topology "$a2_cluster" --servers 0)
    expect=("--servers" "0" "out of range") ;;
  servers_on_listed_topology)
    args=(perf all_reduce --topology "$topologies/a2-server.json" --servers 2)
    expect=("--servers" "a2-server.json" "\"cluster\"") ;;
  servers_not_whole_supernodes)
    args=(perf all_reduce --topology "$topologies/cloudmatrix384x4.json" --servers 50)
    expect=("--servers" "50" "whole supernodes of 48") ;;
  rank_table_without_profile)
    args=(perf all_reduce --rank-table "$a2_table")
    expect=("--rank-table" "--profile") ;;
  rank_table_with_topology)
    args=(perf all_reduce --rank-table "$a2_table" --profile "$a2_profile" --topology "$a2_cluster")
    expect=("--rank-table" "--topology" "not both") ;;
  rank_table_with_servers)
    args=(perf all_reduce --rank-table "$a2_table" --profile "$a2_profile" --servers 4)
    expect=("--servers" "rank table") ;;
  bad_rank_table)
    args=(perf all_reduce --rank-table "$src/tests/ranktables/duplicate_rank_id.json" --profile "$a2_profile")
    expect=("duplicate_rank_id.json" '$.server_list[' "rank_id" "unique") ;;
  missing_rank_table)
    args=(perf all_reduce --rank-table "$tmp/no-such-table.json" --profile "$a2_profile")
    expect=("$tmp/no-such-table.json") ;;
  a3_table_with_a2_profile)
    # The profile's NPU model says which format to read: an A3 (1.2) table is not an A2 one.
    args=(perf all_reduce --rank-table "$a3_table" --profile "$a2_profile")
    expect=("a3_2superpods_4servers_64dies.json" '$.version' "1.2") ;;
  ranks_cut_server)
    args=(perf all_reduce --topology "$a2_cluster" --servers 2 --ranks 12)
    expect=("12 ranks" "whole servers of 8") ;;
  algo_pipeline)
    # Pipeline is modelled on A2 clusters only; this is two A3 supernodes.
    args=(perf all_reduce --rank-table "$a3_table" --profile "$a3_profile" --algo "level1:pipeline")
    expect=("pipeline" "A2 clusters") ;;
  algo_bogus)
    args=(perf all_reduce --topology "$a2_cluster" --servers 2 --algo "level1:bogus")
    expect=("--algo" "bogus" "not known") ;;
  good_level0_ring_across_servers)
    # The level-0 ring has the stage forms of a hierarchy (A3 runs them so): across servers it checks.
    args=(perf all_reduce --topology "$a2_cluster" --servers 2 --algo "level0:ring" "${sweep[@]}" --format csv)
    expect_out=("level0:ring;level1:ring" "success" "AllReduceRingExecutor")
    expect_rc=0 ;;
  uneven_servers_rank_table)
    a2_rank_table "$tmp/uneven.json" 2 2 4
    args=(perf all_reduce --rank-table "$tmp/uneven.json" --profile "$a2_profile" "${sweep[@]}")
    expect=("equal size") ;;
  good_a2_cluster_all_reduce)
    args=(perf all_reduce --topology "$a2_cluster" --servers 2 "${sweep[@]}" --format csv)
    expect_out=("all_reduce,16," "level0:fullmesh;level1:ring" "success")
    expect_rc=0 ;;
  good_a3_rank_table_alltoall)
    args=(perf alltoall --rank-table "$a3_table" --profile "$a3_profile" "${sweep[@]}" --format csv)
    expect_out=("alltoall,64," "level1:pairwise" "success")
    expect_rc=0 ;;
  good_cluster_json)
    args=(perf all_reduce --topology "$a2_cluster" --servers 4 -r 9 "${sweep[@]}" --format json)
    json=1
    expect_rc=0 ;;
  good_a2_rank_table)
    args=(perf broadcast --rank-table "$a2_table" --profile "$a2_profile" -r 3 "${sweep[@]}" --format csv)
    expect_out=("broadcast,4," "level1:" "success")
    expect_rc=0 ;;
  good_one_npu_per_server)
    # One device per server: no level 0 (it used to fail with "a collective needs at least 2 ranks").
    a2_rank_table "$tmp/one_npu.json" 1 1 1
    args=(perf all_reduce --rank-table "$tmp/one_npu.json" --profile "$a2_profile" "${sweep[@]}" --format csv)
    expect_out=("all_reduce,3," "level1:ring" "success")
    expect_rc=0 ;;
  *)
    echo "unknown case '$name'; known: ${CASES[*]}" >&2
    exit 2 ;;
esac

# Every row of a --format json output: parses, algo names level 1, the check passed.
parse_json() {  # parse_json FILE
  if command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
assert isinstance(rows, list) and rows, "no rows"
for r in rows:
    assert "level1" in r["algo"], "algo %r does not name level1" % r["algo"]
    assert r["check_result"] == "success", "check_result %r" % r["check_result"]
    assert r["ranks"] == 32, "ranks %r" % r["ranks"]
print("json: %d rows, algo %s" % (len(rows), rows[0]["algo"]))
EOF
  elif command -v jq >/dev/null 2>&1; then
    jq -e 'length > 0 and all(.[]; (.algo | contains("level1")) and .check_result == "success" and .ranks == 32)' \
      "$1" >/dev/null
  else
    echo "FAIL: neither python3 nor jq to parse JSON" >&2
    return 1
  fi
}

run_case
if [ $expect_rc -eq 0 ]; then
  for s in "${expect_out[@]}"; do
    if ! grep -qF -- "$s" "$tmp/out.txt"; then
      echo "FAIL: stdout does not contain '$s'" >&2
      fail=1
    fi
  done
  if grep -q "fail" "$tmp/out.txt"; then
    echo "FAIL: a row failed its check" >&2
    fail=1
  fi
  if [ $json -eq 1 ] && ! parse_json "$tmp/out.txt"; then
    echo "FAIL: the JSON output does not parse or lacks level1 / success" >&2
    fail=1
  fi
fi
echo "--- stdout of: hcclsim ${args[*]}"
cat "$tmp/out.txt"
echo "--- stderr"
cat "$tmp/err.txt"
if [ $fail -ne 0 ]; then exit 1; fi
echo "ok: $name (exit code $rc)"
