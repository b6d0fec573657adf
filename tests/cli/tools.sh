#!/usr/bin/env bash
# The command-line tools of issue 10: hccl_test's command line and table
# layout, repeated options, per-subcommand help, baselines and check, sweeps
# (single process and under mpirun), plots. Each case checks exit codes and
# what was written.
# usage: tools.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
# Exit code 77 = skipped (ctest SKIP_RETURN_CODE), with the reason printed.
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
profile="$src/configs/profiles/a2-910b.json"
a2_cluster="$src/configs/topologies/a2-cluster.json"

CASES=(hccl_test_command_line hccl_test_layout hccl_test_no_check hccl_test_p_on_cluster repeated_option
       repeated_flag subcommand_help help_keeps_scope baseline_check run_baseline_check sweep_single_vs_mpirun
       sweep_json sweep_bad_grid out_opened_before_run stream_json_lines plot_png plot_through_python model_estimate model_estimate_refusals segment_converges
       install_prefix assumed_output)
start_cases

fail=0
# run_case (tests/lib/run_case.sh) resets `fail`; keep the failures found before it.
run_case_too() {
  local before=$fail
  run_case
  [ $before -eq 0 ] || fail=1
}
count_lines() { grep -cF -- "$2" "$1"; }

case "$name" in
  hccl_test_command_line)
    # hccl_test's own command line, unchanged (issue 10).
    args=(perf all_reduce_test -b 8K -e 64M -f 2 -d fp32 -o sum -p 8 -n 20 -w 5 -c 1)
    "$hcclsim" "${args[@]}" >"$tmp/out.txt" 2>"$tmp/err.txt"
    rc=$?
    check "exit code $rc, expected 0" [ $rc -eq 0 ]
    check "14 rows of 8 ranks, all passing the check" [ "$(grep -cE '^ +[0-9]+ .* success +[A-Za-z]+Executor$' "$tmp/out.txt")" -eq 14 ]
    check "the heading names 8 ranks and fp32" contains "$tmp/out.txt" "on 8 ranks of a2-server, fp32"
    check "the -n/-w note once on stderr" [ "$(count_lines "$tmp/err.txt" "deterministic")" -eq 1 ]
    check "nothing else on stderr" [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] ;;
  hccl_test_layout | hccl_test_no_check)
    # --format hccl_test must be hccl_test's printf layout exactly
    # ("%-17llu | %-14.2f | %-20.5f | result"), rebuilt here from the JSON-lines
    # output of the same run (exact picoseconds).
    c=1
    result=success
    if [ "$name" = hccl_test_no_check ]; then c=0; result=NULL; fi
    common=(perf all_gather_test -b 1K -e 1M -f 4 -d int32 -c $c)
    "$hcclsim" "${common[@]}" -n 7 -w 3 --format hccl_test >"$tmp/out.txt" 2>"$tmp/err.txt"
    check "hccl_test format run" [ $? -eq 0 ]
    "$hcclsim" "${common[@]}" --format jsonl >"$tmp/rows.jsonl" 2>/dev/null
    check "jsonl run" [ $? -eq 0 ]
    python3 - "$tmp/rows.jsonl" "$result" >"$tmp/expected.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("the minbytes is %d, maxbytes is %d, iters is 7, warmup_iters is 3" % (1024, 1048576))
print("%-15s | %-12s | %-18s | %s" % ("data_size(Bytes):", "aveg_time(us):", "alg_bandwidth(GB/s):", "check_result:"))
for r in rows:
    ps = round(r["time_us"] * 1e6)
    algbw = r["data_size"] / (ps / 1e12) / 1e9
    print("%-17d | %-14.2f | %-20.5f | %s" % (r["data_size"], ps / 1e6, algbw, sys.argv[2]))
