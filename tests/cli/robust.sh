#!/usr/bin/env bash
# hcclsim against every kind of input (issue 10, item 8): each case exits 2
# naming the file + JSON path or the option and the reason (never a crash,
# never std::bad_alloc), or for the good cases runs and writes what it must.
# Also link statistics (--links, --stats, the JSON summary, trace counters).
# usage: robust.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
topology="$src/configs/topologies/a2-server.json"
cluster="$src/configs/topologies/a2-cluster.json"
a2_profile="$src/configs/profiles/a2-910b.json"
a3_profile="$src/configs/profiles/a3-910c.json"
program="$src/configs/programs/seed-thread-notify.json"
matmul_program="$src/configs/programs/fused-matmul-allgather.json"

CASES=(duplicate_key_topology duplicate_key_nested_profile program_int_not_truncated program_thread_index_20_digits
       program_timeout_over_limit program_matmul_too_long size_overflows_uint64 buffsize_needs_too_much_memory
       servers_need_too_much_memory max_memory_option offset_beyond_task_reach a3_profile_on_a2_cluster a2_profile_on_a3_cluster
       a2_profile_on_a3_server a2_profile_on_a3_rank_table oversubscription_absurd npus_per_server_above_npus
       vcounts_nan vcounts_inf algo_empty repeated_topology control_chars_in_name control_chars_in_key
       stdout_write_fails run_trace_bad_path links_bad_path links_csv links_json_summary links_stats
       trace_link_counters run_links piped_output_complete row_times_stats
       failed_run_keeps_outputs closed_pipe_quiet topology_is_dev_zero program_is_fifo
       two_outputs_one_path buffsize_zero seed_beyond_64_bits sweep_buffsize_zero
       measured_p2p_to_itself measured_ranks_beyond_topology measured_size_not_whole_elements measured_moe_ep_not_ranks
       measured_step_layout_not_heads
       baseline_time_zero algo_level_twice flow_quantum_unbounded program_copy_near_2_64
       estimate_uneven_vcounts time_limit_detailed time_limit_estimate alltoallv_busbw_crossing)
start_cases

# copy_with OUT IN SED_EXPR: IN changed by sed; fails the case if nothing changed.
copy_with() {
  sed -e "$3" "$2" >"$1"
  if cmp -s "$1" "$2"; then
    echo "FAIL: could not make $1 from $2 with '$3'" >&2
    exit 1
  fi
}
# A topology naming an absolute profile, so that it can live in $tmp.
local_topology() {  # local_topology OUT IN
  sed -e "s#\"profile\": *\"\\.\\./profiles/\\([^\"]*\\)\"#\"profile\": \"$src/configs/profiles/\\1\"#" "$2" >"$1"
}
python_check() {  # python_check SCRIPT FILE: exit 1 with the script's message unless it passes
  if ! python3 -c "$1" "$2"; then
    echo "FAIL: check of $2 failed" >&2
    fail=1
  fi
}

