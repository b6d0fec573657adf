#!/usr/bin/env bash
# `hcclsim step` on the command line: bad input exits 2 naming the option or
# the file and JSON path; a small step's JSON matches its golden reference
# byte for byte (tests/step/golden_tiny.json; regenerate on purpose with
# `tests/cli/step.sh build/hcclsim . update`); runs are deterministic; the
# trace has a track per rank, stream and group (the estimate's: per planned
# rank); --model auto runs the estimate when the detailed step is too large.
# usage: step.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
CASES=(bad_layout_key layout_too_large bad_batch missing_model unsupported_model_type model_missing_key
       deepep_search deepep_estimate trace_estimate bad_compute_file detailed_too_large auto_too_large bad_model golden_json deterministic trace
       search good_deepep good_a3_issue_example_estimate scenario_estimate scenario_slow_rank
       chakra_astra_sim chakra_round_trip chakra_export_existing chakra_missing_rank chakra_with_model chakra_not_dir
       per_layer_csv per_layer_json mc2_without_sp)
if [ "$name" = update ]; then name=golden_json; update=1; else update=0; fi
start_cases
m="$src/configs/models"
a2c="$src/configs/topologies/a2-cluster.json"
cm="$src/configs/topologies/cloudmatrix384.json"
tiny=(step --model-config "$m/tiny-llama.json" --batch global=4,micro=1,seq=512)
expect_rc=2
expect=()
py() { /usr/bin/python3 - "$@"; }
case "$name" in
  bad_layout_key) args=("${tiny[@]}" --layout tp=2,tq=2); expect=("--layout" "tq" "expected") ;;
  layout_too_large) args=("${tiny[@]}" --layout tp=8,pp=2,dp=1); expect=("--layout" "16 ranks" "8 NPUs") ;;
  bad_batch) args=(step --model-config "$m/tiny-llama.json" --layout tp=2,dp=4 --batch global=6,micro=1,seq=512)
    expect=("--batch" "micro x dp") ;;
  missing_model) args=(step --model-config "$tmp/none.json" --layout tp=2 --batch global=1,seq=8); expect=("none.json") ;;
  unsupported_model_type)
    echo '{"model_type": "gpt2", "hidden_size": 8}' >"$tmp/c.json"
    args=(step --model-config "$tmp/c.json" --layout tp=2 --batch global=1,seq=8); expect=("$tmp/c.json" '$.model_type' "gpt2") ;;
  model_missing_key)
    echo '{"model_type": "llama", "hidden_size": 1024}' >"$tmp/c.json"
    args=(step --model-config "$tmp/c.json" --layout tp=2 --batch global=1,seq=8); expect=("$tmp/c.json" "num_hidden_layers") ;;
  deepep_search)
    args=(step --model-config "$m/tiny-moe.json" --search "tp=1;ep=2,8" --batch global=8,seq=256 --dispatcher deepep)
    expect=("--dispatcher" "closed form" "layout search") ;;
  bad_model) args=("${tiny[@]}" --layout tp=2,dp=4 --model fast); expect=("--model" "fast" "auto, detailed or estimate") ;;
  bad_compute_file)
    printf 'operator,shape,us\nqkv,*,fast\n' >"$tmp/c.csv"
    args=("${tiny[@]}" --layout tp=2,dp=4 --compute "$tmp/c.csv"); expect=("$tmp/c.csv line 2" "fast") ;;
  detailed_too_large)
    # A detailed step whose tasks would need more than --max-memory is refused before it starts (the issue's
    # Llama-3-70B step needs hundreds of millions of tasks; a small step under a 1 MiB limit takes the same path).
    args=("${tiny[@]}" --layout tp=2,dp=4 --max-memory 1MiB --model detailed); expect=("--layout" "too large" "--model estimate") ;;
  scenario_estimate)
    args=("${tiny[@]}" --layout tp=2,dp=4 --model estimate --scenario "$src/configs/scenarios/slow-rank.json")
    expect=("--scenario" "--model detailed") ;;
  chakra_export_existing)
    mkdir -p "$tmp/out" && echo keep >"$tmp/out/step.0.et"
    args=("${tiny[@]}" --layout tp=2,dp=4 --model estimate --export-chakra "$tmp/out")
    expect=("--export-chakra" "step.0.et" "already exists") ;;
  chakra_missing_rank)
    mkdir -p "$tmp/w" && cp "$src/tests/data/chakra/astra-sim-all_reduce-8npus-1MB/all_reduce.0.et" \
      "$src/tests/data/chakra/astra-sim-all_reduce-8npus-1MB/all_reduce.2.et" "$tmp/w/"
    args=(step --chakra "$tmp/w"); expect=("--chakra" "all_reduce.1.et" "missing") ;;
  chakra_with_model) args=("${tiny[@]}" --chakra "$src/tests/data/chakra/astra-sim-all_reduce-8npus-1MB"); expect=("--model-config" "leave") ;;
  chakra_not_dir) args=(step --chakra "$tmp/none"); expect=("--chakra" "not a directory") ;;
  mc2_without_sp) args=("${tiny[@]}" --layout tp=2,dp=4 --mc2 --no-sequence-parallel); expect=("--mc2" "--no-sequence-parallel") ;;
  per_layer_csv) args=("${tiny[@]}" --layout tp=2,dp=4 --per-layer --format csv); expect=("--per-layer" "json") ;;
  golden_json|deterministic|trace|trace_estimate|deepep_estimate|auto_too_large|search|good_deepep|good_a3_issue_example_estimate|scenario_slow_rank|chakra_astra_sim|chakra_round_trip|per_layer_json) ;;
  *) echo "unknown case '$name'; cases: ${CASES[*]}" >&2; exit 2 ;;