PY
    check "the layout differs from hccl_test's:" diff -u "$tmp/expected.txt" "$tmp/out.txt"
    check "header line verbatim" contains "$tmp/out.txt" \
      "data_size(Bytes): | aveg_time(us): | alg_bandwidth(GB/s): | check_result:" ;;
  hccl_test_p_on_cluster)
    args=(perf all_reduce_test --topology "$a2_cluster" --servers 2 -p 4 -b 8K -e 8K)
    expect_rc=2
    expect=("-p" "4" "8 NPUs" "cluster")
    run_case_too ;;
  repeated_option)
    args=(perf all_reduce -b 8K -b 16K)
    expect_rc=2
    expect=("-b" "2 times" "once")
    run_case_too ;;
  repeated_flag)
    args=(perf all_reduce --no-check -b 8K -e 8K --no-check)
    expect_rc=2
    expect=("--no-check" "2 times")
    run_case_too ;;
  subcommand_help)
    for cmd in perf run sweep check; do
      "$hcclsim" "$cmd" --help >"$tmp/help.txt" 2>"$tmp/err.txt"
      check "$cmd --help exits 0" [ $? -eq 0 ]
      check "$cmd --help shows its usage" contains "$tmp/help.txt" "Usage: hcclsim $cmd"
      check "$cmd --help writes nothing on stderr" [ ! -s "$tmp/err.txt" ]
    done
    "$hcclsim" perf --help >"$tmp/perf.txt"
    for option in "-p,--npus" "-n,--iters" "-w,--warmup_iters" "-c,--check" "--format" "hccl_test" "--save-baseline"; do
      check "perf --help lists $option" contains "$tmp/perf.txt" "$option"
    done
    "$hcclsim" check --help >"$tmp/check.txt"
    for option in "--tolerance" "--junit"; do check "check --help lists $option" contains "$tmp/check.txt" "$option"; done
    "$hcclsim" help sweep >"$tmp/help_sweep.txt"
    check "'help sweep' is sweep --help" cmp "$tmp/help_sweep.txt" <("$hcclsim" sweep --help)
    # The overview (hcclsim alone, and atop hcclsim help) names every command help documents.
    "$hcclsim" help >"$tmp/help_all.txt" 2>&1
    "$hcclsim" >"$tmp/overview.txt" 2>&1
    commands=$(sed -n 's/^Usage: hcclsim \([a-z-]*\) .*/\1/p' "$tmp/help_all.txt")
    check "hcclsim help documents at least 12 commands" [ "$(echo "$commands" | wc -w)" -ge 12 ]
    for cmd in $commands; do
      check "the overview lists $cmd" grep -q "^  hcclsim $cmd" "$tmp/overview.txt"
    done ;;
  help_keeps_scope)
    for form in help --help; do
      "$hcclsim" $form >"$tmp/help.txt" 2>&1
      check "hcclsim $form exits 0" [ $? -eq 0 ]
      for s in "What is modelled" "What is not" "Exit codes" "Usage: hcclsim perf" "Usage: hcclsim sweep"; do
        check "hcclsim $form mentions '$s'" contains "$tmp/help.txt" "$s"
      done
    done ;;
  baseline_check)
    # A baseline on a copy of the profile; check holds; a slower HCCS in the copy is a regression.
    cp "$profile" "$tmp/profile.json"
    "$hcclsim" perf all_reduce -b 256K -e 4M -f 4 --profile "$tmp/profile.json" --save-baseline "$tmp/base.json" \
      >/dev/null 2>"$tmp/err.txt"
    check "perf --save-baseline exits 0" [ $? -eq 0 ]
    check "the baseline records the profile with its hash" contains "$tmp/base.json" "$tmp/profile.json"
    check "the baseline records the version" contains "$tmp/base.json" "hcclsim_version"
    "$hcclsim" check "$tmp/base.json" --junit "$tmp/ok.xml" >"$tmp/ok.txt" 2>&1
    check "check on unchanged inputs exits 0" [ $? -eq 0 ]
    check "check says ok" contains "$tmp/ok.txt" "-> ok"
    check "JUnit without failures" contains "$tmp/ok.xml" 'failures="0"'
    sed -i 's/"20.94GBps"/"15GBps"/' "$tmp/profile.json"
    check "the profile copy changed" differs "$tmp/profile.json" "$profile"
    "$hcclsim" check "$tmp/base.json" --tolerance 2% --junit "$tmp/bad.xml" >"$tmp/bad.txt" 2>&1
    rc=$?
    check "check on a slower profile exits 1 (got $rc)" [ $rc -eq 1 ]
    check "check names the changed input" contains "$tmp/bad.txt" "input changed since the baseline: $tmp/profile.json"
    check "check shows the slower row" contains "$tmp/bad.txt" "all_reduce 4194304 B"
    check "check marks it SLOWER" contains "$tmp/bad.txt" "SLOWER"
    check "check says REGRESSION" contains "$tmp/bad.txt" "REGRESSION"
    python3 - "$tmp/bad.xml" <<'PY' || fail=1
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
assert len(cases) == 3, [c.get("name") for c in cases]
failed = [c.get("name") for c in cases if c.find("failure") is not None]
assert "all_reduce 4194304 B" in failed, failed
print("junit: %d testcases, failing: %s" % (len(cases), failed))
PY
    cat "$tmp/bad.txt"
    "$hcclsim" check "$tmp/base.json" --tolerance 200% >/dev/null 2>&1
    check "a 200% tolerance holds" [ $? -eq 0 ]
    args=(check "$tmp/base.json" --tolerance fast)
    expect_rc=2
    expect=("--tolerance" "fast")
    run_case_too ;;
  run_baseline_check)
    "$hcclsim" run --program "$src/configs/programs/fused-matmul-allgather.json" --save-baseline "$tmp/run.json" \
      >/dev/null 2>&1
    check "run --save-baseline exits 0" [ $? -eq 0 ]
    check "the run baseline has the handle" contains "$tmp/run.json" '"handle": "gather"'
    "$hcclsim" check "$tmp/run.json" --junit "$tmp/run.xml" >"$tmp/out.txt" 2>&1
    check "check of a run baseline exits 0" [ $? -eq 0 ]
    check "JUnit names the handle" contains "$tmp/run.xml" 'name="handle gather (domain 0, repeat' ;;
  sweep_single_vs_mpirun)
    grid="$src/configs/sweeps/example.json"
    "$hcclsim" sweep "$grid" >"$tmp/single.csv" 2>"$tmp/err.txt"
    check "sweep exits 0" [ $? -eq 0 ]
    check "one header and 48 points" [ "$(wc -l <"$tmp/single.csv")" -eq 49 ]
    check "every point passes its check" [ "$(grep -c ',success,[A-Za-z0-9]*,detailed$' "$tmp/single.csv")" -eq 48 ]
    check "a progress line on stderr" contains "$tmp/err.txt" "sweep: 48 points"
    if ! command -v mpirun >/dev/null 2>&1; then
      echo "SKIP: mpirun is not installed (tools/setup.sh installs openmpi-bin); the single-process sweep passed"
      [ $fail -eq 0 ] && exit 77
      exit 1
    fi
    mpirun --allow-run-as-root -n 2 --oversubscribe "$hcclsim" sweep "$grid" --out "$tmp/mpi.csv" \
      >"$tmp/mpi_out.txt" 2>"$tmp/mpi_err.txt"
    rc=$?
    check "mpirun sweep exits 0 (got $rc)" [ $rc -eq 0 ]
    check "mpirun ran 2 processes" contains "$tmp/mpi_err.txt" "on 2 processes"
    check "mpirun output differs from the single process:" diff -u "$tmp/single.csv" "$tmp/mpi.csv"
    # perf deals its sizes over the processes the same way.
    perf_args=(perf all_gather -b 8K -e 16M -f 4 --format json)
    "$hcclsim" "${perf_args[@]}" >"$tmp/perf1.json" 2>/dev/null
    mpirun --allow-run-as-root -n 2 --oversubscribe "$hcclsim" "${perf_args[@]}" >"$tmp/perf2.json" 2>>"$tmp/mpi_err.txt"
    check "perf under mpirun exits 0" [ $? -eq 0 ]
    check "perf under mpirun differs from the single process:" diff -u "$tmp/perf1.json" "$tmp/perf2.json"
    cat "$tmp/mpi_err.txt" ;;
  sweep_json)
    "$hcclsim" sweep "$src/configs/sweeps/example.json" --format json >"$tmp/out.json" 2>/dev/null
    check "sweep --format json exits 0" [ $? -eq 0 ]
    python3 - "$tmp/out.json" <<'PY' || fail=1
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["point"] for r in rows] == list(range(48)), "points out of order"
assert {r["topology"] for r in rows} == {"../topologies/a2-server.json", "../topologies/a2-cluster.json"}
assert {r["servers"] for r in rows} == {None, 2, 4}
assert any("NHR" in r["algo"] for r in rows if r["algo_request"] == "level1:NHR" and r["servers"] == 4)
print("sweep json: %d rows" % len(rows))
PY
    ;;
  sweep_bad_grid)
    printf '{"topologies": ["%s"], "ops": ["all_reduce"], "sizes": ["8K"], "dtype": ["fp16"]}\n' \
      "$src/configs/topologies/a2-server.json" >"$tmp/grid.json"
    args=(sweep "$tmp/grid.json")
    expect_rc=2
    expect=("$tmp/grid.json" "unknown key" "dtype" "dtypes")
    run_case_too
    printf '{"topologies": ["%s"], "ops": ["all_reduce"], "sizes": ["8K", 3]}\n' \
      "$src/configs/topologies/a2-server.json" >"$tmp/grid2.json"
    args=(sweep "$tmp/grid2.json")
    expect=("$tmp/grid2.json" '$.sizes[1]')
    run_case_too ;;
  out_opened_before_run)
    # A bad --out or --trace path fails at once (exit 2), before a long run.
    args=(perf all_reduce -b 1G -e 1G --out "$tmp/no-such-dir/rows.csv")
    expect_rc=2
    expect=("--out" "$tmp/no-such-dir/rows.csv")
    start=$(date +%s%N)
    run_case_too
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    check "the bad path failed before the run (${elapsed_ms} ms)" [ $elapsed_ms -lt 2000 ] ;;
  model_estimate)
    # issue 9: the closed form answers with rows that say so, also at 100,000 NPUs.
    "$hcclsim" perf all_reduce -b 8K -e 64M --model estimate --format csv >"$tmp/est.csv" 2>"$tmp/err.txt"
    check "estimate exits 0" [ $? -eq 0 ]
    check "14 estimate rows, check skipped" [ "$(grep -c ',skipped,[A-Za-z0-9]*,estimate$' "$tmp/est.csv")" -eq 14 ]
    check "the header ends with model" [ "$(head -1 "$tmp/est.csv" | awk -F, '{print $NF}')" = model ]
    "$hcclsim" perf all_reduce -b 8K -e 64M --no-check --format csv >"$tmp/det.csv" 2>/dev/null
    check "the same executors as the detailed model" \
      diff <(cut -d, -f1-9,14 "$tmp/det.csv" | tail -n +2) <(cut -d, -f1-9,14 "$tmp/est.csv" | tail -n +2)
    # Each executor's record carries its closed form: the listing says so for every one.
    "$hcclsim" executors >"$tmp/executors.txt" 2>/dev/null
    check "executors: every one lists its estimate" \
      [ "$(grep -c '^    estimate: ' "$tmp/executors.txt")" -eq "$(grep -c '^    source: ' "$tmp/executors.txt")" ]
    check "executors: every one has a closed form" [ "$(grep -c '^    estimate: none' "$tmp/executors.txt")" -eq 0 ]
    "$hcclsim" perf all_gather -b 1M -e 1G -f 4 --topology "$a2_cluster" --servers 12500 --model estimate \
      --format csv >"$tmp/big.csv" 2>"$tmp/err.txt"
    check "100,000 NPUs: exits 0 (not refused by the memory estimate)" [ $? -eq 0 ]
    check "100,000 NPUs: 6 rows on 100000 ranks" [ "$(grep -c '^all_gather,100000,.*,estimate$' "$tmp/big.csv")" -eq 6 ]
    "$hcclsim" sweep "$src/configs/sweeps/capacity-estimate.json" >"$tmp/cap.csv" 2>"$tmp/err.txt"
    check "the capacity sweep exits 0" [ $? -eq 0 ]
    check "192 estimate points up to 100,000 NPUs" [ "$(grep -c ',skipped,[A-Za-z0-9]*,estimate$' "$tmp/cap.csv")" -eq 192 ]
    check "ranks up to 100000 (A2) and 99840 (A3)" [ "$(grep -c ',100000,fp16,\|,99840,fp16,' "$tmp/cap.csv")" -eq 48 ] ;;
  assumed_output)
    # issue 40, item 6: perf, moe and run say which assumed profile constants
    # their tasks used (JSON "assumed", a footnote under a table); hccl_test's
    # layout and the CSV stay as they were.
    footnote="# assumed constants used: "
    "$hcclsim" perf all_reduce -b 1M -e 2M >"$tmp/table.txt" 2>"$tmp/err.txt"
    check "perf table exits 0" [ $? -eq 0 ]
    check "the table's last line is the footnote" bash -c "tail -1 '$tmp/table.txt' | grep -qF -- '$footnote'"
    check "the footnote names task_dispatch" bash -c "tail -1 '$tmp/table.txt' | grep -qF npu.stream.task_dispatch"
    check "the footnote names the profile" bash -c "tail -1 '$tmp/table.txt' | grep -qF \"a2-910b.json says 'assumed')\""
    check "the footnote leaves out measured constants" bash -c "! tail -1 '$tmp/table.txt' | grep -qF copy_bandwidth"
    check "above it, the executor and the rule that chose it" \
      bash -c "tail -2 '$tmp/table.txt' | head -1 | grep -qxF '# AllReduceMeshOpbaseLoopExecutor for data_size 1048576..2097152: op-base, one server, > 256 KiB'"
    "$hcclsim" perf all_reduce -b 1M -e 2M --format jsonl >"$tmp/rows.jsonl" 2>/dev/null
    check "every jsonl row has an assumed list with task_dispatch" \
      [ "$(grep -c '"assumed":\[[^]]*"npu.stream.task_dispatch"' "$tmp/rows.jsonl")" -eq 2 ]
    "$hcclsim" perf all_reduce -b 1M -e 1M --format json >"$tmp/rows.json" 2>/dev/null
    check "the json row has the field" contains "$tmp/rows.json" '"assumed": ['
    "$hcclsim" perf all_reduce -b 1M -e 1M --format hccl_test >"$tmp/hccl.txt" 2>/dev/null
    check "hccl_test's layout has no footnote" bash -c "! grep -q assumed '$tmp/hccl.txt'"
    check "hccl_test's layout is its preamble, header and one row" [ "$(wc -l <"$tmp/hccl.txt")" -eq 3 ]
    "$hcclsim" perf all_reduce -b 1M -e 1M --format csv >"$tmp/rows.csv" 2>/dev/null
    check "the CSV has no assumed column" bash -c "! grep -q assumed '$tmp/rows.csv'"
    "$hcclsim" perf all_reduce -b 1M -e 1M --model estimate --format jsonl >"$tmp/est.jsonl" 2>/dev/null
    check "an estimate row lists what the detailed one does" \
      [ "$(grep -o '"assumed":\[[^]]*\]' "$tmp/est.jsonl")" = "$(head -1 "$tmp/rows.jsonl" | grep -o '"assumed":\[[^]]*\]')" ]
    moe=(moe dispatch --ep 8 --tokens 64 --hidden 1024 --topk 4 --experts 32)
    "$hcclsim" "${moe[@]}" >"$tmp/moe.txt" 2>"$tmp/err.txt"
    check "moe table exits 0" [ $? -eq 0 ]
    check "the moe table ends with the footnote, host sync in it" \
      bash -c "tail -1 '$tmp/moe.txt' | grep -qF -- '$footnote' && tail -1 '$tmp/moe.txt' | grep -qF npu.stream.host_sync"
    "$hcclsim" "${moe[@]}" --format json >"$tmp/moe.json" 2>/dev/null
    check "the moe json row has the field" contains "$tmp/moe.json" '"assumed": ['
    # (npu.aiv.copy_fixed is set by the A2 MoE rows now, so the flag poll stands in for the AIV constants)
    check "normal dispatch lists the AIV flag poll" contains "$tmp/moe.json" '"npu.aiv.flag_poll"'
    program="$src/configs/programs/fused-matmul-allgather.json"
    # (on A3: the A2 AIC rate is fitted to the A2-STEP-1 rows, the A3 one still assumed)
    "$hcclsim" run --program "$program" --topology "$src/configs/topologies/a3-server.json" >"$tmp/run.txt" 2>"$tmp/err.txt"
    check "run table exits 0" [ $? -eq 0 ]
    check "run's table has the footnote, the matmul's rate in it" \
      bash -c "grep -F -- '$footnote' '$tmp/run.txt' | grep -qF npu.cores.aic_fp16_rate"
    "$hcclsim" run --program "$program" --format json >"$tmp/run.json" 2>/dev/null
    check "run's json has the field" contains "$tmp/run.json" '"assumed": ['
    for cmd in perf moe run; do
      "$hcclsim" "$cmd" --help >"$tmp/help.txt" 2>/dev/null
      check "$cmd --help mentions the field" contains "$tmp/help.txt" '"assumed"'
    done ;;
  segment_converges)
    # issue 9: --segment reaches every channel; on an A2 server's uneven
    # AlltoAllV (long and short pieces on one port) the default segments are
    # 5% from the flow model and 1 KiB segments within 1%. (An A3 AlltoAll
    # no longer serves: its SDMA writes, capped per task, share a switch
    # port, which segments fill only to one cap: test_flow_network.cpp.)
    a2="$src/configs/topologies/a2-server.json"
    time_of() { "$hcclsim" perf alltoallv -b 4M -e 4M --vcounts zipf:1 --topology "$a2" --no-check --format csv "$@" 2>"$tmp/err.txt" |
                tail -1 | cut -d, -f10; }
    coarse=$(time_of --network segment)
    fine=$(time_of --network segment --segment 1KiB)
    flow=$(time_of --network flow)
    echo "segment default $coarse us, segment 1 KiB $fine us, flow $flow us"
    check "three times" [ -n "$coarse" -a -n "$fine" -a -n "$flow" ]
    check "1 KiB segments within 1% of the flow model" \
      awk -v a="$fine" -v b="$flow" 'BEGIN { d = (a - b) / b; exit !(d < 0.01 && d > -0.01) }'
    check "default segments more than 4% off (the option changed something)" \
      awk -v a="$coarse" -v b="$flow" 'BEGIN { d = (b - a) / b; exit !(d > 0.04 || d < -0.04) }' ;;
  model_estimate_refusals)
    expect_exit() {  # expect_exit CODE TEXT ARGS...: exit CODE and TEXT on stderr
      local want=$1 text=$2
      shift 2
      "$hcclsim" "$@" >/dev/null 2>"$tmp/err.txt"
      local rc=$?
      check "'$*' exits $want (got $rc)" [ $rc -eq "$want" ]
      check "'$*' says '$text'" contains "$tmp/err.txt" "$text"
    }
    expect_exit 2 "option --model" perf all_reduce --model fast
    expect_exit 2 "option --trace" perf all_reduce --model estimate --trace "$tmp/t.json"
    expect_exit 2 "option --links" perf all_reduce --model estimate --links "$tmp/l.csv"
    "$hcclsim" perf all_reduce -b 1M -e 1M --model estimate --expansion aiv --format csv >"$tmp/aiv.csv" 2>/dev/null
    aiv_rc=$?
    check "the AIV executors have a closed form (exit $aiv_rc)" [ $aiv_rc -eq 0 ]
    check "the AIV estimate names its executor" contains "$tmp/aiv.csv" "AllReduceMeshAiv"
    expect_exit 2 "option -b/-e: too large for the estimate" perf all_reduce --model estimate -b 64T -e 64T
    expect_exit 2 "too large for the estimate" perf all_reduce --model estimate --buffsize 1
    printf '{"topologies": ["%s"], "ops": ["all_reduce"], "sizes": ["1M"], "model": "fast"}' \
      "$src/configs/topologies/a2-server.json" >"$tmp/grid.json"
    expect_exit 2 "model" sweep "$tmp/grid.json"
    check "the grid error names the allowed models" contains "$tmp/err.txt" "estimate" ;;
  stream_json_lines)
    "$hcclsim" perf reduce_scatter -b 8K -e 1M --format jsonl >"$tmp/rows.jsonl" 2>/dev/null
    check "jsonl exits 0" [ $? -eq 0 ]
    python3 -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; assert len(rows)==8, len(rows)' \
      "$tmp/rows.jsonl" || fail=1 ;;
  install_prefix)
    # cmake --install into a prefix: the installed binary runs from anywhere on
    # the configs installed beside it, and HCCLSIM_DATA overrides them.
    cmake --install "$(dirname "$hcclsim")" --prefix "$tmp/prefix" >"$tmp/install.txt" 2>&1
    check "cmake --install exits 0" [ $? -eq 0 ]
    check "the configs are installed" [ -f "$tmp/prefix/share/hcclsim/configs/topologies/a2-server.json" ]
    check "the docs are installed" [ -f "$tmp/prefix/share/doc/hcclsim/README.md" ]
    (cd / && "$tmp/prefix/bin/hcclsim" perf all_reduce -b 8K -e 8K --format csv >"$tmp/installed.csv" 2>"$tmp/err.txt")
    check "the installed binary runs its default example" [ $? -eq 0 ]
    check "with a row" contains "$tmp/installed.csv" "all_reduce,8,"
    mkdir -p "$tmp/empty"
    (cd / && HCCLSIM_DATA="$tmp/empty" "$tmp/prefix/bin/hcclsim" perf all_reduce -b 8K -e 8K >/dev/null 2>"$tmp/err2.txt")
    rc=$?
    check "HCCLSIM_DATA without configs exits 2 (got $rc)" [ $rc -eq 2 ]
    check "naming the data directory" contains "$tmp/err2.txt" "$tmp/empty" ;;
  plot_png)
    if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
      echo "SKIP: python3-matplotlib is not installed (tools/setup.sh installs it)"
      exit 77
    fi
    "$hcclsim" perf all_reduce -b 8K -e 1M -f 4 --format csv >"$tmp/a.csv"
    "$hcclsim" perf all_reduce -b 8K -e 1M -f 4 --algo level0:ring --format csv | tail -n +2 >>"$tmp/a.csv"
    "$src/tools/plot" bandwidth "$tmp/a.csv" -o "$tmp/bw.png" 2>"$tmp/err.txt"
    check "tools/plot bandwidth exits 0" [ $? -eq 0 ]
    check "the PNG is not empty" [ -s "$tmp/bw.png" ]
    check "the file is a PNG" [ "$(head -c 8 "$tmp/bw.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    cat >"$tmp/validate.json" <<'JSON'
{"points": [{"id": "a", "group": "A2-1", "measured": 10.0, "simulated": 10.5, "error_pct": 5.0, "executor": "hixl"},
            {"id": "b", "group": "A2-2", "measured": 20.0, "simulated": 19.0, "error_pct": -5.0, "executor": "hccl"}],
 "groups": ["A2-1", "A2-2"]}
JSON
    "$src/tools/plot" scatter "$tmp/validate.json" -o "$tmp/scatter.svg" 2>>"$tmp/err.txt"
    check "tools/plot scatter exits 0" [ $? -eq 0 ]
    check "the SVG is an SVG" contains "$tmp/scatter.svg" "<svg"
    "$src/tools/plot" bandwidth "$tmp/missing.csv" -o "$tmp/x.png" 2>"$tmp/err2.txt"
    rc=$?
    check "a missing input exits 2 (got $rc)" [ $rc -eq 2 ]
    check "naming the file" contains "$tmp/err2.txt" "$tmp/missing.csv"
    cat "$tmp/err.txt" ;;
  plot_through_python)
    pydir="$(dirname "$hcclsim")/python"
    if [ ! -d "$pydir/hcclsim" ] || ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
      echo "SKIP: the Python module (pybind11-dev) or python3-matplotlib is missing (tools/setup.sh installs both)"
      exit 77
    fi
    PYTHONPATH="$pydir" "$src/tools/plot" perf all_gather --minbytes 1M --maxbytes 4M -o "$tmp/perf.png" 2>"$tmp/err.txt"
    check "tools/plot perf exits 0" [ $? -eq 0 ]
    check "the file is a PNG" [ "$(head -c 8 "$tmp/perf.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    PYTHONPATH="$pydir" "$src/tools/plot" validate "$src/configs/calibration/measurements.json" --only A2-3 \
      -o "$tmp/validate.svg" 2>>"$tmp/err.txt"
    check "tools/plot validate exits 0" [ $? -eq 0 ]
    check "the SVG is an SVG" contains "$tmp/validate.svg" "<svg"
    PYTHONPATH="$pydir" "$src/tools/plot" perf all_gather --ranks 99 -o "$tmp/x.png" 2>"$tmp/err2.txt"
    rc=$?
    check "a run the command refuses exits 2 (got $rc)" [ $rc -eq 2 ]
    check "with the command's message" contains "$tmp/err2.txt" "--ranks"
    check "and no picture" [ ! -e "$tmp/x.png" ] ;;
  *) unknown_case ;;
esac
finish_case