expect_rc=2
expect=()
args=()
post=""
case "$name" in
  duplicate_key_topology)
    local_topology "$tmp/t0.json" "$topology"
    copy_with "$tmp/topo.json" "$tmp/t0.json" 's/"npus": 8,/"npus": 8, "npus": 9,/'
    args=(perf all_reduce --topology "$tmp/topo.json")
    expect=("$tmp/topo.json" '$.npus' "duplicate key 'npus'") ;;
  duplicate_key_nested_profile)
    copy_with "$tmp/profile.json" "$a2_profile" 's/"engines": 16,/"engines": 16, "engines": 4,/'
    args=(perf all_reduce --profile "$tmp/profile.json")
    expect=("$tmp/profile.json" '$.npu.sdma.engines' "duplicate key") ;;
  program_int_not_truncated)
    # 2^32 was read as domain 0 by a cast to int.
    copy_with "$tmp/p.json" "$program" '0,/"domain": 0,/s//"domain": 4294967296,/'
    args=(run --program "$tmp/p.json")
    expect=("$tmp/p.json" '$.host[0].domain' "out of range") ;;
  program_thread_index_20_digits)
    copy_with "$tmp/p.json" "$program" 's/"dst_thread": "exportedCpuThread"/"dst_thread": "exportedCpuThread[99999999999999999999]"/'
    args=(run --program "$tmp/p.json")
    expect=("$tmp/p.json" '$.host[0].ops[0].dst_thread' "has 1 threads") ;;
  program_timeout_over_limit)
    copy_with "$tmp/p.json" "$program" 's/"timeout": "1s"/"timeout": "1000001s"/'
    args=(run --program "$tmp/p.json")
    expect=("$tmp/p.json" '.timeout' "limit of 1000000s") ;;
  program_matmul_too_long)
    copy_with "$tmp/p.json" "$matmul_program" 's/"m": 4096, "n": 4096, "k": 4096/"m": 1099511627776, "n": 1099511627776, "k": 1099511627776/'
    args=(run --program "$tmp/p.json")
    expect=("$tmp/p.json" "matmul" "too large") ;;
  size_overflows_uint64)
    args=(perf all_reduce -b 8K -e 18446744073709551616)
    expect=("-e" "too large" "64 bits") ;;
  buffsize_needs_too_much_memory)
    # Once std::bad_alloc after minutes of building tasks: 2^30 loops of one byte.
    args=(perf all_reduce -b 1G -e 1G --buffsize 1)
    expect=("option -b/-e" "too large" "GiB" "--buffsize") ;;
  servers_need_too_much_memory)
    args=(perf all_reduce -b 1M -e 1M --topology "$cluster" --servers 12500 --no-check)
    expect=("too large" "100000 ranks" "GiB" "the limit is 16 GiB") ;;
  max_memory_option)
    args=(perf all_reduce -b 64M -e 64M --max-memory 1MiB)
    expect=("too large" "the limit is 1048576 bytes") ;;
  offset_beyond_task_reach)
    # Offsets into a 512 TiB output: past the 48 bits a task's buffer offset holds.
    args=(perf all_gather -b 512T -e 512T --buffsize 512T --max-memory 1T --no-check)
    expect=("buffer offset of" "256 TiB" "smaller data size") ;;
  a3_profile_on_a2_cluster)
    args=(perf all_reduce --topology "$cluster" --profile "$a3_profile")
    expect=("--profile" "910C" "A2 cluster") ;;
  a2_profile_on_a3_cluster)
    args=(perf all_reduce --topology "$src/configs/topologies/cloudmatrix384.json" --profile "$a2_profile")
    expect=("--profile" "910B" "A3 cluster") ;;
  a2_profile_on_a3_server)
    args=(perf all_reduce --topology "$src/configs/topologies/a3-server.json" --profile "$a2_profile")
    expect=("--profile" "2 NPUs (dies) per chip" "910B") ;;
  a2_profile_on_a3_rank_table)
    # (A version 1.0 table does not say its product: with a 910C profile it is
    # read as A3 "typical networking", as HCCL reads it.)
    args=(perf all_reduce --rank-table "$src/configs/ranktables/a3_2superpods_4servers_64dies.json" --profile "$a2_profile")
    expect=("a3_2superpods_4servers_64dies.json" '$.version' "A3") ;;
  oversubscription_absurd)
    local_topology "$tmp/t0.json" "$cluster"
    copy_with "$tmp/topo.json" "$tmp/t0.json" 's/"oversubscription": 1/"oversubscription": 1e300/'
    args=(perf all_reduce --topology "$tmp/topo.json" --servers 2)
    expect=("$tmp/topo.json" '$.cluster.roce.oversubscription' "[1, 1e6]") ;;
  npus_per_server_above_npus)
    local_topology "$tmp/t0.json" "$topology"
    copy_with "$tmp/topo.json" "$tmp/t0.json" 's/"npus_per_server": 8/"npus_per_server": 16/'
    args=(perf all_reduce --topology "$tmp/topo.json")
    expect=("$tmp/topo.json" '$.npus_per_server' "more than") ;;
  vcounts_nan)
    args=(perf alltoallv --vcounts zipf:nan)
    expect=("--vcounts" "finite") ;;
  vcounts_inf)
    args=(perf alltoallv --vcounts zipf:inf)
    expect=("--vcounts" "finite") ;;
  algo_empty)
    args=(perf all_reduce --algo "")
    expect=("--algo" "empty") ;;
  repeated_topology)
    args=(perf all_reduce --topology "$topology" --topology "$cluster")
    expect=("--topology" "2 times") ;;
  control_chars_in_name)
    # A name with an escape sequence and a newline is printed escaped in the heading.
    local_topology "$tmp/t0.json" "$topology"
    copy_with "$tmp/topo.json" "$tmp/t0.json" 's/"name": "[^"]*"/"name": "evil\\u001b[31m\\nname"/'
    args=(perf all_reduce --topology "$tmp/topo.json" -b 8K -e 8K)
    expect_rc=0
    post=control_chars ;;
  control_chars_in_key)
    local_topology "$tmp/t0.json" "$topology"
    copy_with "$tmp/topo.json" "$tmp/t0.json" 's/"npus": 8,/"npus": 8, "\\u0007bell\\u001b[2J": 1,/'
    args=(perf all_reduce --topology "$tmp/topo.json")
    expect=('\x07bell\x1b[2J' "unknown key") ;;
  stdout_write_fails)
    args=(perf all_reduce -b 8K -e 8K)
    post=stdout_full ;;
  run_trace_bad_path)
    args=(run --program "$program" --trace "$tmp/no-such-dir/trace.json")
    expect=("--trace" "cannot write") ;;
  links_bad_path)
    args=(perf all_reduce -b 8K -e 8K --links "$tmp/no-such-dir/links.csv")
    expect=("--links" "cannot write") ;;
  links_csv)
    args=(perf all_reduce -b 1M -e 2M --links "$tmp/links.csv" --format csv)
    expect_rc=0
    post=links_csv ;;
  links_json_summary)
    args=(perf all_reduce -b 1M -e 1M --format json)
    expect_rc=0
    post=links_json ;;
  links_stats)
    args=(perf all_reduce -b 1M -e 1M --stats)
    expect_rc=0
    post=links_stats ;;
  row_times_stats)
    args=(perf all_reduce -b 1M -e 64M -f 4 --model estimate --topology "$cluster" --servers 4 --stats --format csv)
    expect_rc=0
    post=row_times ;;
  trace_link_counters)
    args=(perf all_reduce -b 1M -e 64M -f 8 --trace "$tmp/trace.json")
    expect_rc=0
    post=trace_counters ;;
  run_links)
    args=(run --program "$matmul_program" --links "$tmp/links.csv" --format json)
    expect_rc=0
    post=run_links ;;
  piped_output_complete)
    args=(perf all_reduce -b 8K -e 64M --format csv)
    expect_rc=0
    post=piped ;;
  measured_p2p_to_itself|measured_ranks_beyond_topology|measured_size_not_whole_elements|measured_moe_ep_not_ranks|\
  measured_step_layout_not_heads)
    # A measurement file whose one point contradicts itself.
    python3 - "$src/configs/calibration/measurements.json" "$tmp/m.json" "$name" "$topology" <<'PY'
