#!/usr/bin/env bash
# Bad input to the hcclsim command line: each case must exit with code 2
# (never >= 128, which would be a crash by signal), print a message on
# stderr naming the problem, and nothing else.
# usage: bad_input.sh HCCLSIM SOURCE_DIR CASE   (CASE "list" prints the cases)
set -u
# shellcheck source=../lib/case_script.sh
. "$(dirname "$0")/../lib/case_script.sh"
topology="$src/configs/topologies/a2-server.json"
profile="$src/configs/profiles/a2-910b.json"

CASES=(malformed_topology_json unknown_topology_key unknown_profile_key bandwidth_number
       bandwidth_no_unit too_many_ranks size_not_multiple_of_dtype unknown_op unknown_algo
       unknown_option unknown_dtype root_out_of_range missing_topology_file control_good_input
       good_flag_before_op segment_without_segment_model segment_too_fine segment_not_a_size)
start_cases

# A copy of the real profile with one line changed by sed; fails the case if
# the line is not found (the real profile changed shape).
profile_with() {  # profile_with OUT SED_EXPR
  sed -e "$2" "$profile" >"$1"
  if cmp -s "$1" "$profile"; then
    echo "FAIL: could not make $1 from $profile with '$2'" >&2
    exit 1
  fi
}
# A topology like the real one, naming `$2` as its profile.
topology_with_profile() {  # topology_with_profile OUT PROFILE
  sed -e "s#\"profile\": *\"[^\"]*\"#\"profile\": \"$2\"#" "$topology" >"$1"
}

expect_rc=2
expect=()        # substrings stderr must contain
args=()
case "$name" in
  malformed_topology_json)
    printf '{\n  "name": "broken",\n  "npus": 8,\n  "links": [\n' >"$tmp/broken.json"
    args=(perf all_reduce --topology "$tmp/broken.json")
    expect=("$tmp/broken.json" "invalid JSON" "line") ;;
  unknown_topology_key)
    topology_with_profile "$tmp/topo2.json" "$profile"
    sed -e 's/"npus": 8,/"npus": 8, "npu_count": 8,/' "$tmp/topo2.json" >"$tmp/topo.json"
    args=(perf all_reduce --topology "$tmp/topo.json")
    expect=("$tmp/topo.json" '$.npu_count' "unknown key" "expected one of") ;;
  unknown_profile_key)
    profile_with "$tmp/profile.json" 's/"engines": 16,/"engines": 16, "engine_count": 16,/'
    args=(perf all_reduce --profile "$tmp/profile.json")
    expect=("$tmp/profile.json" '$.npu.sdma' "engine_count" "expected one of") ;;
  bandwidth_number)
    profile_with "$tmp/profile.json" 's/"transport_rate": {[^}]*}/"transport_rate": 20.94/'
    args=(perf all_reduce --profile "$tmp/profile.json")
    expect=("$tmp/profile.json" '$.links.hccs.transport_rate' "unit") ;;
  bandwidth_no_unit)
    profile_with "$tmp/profile.json" 's/"20.94GBps"/"20.94"/'
    args=(perf all_reduce --profile "$tmp/profile.json")
    expect=("$tmp/profile.json" '$.links.hccs.transport_rate' "no unit" "GBps") ;;
  too_many_ranks)
    args=(perf all_reduce --topology "$topology" --ranks 16)
    expect=("--ranks" "16" "8") ;;
  size_not_multiple_of_dtype)
    args=(perf all_reduce --topology "$topology" -b 3 -d fp16)
    expect=("-b" "3" "fp16" "multiple") ;;
  unknown_op)
    args=(perf allreduce --topology "$topology")
    expect=("allreduce" "unknown" "all_reduce") ;;
  unknown_algo)
    args=(perf all_reduce --topology "$topology" --algo level0:tree)
    expect=("--algo" "tree") ;;
  unknown_option)
    args=(perf all_reduce --topology "$topology" --colour red)
    expect=("--colour") ;;
  unknown_dtype)
    args=(perf all_reduce --topology "$topology" -d fp8)
    expect=("-d" "fp8" "expected one of") ;;
  root_out_of_range)
    args=(perf broadcast --topology "$topology" --ranks 4 -r 4)
    expect=("-r" "4" "root") ;;
  missing_topology_file)
    args=(perf all_reduce --topology "$tmp/no-such-file.json")
    expect=("$tmp/no-such-file.json") ;;
  segment_without_segment_model)
    # --segment sets the segment model's granularity; the flow model has none.
    args=(perf all_reduce --topology "$topology" --segment 1KiB)
    expect=("--segment" "--network segment") ;;
  segment_too_fine)
    args=(perf all_reduce --topology "$topology" --network segment --segment 100)
    expect=("--segment" "100 bytes" "at least 256") ;;
  segment_not_a_size)
    args=(perf all_reduce --topology "$topology" --network segment --segment fast)
    expect=("--segment" "fast" "valid size") ;;
  control_good_input)
    # The harness itself: a valid run exits 0 and prints nothing on stderr.
    args=(perf all_reduce --topology "$topology" -b 8K -e 8K --format csv)
    expect_rc=0 ;;
  good_flag_before_op)
    # Valid too: a flag (an option without a value) may come before <op>.
    args=(perf --no-check all_reduce --topology "$topology" -b 8K -e 8K --format csv)
    expect_rc=0 ;;
  *)
    echo "unknown case '$name'; known: ${CASES[*]}" >&2
    exit 2 ;;
esac

run_case
echo "--- stderr of: hcclsim ${args[*]}"
cat "$tmp/err.txt"
if [ $fail -ne 0 ]; then exit 1; fi
echo "ok: $name (exit code $rc)"