esac
fail=0
golden=(step --model-config "$m/tiny-moe.json" --layout tp=2,pp=2,dp=2,ep=2 --batch global=4,micro=1,seq=256
        --topology "$a2c" --servers 1)
case "$name" in
  golden_json)
    if [ "$update" -eq 1 ]; then
      "$hcclsim" "${golden[@]}" --format json >"$src/tests/step/golden_tiny.json" && echo "wrote $src/tests/step/golden_tiny.json"
      exit $?
    fi
    "$hcclsim" "${golden[@]}" --format json >"$tmp/out.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    diff -u "$src/tests/step/golden_tiny.json" "$tmp/out.json" >&2 || {
      echo "FAIL: differs from tests/step/golden_tiny.json (if intended: tests/cli/step.sh $hcclsim $src update)" >&2; fail=1; } ;;
  deterministic)
    "$hcclsim" "${golden[@]}" --format csv >"$tmp/a.csv" || fail=1
    "$hcclsim" "${golden[@]}" --format csv >"$tmp/b.csv" || fail=1
    cmp -s "$tmp/a.csv" "$tmp/b.csv" || { echo "FAIL: two runs differ" >&2; fail=1; } ;;
  trace)
    "$hcclsim" "${tiny[@]}" --layout tp=2,pp=2,dp=2 --trace "$tmp/t.json" --format json >"$tmp/out.json" || fail=1
    py "$tmp/t.json" "$tmp/out.json" <<'PY' || fail=1
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
ranks = {pid for pid, _ in tracks if pid < 1 << 30}
assert ranks == set(range(8)), ranks
names = {n for _, n in tracks}
for want in ("compute", "tp/", "dp/", "pp0f/", "pp0b/"):
    assert any(n.startswith(want) for n in names), (want, sorted(names))
d = json.load(open(sys.argv[2]))
assert set(d) == {"step_time_us", "compute_us", "bubble_us", "groups", "critical_path", "busiest_links", "assumed", "model"}, set(d)
assert d["model"] == "detailed", d["model"]
for g in d["groups"]:
    assert set(g) == {"group", "ranks", "executor", "time_us", "exposed_us"}, g
    assert 0 <= g["exposed_us"] <= g["time_us"] + 1e-3, g
