"""hcclsim from Python: the simulator's commands as functions returning lists of dicts.

    import hcclsim
    rows = hcclsim.perf("all_reduce", topology="configs/topologies/a2-server.json",
                        minbytes="1M", maxbytes="64M")
    for row in rows:
        print(row["data_size"], row["time_us"], row["busbw_GBps"])

Each function runs the command of the same name (`hcclsim perf`, `moe`,
`validate`, `calibrate`, `recommend`, `step`; docs/user-guide.md) and returns
the rows its `--format json` output holds, one dict per row with the same keys
(`step`: the step's one dict, or a search's rows). Keyword
arguments are the command's long options: `minbytes="1M"` is `--minbytes 1M`,
`flow_quantum="0"` is `--flow-quantum 0`; True gives a flag (`no_check=True`),
None or False leaves the option out, a list or tuple is joined with commas
(`fit=["links.hccs.bandwidth", "npu.sdma.task_fixed"]`).

Every call runs in a child process of its own, so calls are independent and a
failing run never takes the interpreter with it. A command that fails raises
hcclsim.Error with the command's exit code (2: bad input, 1: the run failed)
and its message.
"""

import json
import os

from . import _hcclsim

__all__ = ["Error", "run", "perf", "moe", "validate", "calibrate", "recommend", "step"]


class Error(Exception):
    """A command that exited non-zero: `code` is its exit code, `message` what it said."""

    def __init__(self, code, message, words):
        self.code = code
        self.message = message
        self.words = words
        super().__init__("hcclsim %s: exit %d: %s" % (" ".join(words[:2]), code, message.strip()))


def _option_words(options):
    words = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, (list, tuple)):
            words += [flag, ",".join(str(v) for v in value)]
        else:
            words += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    return words


def run(*words):
    """Runs `hcclsim WORDS...` and returns its standard output as text; raises Error on a non-zero exit."""
    words = [os.fspath(w) if isinstance(w, os.PathLike) else str(w) for w in words]
    code, out, err = _hcclsim.run(words)
    if code != 0:
        raise Error(code, err or out, words)
    return out


def _json(words, options):
    if "format" in options:
        raise TypeError("the functions choose the output format themselves (JSON); use hcclsim.run for others")
    return json.loads(run(*words, *_option_words(options), "--format", "json"))


def perf(op, **options):
    """`hcclsim perf OP`: one dict per data_size (time_us, algbw_GBps, busbw_GBps, executor, ...)."""
    return _json(["perf", op], options)


def moe(phase="both", **options):
    """`hcclsim moe PHASE` (dispatch | combine | both): one dict per kernel run."""
    return _json(["moe", phase], options)


def validate(file, **options):
    """`hcclsim validate FILE`: one dict per measured point (id, group, measured, simulated, error_pct, status, ...)."""
    return _json(["validate", file], options)["points"]


def calibrate(files, profile, fit, out, **options):
    """`hcclsim calibrate FILES --profile PROFILE --fit FIT --out OUT`: writes the fitted profile to OUT and
    returns one dict per fitted constant (path, before, after, bounds, rows)."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    return _json(["calibrate", *files], dict(options, profile=profile, fit=fit, out=out))["constants"]


def recommend(**options):
    """`hcclsim recommend`: one dict per op, size and rank count (default, best, gain_pct)."""
    return _json(["recommend"], options)


def step(model_config=None, **options):
    """`hcclsim step --model-config FILE`: the step's dict (step_time_us, compute_us, bubble_us, groups,
    critical_path, busiest_links, assumed, model: the model that ran; shared_links with the estimate); with `search=...`,
    one dict per layout. Without a model,
    `chakra=DIR` runs a directory of Chakra execution traces instead."""
    if model_config is not None:
        options = dict(options, model_config=model_config)
    return _json(["step"], options)