import json, sys
src, out, case, topology = sys.argv[1:5]
points = json.load(open(src))["points"]
by_id = {p["id"]: p for p in points}
if case == "measured_p2p_to_itself":
    p = dict(by_id["A2-1/write/16K"]); p["options"] = dict(p["options"], dst=0)
elif case == "measured_ranks_beyond_topology":
    p = dict(by_id["A2-1/write/16K"]); p["ranks"] = 99
elif case == "measured_size_not_whole_elements":
    p = {"id": "odd", "group": "g", "topology": topology, "ranks": 8, "op": "all_reduce", "dtype": "fp32",
         "size_bytes": 1026, "size_means": "input_per_rank", "metric": "time_us", "value": 10, "source": "test"}
elif case == "measured_step_layout_not_heads":
    # Read well, refused when planned: tp 3 does not divide qwen2-0.5b's 14 heads.
    p = dict(by_id["A2-STEP-3/qwen2-0.5b"])
    root = src.rsplit("/configs/", 1)[0]
    p["options"] = dict(p["options"], layout="tp=3,pp=1,dp=1", model=root + "/" + p["options"]["model"])
else:
    p = dict(by_id["A2-MoE-1/normal/dispatch/ep8"]); p["ranks"] = 16
p["topology"] = topology
json.dump({"points": [p]}, open(out, "w"))
PY
    args=(validate "$tmp/m.json")
    case "$name" in
      measured_p2p_to_itself) expect=("$tmp/m.json" '$.points[0].options' "same NPU") ;;
      measured_ranks_beyond_topology) expect=("$tmp/m.json" '$.points[0]' "point A2-1/write/16K" "more than the 8 NPUs") ;;
      measured_step_layout_not_heads) expect=("$tmp/m.json" '$.points[0].options.layout' "tp must divide the attention heads") ;;
      measured_size_not_whole_elements) expect=("$tmp/m.json" '$.points[0].size_bytes' "not a whole number of fp32") ;;
      measured_moe_ep_not_ranks) expect=("$tmp/m.json" '$.points[0].ranks' "must equal options.ep") ;;
    esac ;;
  baseline_time_zero)
    "$hcclsim" perf all_reduce -b 8K -e 8K --save-baseline "$tmp/b.json" >/dev/null 2>&1
    sed -i 's/"time_us": [0-9.]*/"time_us": 0/' "$tmp/b.json"
    args=(check "$tmp/b.json")
    expect=("$tmp/b.json" '$.results[0].time_us' "positive number") ;;
  program_copy_near_2_64)
    # A copy of 2^64 - 1 bytes took 0.6 us: sizes are bounded where they are read.
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
for op in d["host"][0]["ops"]:
    if op["op"] == "local_copy": op["bytes"] = "18446744073709551615B"
