# Golden perf runs: the case names and the hcclsim arguments of each.
# Sourced by check.sh and update.sh; the reference output of case NAME is
# NAME.csv next to this file.

# The references were made with the segment network model, and those cases
# stay pinned to it; each also has a NAME_flow case under the flow model
# (the default), so a change of either model shows.
GOLDEN_SWEEP=(--format csv -b 8K -e 64M -f 4)
GOLDEN_BASE_CASES=(all_reduce all_gather reduce_scatter alltoall broadcast reduce all_reduce_ring
                   a2_cluster_all_reduce a3_3level_all_reduce)
GOLDEN_CASES=("${GOLDEN_BASE_CASES[@]}")
for golden_base in "${GOLDEN_BASE_CASES[@]}"; do GOLDEN_CASES+=("${golden_base}_flow"); done
unset golden_base
# Clusters: the sweep in steps of 8 (five rows, 8K to 32M).
GOLDEN_CLUSTER_SWEEP=(--format csv -b 8K -e 64M -f 8)
# The closed-form estimate (--model estimate, no network model: the cases
# take no _flow twin), one case per form whose first point is its own
# code path: DirectFullmesh per rank (16 dies) and per slot (768 dies), the
# pairwise AlltoAll with drawn steps and the level-1 AllReduce on 1024 A2
# NPUs. Estimates are the same bit for bit on any host and thread count.
GOLDEN_ESTIMATE_CASES=(estimate_alltoall_a3_server estimate_alltoall_cloudmatrix384 estimate_alltoall_a2_1024
                       estimate_all_reduce_a2_1024)
GOLDEN_CASES+=("${GOLDEN_ESTIMATE_CASES[@]}")

# golden_args NAME: prints nothing and fails for an unknown case; otherwise
# sets GOLDEN_ARGS to the full hcclsim argument list (default topology, the
# 8-NPU A2 server; the cluster cases name their files under $src, which
# check.sh and update.sh set before sourcing this file), ending with
# --network segment, or --network flow for NAME_flow.
golden_args() {
  local network=segment name=$1
  case "$name" in
    estimate_*) golden_base_args "$name"; return ;;
    *_flow) network=flow; name=${name%_flow} ;;
  esac
  golden_base_args "$name" || return 1
  GOLDEN_ARGS+=(--network "$network")
}

golden_base_args() {
  case "$1" in
    all_reduce | all_gather | reduce_scatter | alltoall | broadcast | reduce)
      GOLDEN_ARGS=(perf "$1" "${GOLDEN_SWEEP[@]}") ;;
    all_reduce_ring)
      GOLDEN_ARGS=(perf all_reduce --algo level0:ring "${GOLDEN_SWEEP[@]}") ;;
    a2_cluster_all_reduce)
      # 2 A2 servers: level-0 mesh and a level-1 ring over RoCE.
      GOLDEN_ARGS=(perf all_reduce --topology "$src/configs/topologies/a2-cluster.json" --servers 2
                   "${GOLDEN_CLUSTER_SWEEP[@]}") ;;
    a3_3level_all_reduce)
      # 2 A3 supernodes x 2 servers x 16 dies: level 0, level 1 over UB, level 2 over RoCE.
      GOLDEN_ARGS=(perf all_reduce --rank-table "$src/configs/ranktables/a3_2superpods_4servers_64dies.json"
                   --profile "$src/configs/profiles/a3-910c.json" "${GOLDEN_CLUSTER_SWEEP[@]}") ;;
    estimate_alltoall_a3_server)
      GOLDEN_ARGS=(perf alltoall --topology "$src/configs/topologies/a3-server.json" --model estimate
                   "${GOLDEN_SWEEP[@]}") ;;
    estimate_alltoall_cloudmatrix384)
      GOLDEN_ARGS=(perf alltoall --topology "$src/configs/topologies/cloudmatrix384.json" --servers 48
                   --model estimate --format csv -b 64M -e 16G -f 4) ;;
    estimate_alltoall_a2_1024)
      GOLDEN_ARGS=(perf alltoall --topology "$src/configs/topologies/a2-cluster.json" --servers 128
                   --model estimate --format csv -b 64M -e 16G -f 4) ;;
    estimate_all_reduce_a2_1024)
      GOLDEN_ARGS=(perf all_reduce --topology "$src/configs/topologies/a2-cluster.json" --servers 128
                   --model estimate --format csv -b 1M -e 1G -f 4) ;;
    *)
      return 1 ;;
  esac
}
