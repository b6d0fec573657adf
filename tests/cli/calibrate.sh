#!/usr/bin/env bash
# `hcclsim calibrate` and `hcclsim validate --profile` on the command line:
# bad input exits 2 naming the option, the constant or the point; FITTED is
# never replaced by a failed run; two runs write byte-identical files.
# usage: calibrate.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
CASES=(calibrate_deterministic calibrate_json calibrate_no_row_depends calibrate_without_bounds calibrate_unknown_path
       calibrate_out_kept_on_failure calibrate_no_record calibrate_help validate_profile_other_product
       validate_profile_same_product refit_a2 refit_a3 calibrate_bad_stage)
start_cases
m="$src/configs/calibration/measurements.json"
a2="$src/configs/profiles/a2-910b.json"
a3="$src/configs/profiles/a3-910c.json"
# A small fit: the A2-1 reads, two constants (a fraction of a second).
small=(calibrate "$m" --profile "$a2" --fit links.hccs.bandwidth,npu.sdma.read_fixed --only A2-1/read)
py() { /usr/bin/python3 - "$@"; }
expect_rc=2
expect=()
fail=0
case "$name" in
  calibrate_deterministic)
    "$hcclsim" "${small[@]}" --out "$tmp/a.json" >"$tmp/a.txt" 2>/dev/null || fail=1
    "$hcclsim" "${small[@]}" --out "$tmp/b.json" >"$tmp/b.txt" 2>/dev/null || fail=1
    cmp -s "$tmp/a.json" "$tmp/b.json" || { echo "FAIL: two runs wrote different profiles" >&2; fail=1; }
    cmp -s "$tmp/a.txt" "$tmp/b.txt" || { echo "FAIL: two runs printed different tables" >&2; fail=1; }
    grep -q "links.hccs.bandwidth" "$tmp/a.txt" || { echo "FAIL: no table" >&2; fail=1; }
    ls "$tmp" | grep -q tmp- && { echo "FAIL: a temporary file was left behind" >&2; fail=1; } ;;
  calibrate_json)
    "$hcclsim" "${small[@]}" --out "$tmp/f.json" --format json >"$tmp/r.json" 2>/dev/null || fail=1
    py "$tmp/r.json" "$tmp/f.json" "$a2" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
assert [c["path"] for c in r["constants"]] == ["links.hccs.bandwidth", "npu.sdma.read_fixed"], r["constants"]
g = r["groups"][0]
assert g["points"] == 8 and g["fitted"] == 8, g
assert g["after_mean_abs_error_pct"] <= g["before_mean_abs_error_pct"] + 1e-9, g
assert g["loo_mean_abs_error_pct"] is not None and g["loo_mean_abs_error_pct"] >= g["after_mean_abs_error_pct"] - 1e-9, g
assert all(p["model"] == "detailed" and p["fitted"] for p in r["points"]), r["points"]
f = json.load(open(sys.argv[2]))
bw = f["links"]["hccs"]["bandwidth"]
assert bw["value"] == r["constants"][0]["after"], (bw, r["constants"][0])
assert "hcclsim calibrate" in bw["source"] and len(bw["measured"]) == 8, bw
assert f["calibration"] == {"fit": ["links.hccs.bandwidth", "npu.sdma.read_fixed"],
                            "measurements": [f["calibration"]["measurements"][0]], "only": ["A2-1/read"]}, f["calibration"]
# Everything but the fitted constants and the record is the base profile's.
base = json.load(open(sys.argv[3]))
for k in ("links", "npu", "calibration"):
    f.pop(k); base.pop(k)
assert f == base
PY
    ;;
  calibrate_no_row_depends)
    # No RDMA post in the rows of one server.
    args=(calibrate "$m" --profile "$a2" --fit npu.rdma.post --only A2-1/ --out "$tmp/f.json")
    expect=("--fit" "npu.rdma.post" "no row depends") ;;
  calibrate_without_bounds)
    args=(calibrate "$m" --profile "$a2" --fit npu.sdma.task_fixed --out "$tmp/f.json")
    expect=("--fit" "npu.sdma.task_fixed" "bounds") ;;
  calibrate_unknown_path)
    args=(calibrate "$m" --profile "$a2" --fit links.hccs.bandwith --out "$tmp/f.json")
    expect=("--fit" "links.hccs.bandwith") ;;
  calibrate_out_kept_on_failure)
    echo "keep me" >"$tmp/f.json"
    args=(calibrate "$m" --profile "$a2" --fit npu.rdma.post --only A2-1/ --out "$tmp/f.json")
    expect=("npu.rdma.post") ;;
  calibrate_no_record)
    # Neither FILE nor --fit: the profile's record is needed.
    py "$a2" "$tmp/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d.pop("calibration"); json.dump(d, open(sys.argv[2], "w"))