assert d["busiest_links"] and d["critical_path"][-1]["end_us"] == d["step_time_us"], d["critical_path"][-1]
PY
    ;;
  trace_estimate)
    # The estimate's schedule as a trace: a slice per operation on each
    # planned rank (TP and DP index 0 of each stage: ranks 0 and 4 here),
    # ending where the step ends.
    "$hcclsim" "${tiny[@]}" --layout tp=2,pp=2,dp=2 --model estimate --trace "$tmp/t.json" --format json >"$tmp/out.json" || fail=1
    py "$tmp/t.json" "$tmp/out.json" <<'PY' || fail=1
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
assert {pid for pid, _ in tracks} == {0, 4}, tracks
names = {n for _, n in tracks}
assert {"compute", "tp/collectives", "dp/collectives", "pp0f/collectives", "pp0b/collectives"} <= names, sorted(names)
slices = [e for e in events if e["ph"] == "X"]
assert slices and all(e["args"]["model"] == "estimate" and e["dur"] >= 0 for e in slices)
colls = [e for e in slices if "group" in e["args"]]
assert colls and all(e["args"]["executor"] and e["args"]["ranks"] for e in colls), colls[:2]
d = json.load(open(sys.argv[2]))
assert d["model"] == "estimate" and "shared_links" in d, d.keys()
end = max(e["ts"] + e["dur"] for e in slices)
assert abs(end - d["step_time_us"]) < 1e-3, (end, d["step_time_us"])
PY
    ;;
  auto_too_large)
    # Without --model, a step the detailed model would refuse (--max-memory)
    # runs as the estimate, says so on stderr and in "model", and gives the
    # estimate's own output.
    "$hcclsim" "${tiny[@]}" --layout tp=2,dp=4 --max-memory 1MiB --format json >"$tmp/auto.json" 2>"$tmp/err.txt" ||
      { cat "$tmp/err.txt" >&2; fail=1; }
    grep -q "note: --model auto: the detailed model is too large" "$tmp/err.txt" || { echo "FAIL: no note" >&2; cat "$tmp/err.txt" >&2; fail=1; }
    "$hcclsim" "${tiny[@]}" --layout tp=2,dp=4 --model estimate --format json >"$tmp/estimate.json" || fail=1
    cmp -s "$tmp/auto.json" "$tmp/estimate.json" || { echo "FAIL: auto's fallback differs from --model estimate" >&2; fail=1; }
    grep -q '"model": "estimate"' "$tmp/auto.json" || { echo "FAIL: model not estimate" >&2; fail=1; }
    "$hcclsim" "${tiny[@]}" --layout tp=2,dp=4 --format json >"$tmp/fits.json" 2>"$tmp/err.txt" || fail=1
    grep -q '"model": "detailed"' "$tmp/fits.json" || { echo "FAIL: a step that fits does not run detailed" >&2; fail=1; }
    [ ! -s "$tmp/err.txt" ] || { echo "FAIL: a note without a fallback" >&2; cat "$tmp/err.txt" >&2; fail=1; } ;;
  search)
    "$hcclsim" step --model-config "$m/tiny-llama.json" --batch global=16,micro=1,seq=512 --search "tp=1,2,4,8;pp=1,2,4" \
      --format json >"$tmp/s.json" 2>"$tmp/err.txt" || fail=1
    py "$tmp/s.json" <<'PY' || fail=1
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 12, len(rows)
valid = [r for r in rows if r["valid"]]
times = [r["step_time_us"] for r in valid]
assert times == sorted(times) and len(valid) >= 6, rows
# tp x pp = 32 leaves no DP rank on 8 NPUs; pp = 4 over 4 layers is fine.
assert any(not r["valid"] and "tp=8" in r["layout"] and "pp=4" in r["layout"] for r in rows), rows
PY
    grep -q "note" "$tmp/err.txt" && { echo "FAIL: a note although layouts fit" >&2; fail=1; }
    # A grid where nothing fits: every row says why, and a note says none fits.
    "$hcclsim" step --model-config "$m/tiny-llama.json" --batch global=16,micro=1,seq=512 --search "tp=16;pp=1,2" \
      >"$tmp/none.txt" 2>"$tmp/none_err.txt" || fail=1
    [ "$(grep -c "refused: no DP rank left: tp x cp x pp = .* is more than the 8 NPUs" "$tmp/none.txt")" -eq 2 ] ||
      { echo "FAIL: the refusals do not say why" >&2; cat "$tmp/none.txt" >&2; fail=1; }
    grep -q "note: no layout of --search plans and fits on 8 NPUs" "$tmp/none_err.txt" ||
      { echo "FAIL: no note that nothing fits" >&2; cat "$tmp/none_err.txt" >&2; fail=1; }
    ;;
  deepep_estimate)
    # The estimate times each distinct MoE kernel call alone on the step's
    # platform; within 5% of the detailed step (tests/unit/test_step.cpp).
    run=(step --model-config "$m/tiny-moe.json" --layout tp=1,dp=8,ep=8 --batch global=8,seq=256 --dispatcher deepep --format json)
    "$hcclsim" "${run[@]}" --model estimate >"$tmp/est.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    "$hcclsim" "${run[@]}" --model detailed >"$tmp/det.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    py "$tmp/est.json" "$tmp/det.json" <<'PY' || fail=1
