# Golden perf runs: the case names and the hcclsim arguments of each.
# Sourced by check.sh and update.sh; the reference output of case NAME is
# NAME.csv next to this file.

GOLDEN_SWEEP=(--format csv -b 8K -e 64M -f 4)
GOLDEN_CASES=(all_reduce all_gather reduce_scatter alltoall broadcast reduce all_reduce_ring)

# golden_args NAME: prints nothing and fails for an unknown case; otherwise
# sets GOLDEN_ARGS to the full hcclsim argument list (default topology, the
# 8-NPU A2 server).
golden_args() {
  case "$1" in
    all_reduce | all_gather | reduce_scatter | alltoall | broadcast | reduce)
      GOLDEN_ARGS=(perf "$1" "${GOLDEN_SWEEP[@]}") ;;
    all_reduce_ring)
      GOLDEN_ARGS=(perf all_reduce --algo level0:ring "${GOLDEN_SWEEP[@]}") ;;
    *)
      return 1 ;;
  esac
}
