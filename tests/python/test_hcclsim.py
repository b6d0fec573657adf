"""`import hcclsim` (python/hcclsim): each function gives what its command's --format json gives."""
import json
import os
import subprocess

import pytest

import hcclsim

SOURCE = os.environ["HCCLSIM_SOURCE_DIR"]
BINARY = os.environ["HCCLSIM_BINARY"]
A2_SERVER = os.path.join(SOURCE, "configs/topologies/a2-server.json")
MEASUREMENTS = os.path.join(SOURCE, "configs/calibration/measurements.json")


def command_json(*words):
    done = subprocess.run([BINARY, *words, "--format", "json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_perf_rows_are_the_commands_rows():
    rows = hcclsim.perf("all_reduce", topology=A2_SERVER, minbytes="1M", maxbytes="4M", ranks=4)
    assert [r["data_size"] for r in rows] == [1 << 20, 2 << 20, 4 << 20]
    assert all(r["ranks"] == 4 and r["op"] == "all_reduce" for r in rows)
    assert rows == command_json("perf", "all_reduce", "--topology", A2_SERVER, "--minbytes", "1M",
                                "--maxbytes", "4M", "--ranks", "4")


def test_options_map_to_flags_and_lists():
    rows = hcclsim.perf("all_gather", topology=A2_SERVER, minbytes="64K", maxbytes="64K", no_check=True,
                        model="estimate", algo=None)
    assert len(rows) == 1 and rows[0]["model"] == "estimate"
    assert rows[0]["check_result"] != "success"


def test_calls_are_independent_and_deterministic():
    first = hcclsim.perf("reduce_scatter", topology=A2_SERVER, minbytes="8M", maxbytes="8M")
    second = hcclsim.perf("reduce_scatter", topology=A2_SERVER, minbytes="8M", maxbytes="8M")
    assert first == second


def test_bad_input_raises_with_the_exit_code_and_message():
    with pytest.raises(hcclsim.Error) as failure:
        hcclsim.perf("all_reduce", topology=A2_SERVER, ranks=99)
    assert failure.value.code == 2
    assert "--ranks" in failure.value.message
    with pytest.raises(hcclsim.Error) as failure:
        hcclsim.perf("no_such_op")
    assert failure.value.code == 2


def test_format_is_chosen_by_the_function():
    with pytest.raises(TypeError):
        hcclsim.perf("all_reduce", format="csv")
    assert "data_size" in hcclsim.run("perf", "all_reduce", "--topology", A2_SERVER, "-b", "8K", "-e", "8K",
                                      "--format", "csv")


def test_moe_rows():
    rows = hcclsim.moe("dispatch", topology=os.path.join(SOURCE, "configs/topologies/a3-server.json"),
                       ep=8, tokens=16, hidden=1024, topk=2, experts=16, mode="low_latency")
    assert len(rows) == 1 and rows[0]["time_us"] > 0


def test_validate_points():
    points = hcclsim.validate(MEASUREMENTS, only="A2-3")
    assert [p["id"] for p in points] == ["A2-3/hccs-1GiB", "A2-3/onchip-1GiB", "A2-3/notify-record"]
    assert all(abs(p["error_pct"]) < 1 for p in points)


def test_calibrate_writes_the_fitted_profile(tmp_path):
    out = tmp_path / "fitted.json"
    constants = hcclsim.calibrate(MEASUREMENTS, profile=os.path.join(SOURCE, "configs/profiles/a2-910b.json"),
                                  fit=["npu.one_sided.sdma_issue"], only="A2-2", out=out)
    assert [c["path"] for c in constants] == ["npu.one_sided.sdma_issue"]
    assert json.loads(out.read_text())["npu"]["one_sided"]["sdma_issue"]["value"] == constants[0]["after"]


def test_recommend_rows():
    rows = hcclsim.recommend(topology=A2_SERVER, ops="all_gather", minbytes="1M", maxbytes="2M")
    assert [r["data_size"] for r in rows] == [1 << 20, 2 << 20]
    for r in rows:
        assert r["op"] == "all_gather"
        assert r["best"]["time_us"] <= r["default"]["time_us"]
        assert r["gain_pct"] >= 0


def test_scenario_rows_and_failure():
    scenarios = os.path.join(SOURCE, "configs/scenarios")
    rows = hcclsim.perf("all_reduce", topology=A2_SERVER, minbytes="1M", maxbytes="1M",
                        scenario=os.path.join(scenarios, "jitter-lognormal.json"), samples=5, seed=3)
    s = rows[0]["scenario"]
    assert s["samples"] == 5 and s["seed"] == 3 and len(s["times_us"]) == 5
    assert rows[0]["time_us"] == s["p50_us"] == sorted(s["times_us"])[2]
    assert rows == command_json("perf", "all_reduce", "--topology", A2_SERVER, "-b", "1M", "-e", "1M",
                                "--scenario", os.path.join(scenarios, "jitter-lognormal.json"),
                                "--samples", "5", "--seed", "3")
    with pytest.raises(hcclsim.Error) as failure:
        hcclsim.perf("all_reduce", topology=A2_SERVER, minbytes="1M", maxbytes="1M",
                     scenario=os.path.join(scenarios, "a2-hccs-link-down.json"))
    assert failure.value.code == 1
    assert "hccs link npu0<->npu1 is down" in failure.value.message


def test_step_is_the_commands_step():
    model = os.path.join(SOURCE, "configs/models/tiny-llama.json")
    d = hcclsim.step(model, layout="tp=2,dp=4", batch="global=4,micro=1,seq=512", model="estimate")
    assert d["step_time_us"] > d["compute_us"] > 0
    assert {g["group"] for g in d["groups"]} == {"tp", "dp"}
    assert d == command_json("step", "--model-config", model, "--layout", "tp=2,dp=4",
                             "--batch", "global=4,micro=1,seq=512", "--model", "estimate")


def test_step_runs_chakra_traces():
    # ASTRA-sim's 8-NPU AllReduce example: one collective on HCCL's executor.
    traces = os.path.join(SOURCE, "tests/data/chakra/astra-sim-all_reduce-8npus-1MB")
    d = hcclsim.step(chakra=traces, model="estimate")
    assert [g["executor"] for g in d["groups"]] == ["AllReduceMeshOpbaseLoopExecutor"]
    assert d == command_json("step", "--chakra", traces, "--model", "estimate")