PY
    args=(calibrate --profile "$tmp/p.json" --out "$tmp/f.json"); expect=("--fit" "calibration") ;;
  refit_a2|refit_a3)
    # The shipped profile re-created byte for byte from its own record (every
    # stage of it): a copy beside a copy of the measurement file, so the
    # relative path the fitted profile records is the shipped one.
    profile=$([ "$name" = refit_a2 ] && echo a2-910b.json || echo a3-910c.json)
    mkdir -p "$tmp/profiles" "$tmp/calibration"
    cp "$src/configs/profiles/$profile" "$tmp/profiles/$profile"
    cp "$m" "$tmp/calibration/measurements.json"
    (cd "$src" && "$hcclsim" calibrate --profile "$tmp/profiles/$profile" --out "$tmp/profiles/refit.json") \
      >"$tmp/out.txt" 2>"$tmp/err.txt" || { echo "FAIL: calibrate exited non-zero" >&2; fail=1; }
    cmp "$tmp/profiles/refit.json" "$src/configs/profiles/$profile" ||
      { echo "FAIL: calibrate did not re-create configs/profiles/$profile" >&2; diff "$tmp/profiles/refit.json" "$src/configs/profiles/$profile" | head -20; fail=1; }
    ls "$tmp/profiles" | grep -q tmp- && { echo "FAIL: a stage's temporary profile was left behind" >&2; fail=1; } ;;
  calibrate_bad_stage)
    # A later stage must name constants with bounds, as the first does.
    py "$a2" "$tmp/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["calibration"]["then"] = [{"fit": ["npu.sdma.engines"]}]; json.dump(d, open(sys.argv[2], "w"))
PY
    args=(calibrate --profile "$tmp/p.json" --out "$tmp/f.json"); expect=("calibration.then[0].fit[0]" "npu.sdma.engines" "bounds") ;;
  calibrate_help)
    "$hcclsim" calibrate --help >"$tmp/h.txt" 2>&1 || fail=1
    for s in "--fit" "--out" "bounds" "leave-one-out" "estimate mode" "Limits" "deterministic"; do
      grep -qF -- "$s" "$tmp/h.txt" || { echo "FAIL: --help does not mention '$s'" >&2; fail=1; }
    done ;;
  validate_profile_other_product)
    args=(validate "$m" --only A2-1/write/16K --profile "$a3"); expect=("--profile" "A2-1/write/16K" "910C") ;;
  validate_profile_same_product)
    # A slower HCCS read rate in another A2 profile: the reads come out slower than with the topology's own.
    py "$a2" "$tmp/p.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["links"]["hccs"]["bandwidth"]["value"] = "20GBps"; json.dump(d, open(sys.argv[2], "w"))
PY
    "$hcclsim" validate "$m" --only A2-1/read/2M --format csv >"$tmp/own.csv" || fail=1
    "$hcclsim" validate "$m" --only A2-1/read/2M --format csv --profile "$tmp/p.json" >"$tmp/other.csv" || fail=1
    py "$tmp/own.csv" "$tmp/other.csv" <<'PY' || fail=1
import csv, sys
own, other = (float(next(csv.DictReader(open(f)))["simulated"]) for f in sys.argv[1:3])
assert other < own and other < 20, (own, other)
PY
    ;;
  *) echo "unknown case '$name'; cases: ${CASES[*]}" >&2; exit 2 ;;
esac
if [ ${#expect[@]} -gt 0 ]; then
  run_case
  if [ "$name" = calibrate_out_kept_on_failure ]; then
    [ "$(cat "$tmp/f.json")" = "keep me" ] || { echo "FAIL: a failed run replaced --out" >&2; fail=1; }
    ls "$tmp" | grep -q tmp- && { echo "FAIL: a temporary file was left behind" >&2; fail=1; }
  fi
fi
[ $fail -eq 0 ] && echo "ok: $name"
exit $fail