import json, sys
est, det = (json.load(open(f)) for f in sys.argv[1:3])
assert est["model"] == "estimate" and det["model"] == "detailed"
ep = [g for g in est["groups"] if g["group"] == "ep"]
assert ep and ep[0]["executor"] == "deepep_normal" and ep[0]["time_us"] > 0, est["groups"]
assert abs(est["step_time_us"] / det["step_time_us"] - 1) < 0.05, (est["step_time_us"], det["step_time_us"])
PY
    ;;
  good_deepep)
    "$hcclsim" step --model-config "$m/tiny-moe.json" --layout tp=1,dp=8,ep=8 --batch global=8,seq=256 --dispatcher deepep \
      --format json >"$tmp/out.json" || fail=1
    py "$tmp/out.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
ep = [g for g in d["groups"] if g["group"] == "ep"]
assert ep and ep[0]["executor"] == "deepep_normal" and ep[0]["time_us"] > 0, d["groups"]
PY
    ;;
  scenario_slow_rank)
    # Rank 3 (compute x1.5, +2 us a task) slows the whole step: it is in
    # every group with the others; the healthy time is the step's own.
    args=(step --model-config "$m/tiny-moe.json" --layout tp=2,pp=2,dp=2,ep=2 --batch global=4,micro=1,seq=256)
    "$hcclsim" "${args[@]}" --format json >"$tmp/healthy.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    "$hcclsim" "${args[@]}" --format json --scenario "$src/configs/scenarios/slow-rank.json" >"$tmp/out.json" \
      2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    py "$tmp/healthy.json" "$tmp/out.json" <<'PY' || fail=1
import json, sys
healthy = json.load(open(sys.argv[1]))
d = json.load(open(sys.argv[2]))
s = d["scenario"]
assert abs(s["healthy_time_us"] - healthy["step_time_us"]) < 1e-3, (s["healthy_time_us"], healthy["step_time_us"])
assert abs(s["p50_us"] - d["step_time_us"]) < 1e-3, (s["p50_us"], d["step_time_us"])
assert s["slowdown"] > 1.05, s["slowdown"]
assert any("slow rank 3" in c for c in s["changes"]), s["changes"]
PY
    ;;
  per_layer_json)
    # Stage 0 of tiny-llama on pp=2 holds layers 0 and 1; their TP collectives are part of the tp group's time.
    "$hcclsim" "${tiny[@]}" --layout tp=2,pp=2,dp=2 --per-layer --format json >"$tmp/out.json" 2>"$tmp/err.txt" ||
      { cat "$tmp/err.txt" >&2; fail=1; }
    py "$tmp/out.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