json.dump(d, open(sys.argv[2], "w"))' "$program" "$tmp/big.json"
    args=(run --program "$tmp/big.json")
    expect=("$tmp/big.json" '$.host[0].ops[2].bytes' "at most 32 TiB") ;;
  time_limit_detailed|time_limit_estimate)
    # An HCCS link of 1 B/s: a 1 GiB AllGather would take about 4 years;
    # the time reaches the limit and is refused, never printed (a drain
    # once wrapped around 64 bits, the estimate saturated at 2^63 ps).
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d.pop("calibration")
for k in ("bandwidth", "write_bandwidth"):
    d["links"]["hccs"][k] = {"value": "1Bps", "source": "assumed: a link far too slow"}
json.dump(d, open(sys.argv[2], "w"))' "$a2_profile" "$tmp/slow.json"
    args=(perf all_gather -b 1G -e 1G --no-check --profile "$tmp/slow.json" --model "${name#time_limit_}")
    expect=("limit of 2^62 ps") ;;
  alltoallv_busbw_crossing)
    # Bus bandwidth counts only bytes that cross links: under zipf:1 on 8
    # ranks a rank keeps 1/H_8 (37%) of its data for itself, so busbw is
    # (1 - 1/H_8) of algbw, not AlltoAll's 7/8.
    args=(perf alltoallv -b 4M -e 4M --vcounts zipf:1 --no-check --format json --out "$tmp/a2av.json")
    expect_rc=0
    post=alltoallv_busbw ;;
  estimate_uneven_vcounts)
    # The estimate's AlltoAllV follows even counts: an uneven request is refused, not answered as even.
    args=(perf alltoallv -b 4M -e 4M --model estimate --vcounts zipf:1)
    expect=("--vcounts" "even per-peer counts only") ;;
  algo_level_twice)
    args=(perf all_reduce -b 8K -e 8K --algo "level0:ring;level0:fullmesh")
    expect=("--algo" "'level0' is given twice") ;;
  flow_quantum_unbounded)
    args=(perf all_reduce -b 8K -e 8K --flow-quantum 1000000s)
    expect=("--flow-quantum" "at most 1s") ;;
  two_outputs_one_path)
    args=(perf all_reduce -b 8K -e 8K --out "$tmp/o.txt" --trace "$tmp/o.txt")
    expect=("--trace" "also the file of --out") ;;
  buffsize_zero)
    args=(perf all_reduce -b 8K -e 8K --buffsize 0)
    expect=("--buffsize" "cannot be empty") ;;
  seed_beyond_64_bits)
    args=(moe dispatch --ep 8 --tokens 16 --hidden 7168 --topk 8 --experts 256 --seed 18446744073709551616)
    expect=("--seed" "below 2^64") ;;
  sweep_buffsize_zero)
    printf '{"topologies": ["%s"], "ops": ["all_reduce"], "sizes": {"b": "8K", "e": "8K", "f": 2}, "buffsizes": ["0B"]}' \
      "$topology" >"$tmp/grid.json"
    args=(sweep "$tmp/grid.json")
    expect=("$tmp/grid.json" '$.buffsizes[0]' "cannot be empty") ;;
  topology_is_dev_zero)
    # Read whole, /dev/zero never ends: refused before it is opened for reading.
    args=(perf all_reduce --topology /dev/zero)
    expect=("/dev/zero" "character device" "expected a regular file") ;;
  program_is_fifo)
    # Opened, a FIFO waits for a writer: refused instead.
    mkfifo "$tmp/program.json"
    args=(run --program "$tmp/program.json")
    expect=("$tmp/program.json" "a FIFO" "expected a regular file") ;;
  closed_pipe_quiet)
    # A reader that stops early: exit 2, no signal, no message.
    args=(perf all_reduce -b 8K -e 64M)
    post=closed_pipe ;;
  failed_run_keeps_outputs)
    # A run that fails (a wait nobody records: exit 1) leaves every output
    # path as it was: outputs go to temporary files renamed on success.
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d["host"][0]["ops"] = d["host"][0]["ops"][1:]
json.dump(d, open(sys.argv[2], "w"))' "$program" "$tmp/stuck.json"
    for f in trace.json base.json links.csv; do echo keep >"$tmp/$f"; done
    args=(run --program "$tmp/stuck.json" --trace "$tmp/trace.json" --save-baseline "$tmp/base.json" --links "$tmp/links.csv")
    post=kept ;;
  *)
    echo "unknown case '$name'; known: ${CASES[*]}" >&2
    exit 2 ;;
esac

if [ "$post" = stdout_full ]; then
  "$hcclsim" "${args[@]}" >/dev/full 2>"$tmp/err.txt"
  rc=$?
  fail=0
  if [ $rc -ne 2 ] || ! grep -q "writing the results to standard output failed" "$tmp/err.txt"; then
    echo "FAIL: a failed write of stdout exited with $rc" >&2
    fail=1
  fi
elif [ "$post" = links_stats ]; then
  "$hcclsim" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
  rc=$?
  fail=0
  if [ $rc -ne 0 ] || ! grep -q "busiest links" "$tmp/err.txt" || [ "$(grep -c "util .*peak" "$tmp/err.txt")" -ne 10 ] ||
     ! grep -Eq '^stats: per row: first [0-9]+\.[0-9]{3} ms$' "$tmp/err.txt"; then
    echo "FAIL: --stats does not list the 10 busiest links and the one row's time" >&2
    fail=1
  fi
elif [ "$post" = row_times ]; then
  # One line of per-row wall times: the first row apart, the other three summarized.
  "$hcclsim" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
  rc=$?
  fail=0
  if [ $rc -ne 0 ] || [ "$(wc -l <"$tmp/out.txt")" -ne 5 ] ||
     ! grep -Eq '^stats: per row: first [0-9]+\.[0-9]{3} ms; the other 3: median [0-9]+\.[0-9]{3} ms, max [0-9]+\.[0-9]{3} ms$' "$tmp/err.txt"; then
    echo "FAIL: --stats per-row times (exit code $rc):" >&2
    cat "$tmp/err.txt" >&2
    fail=1
  fi
elif [ "$post" = closed_pipe ]; then
  "$hcclsim" "${args[@]}" 2>"$tmp/err.txt" | head -1 >"$tmp/out.txt"
  rc=${PIPESTATUS[0]}
  fail=0
  if [ $rc -ne 2 ] || [ -s "$tmp/err.txt" ] || [ "$(wc -l <"$tmp/out.txt")" -ne 1 ]; then
    echo "FAIL: a closed pipe gave exit $rc (expected 2, not 141 = SIGPIPE) or a message" >&2
    fail=1
  fi