layers = d["layers"]
assert [l["layer"] for l in layers] == [0, 1], layers
tp = [g for g in d["groups"] if g["group"] == "tp"][0]
assert sum(l["communication_us"] for l in layers) <= tp["time_us"] + 1e-3, (layers, tp)
for l in layers:
    assert set(l) == {"layer", "compute_us", "communication_us", "exposed_us"}, l
    assert l["compute_us"] > 0 and 0 <= l["exposed_us"] <= l["communication_us"] + 1e-3, l
PY
    ;;
  chakra_astra_sim)
    # ASTRA-sim's own example workloads (tests/data/chakra/README.md) on an A2
    # server: each is the one collective perf times, through HCCL's selection.
    for ex in all_reduce all_gather all_to_all; do
      "$hcclsim" step --chakra "$src/tests/data/chakra/astra-sim-$ex-8npus-1MB" --format json >"$tmp/$ex.json" \
        2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    done
    py "$tmp" <<'PY' || fail=1
import json, sys
want = {"all_reduce": "AllReduceMeshOpbaseLoopExecutor", "all_gather": "AllGatherMeshOpbaseExecutor", "all_to_all": "RunAlltoAllVStaged"}
for ex, executor in want.items():
    d = json.load(open(f"{sys.argv[1]}/{ex}.json"))
    g = d["groups"]
    assert len(g) == 1 and g[0]["executor"] == executor and g[0]["ranks"] == list(range(8)), (ex, g)
    assert d["step_time_us"] > 0 and d["compute_us"] == 0, (ex, d)
PY
    ;;
  chakra_round_trip)
    # A step written as Chakra traces and run from them: the same estimate
    # (compute in whole microseconds, as Chakra stores durations).
    echo '*,*,10' >"$tmp/c.csv"
    step=("${tiny[@]}" --layout tp=2,pp=2,dp=2 --compute "$tmp/c.csv" --model estimate --format json)
    "$hcclsim" "${step[@]}" --export-chakra "$tmp/et" >"$tmp/a.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    [ -f "$tmp/et/step.7.et" ] && [ -f "$tmp/et/comm_group.json" ] || { echo "FAIL: traces not written" >&2; fail=1; }
    "$hcclsim" step --chakra "$tmp/et" --model estimate --format json >"$tmp/b.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    py "$tmp/a.json" "$tmp/b.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert abs(a["step_time_us"] - b["step_time_us"]) < 1e-3 and abs(a["compute_us"] - b["compute_us"]) < 1e-3, (a["step_time_us"], b["step_time_us"])
PY
    "$hcclsim" step --chakra "$tmp/et" --format csv >/dev/null 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; } ;;
  good_a3_issue_example_estimate)
    # The issue's DeepSeek-V3 step on CloudMatrix384, in estimate mode.
    "$hcclsim" step --model-config "$m/deepseek-v3.json" --layout tp=1,pp=8,ep=32,dp=96 --batch global=1536,micro=1,seq=4096 \
      --topology "$cm" --model estimate --format json >"$tmp/out.json" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail=1; }
    py "$tmp/out.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
groups = {g["group"]: g for g in d["groups"]}
assert set(groups) == {"ep", "pp", "dp"}, groups
assert len(groups["ep"]["ranks"]) == 32 and len(groups["dp"]["ranks"]) == 96 and len(groups["pp"]["ranks"]) == 8
# 16 micro-batches over 8 stages: the bubble is about 7/23 of the step.
assert 0.2 < d["bubble_us"] / d["step_time_us"] < 0.4, d["bubble_us"] / d["step_time_us"]
PY
    ;;
  *)
    run_case ;;
esac
[ $fail -eq 0 ] && echo "ok: $name"
exit $fail