elif [ "$post" = kept ]; then
  "$hcclsim" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
  rc=$?
  fail=0
  for f in trace.json base.json links.csv; do
    if [ "$(cat "$tmp/$f")" != keep ]; then
      echo "FAIL: the failed run (exit $rc) changed $tmp/$f" >&2
      fail=1
    fi
  done
  if [ $rc -ne 1 ] || ls -a "$tmp" | grep -q '\.tmp-'; then
    echo "FAIL: exit $rc (expected 1), or a temporary file left behind" >&2
    fail=1
  fi
elif [ "$post" = piped ]; then
  # Through a pipe (hcclsim ends with _Exit after flushing): every row arrives.
  "$hcclsim" "${args[@]}" 2>"$tmp/err.txt" | cat >"$tmp/out.txt"
  rc=${PIPESTATUS[0]}
  fail=0
  if [ $rc -ne 0 ] || [ "$(wc -l <"$tmp/out.txt")" -ne 15 ]; then
    echo "FAIL: piped output has $(wc -l <"$tmp/out.txt") lines, expected 15 (exit code $rc)" >&2
    fail=1
  fi
else
  run_case
fi
case "$post" in
  alltoallv_busbw)
    python_check '
import json, sys
row = json.load(open(sys.argv[1]))[0]
h8 = sum(1.0 / k for k in range(1, 9))
ratio = row["busbw_GBps"] / row["algbw_GBps"]
assert abs(ratio - (1 - 1 / h8)) < 2e-3, (ratio, 1 - 1 / h8)
' "$tmp/a2av.json" ;;
  control_chars)
    if grep -q $'\x1b' "$tmp/out.txt" || ! grep -qF 'evil\x1b[31m\nname' "$tmp/out.txt"; then
      echo "FAIL: the control characters of the name are not escaped in the heading" >&2
      fail=1
    fi ;;
  links_csv)
    python_check '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows, "no rows"
assert list(rows[0].keys()) == ["row","data_size","link","kind","bytes","busy_us","utilization","peak_flows"], rows[0].keys()
assert {r["row"] for r in rows} == {"0", "1"}, "two perf rows"
assert {r["kind"] for r in rows} == {"hccs", "memory"}, {r["kind"] for r in rows}
for r in rows:
    assert 0 <= float(r["utilization"]) <= 1.0 and int(r["peak_flows"]) >= 1, r
hccs = [r for r in rows if r["row"] == "0" and r["kind"] == "hccs"]
assert len(hccs) == 56, len(hccs)   # every HCCS direction of the full mesh carried data
' "$tmp/links.csv" ;;
  links_json)
    python_check '
import json, sys
row = json.load(open(sys.argv[1]))[0]
links = row["links"]
assert links["busiest"].startswith("hccs npu"), links
assert 0 < links["busiest_utilization"] <= 1, links
assert links["bytes_by_kind"]["hccs"] == 7 * 8 * (1 << 20) // 8 * 2, links   # reduce-scatter + all-gather
' "$tmp/out.txt" ;;
  trace_counters)
    python_check '
import json, sys, collections
events = json.load(open(sys.argv[1]))["traceEvents"]
counters = [e for e in events if e["ph"] == "C"]
assert counters, "no counter events"
per_link = collections.Counter(e["name"] for e in counters)
assert max(per_link.values()) <= 3 * 201, per_link.most_common(1)   # 3 runs, at most 200 buckets + the closing 0 each
assert any(e["args"]["GBps"] > 10 for e in counters), "no link ever above 10 GB/s"
' "$tmp/trace.json" ;;
  run_links)
    python_check '
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows and all(r["row"] == "0" for r in rows), rows[:1]
assert any(r["kind"] == "hccs" for r in rows)
' "$tmp/links.csv"
    python_check 'import json, sys; d = json.load(open(sys.argv[1])); assert d["links"]["bytes_by_kind"]["hccs"] > 0, d["links"]' "$tmp/out.txt" ;;
esac
echo "--- stderr of: hcclsim ${args[*]}"
cat "$tmp/err.txt"
if [ $fail -ne 0 ]; then exit 1; fi
echo "ok: $name (exit code $rc)"
