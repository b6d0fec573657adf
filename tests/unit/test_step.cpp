// hcclsim step (sim/step): the schedule's closed-form boundaries. Compute
// times come from a table (--compute) so that every expected time is
// arithmetic on round numbers, never a pasted result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/json_reader.h"
#include "sim/perf/perf.h"
#include "sim/report/validate.h"
#include "sim/step/step.h"
#include "tests/unit/fixtures.h"
#include "topologies/config.h"
#include "topologies/group_view.h"

using namespace hcclsim;
using hcclsim::testing::source_file;

namespace {

StepRequest request(const std::string& model, const std::string& layout, const std::string& batch) {
  StepRequest r;
  r.model = read_model_config(source_file("configs/models/" + model));
  r.layout = parse_layout(layout);
  r.batch = parse_batch(batch);
  return r;
}

TopologySpec a2_server() { return load_topology(source_file("configs/topologies/a2-server.json")); }

const StepGroupResult* group(const StepResult& r, const std::string& name) {
  for (const StepGroupResult& g : r.groups) {
    if (g.group == name) return &g;
  }
  return nullptr;
}

// The TP AllReduce of tiny-llama at 512 tokens on 8 ranks: tokens x hidden in bf16.
PerfRequest tp_all_reduce(const TopologySpec& spec) {
  PerfRequest pr;
  pr.op = CollOp::AllReduce;
  pr.ranks = 8;
  pr.dtype = DataType::Bf16;
  pr.check = false;
  pr.buffer_bytes = spec.npu.hccl_buffer_bytes;
  pr.sizes = {512ULL * 1024 * 2};
  return pr;
}

// A small step of a grid: model config, layout, batch, phase.
struct Case {
  const char* model;
  const char* layout;
  const char* batch;
  StepPhase phase;
  bool mc2 = false;
  bool sequence_parallel = true;
  const char* recompute = "none";
  bool ddp = false;   // plain DDP, no overlap of the gradient reduction
};

// tiny-llama (4 layers): per micro-batch a forward of embedding, 4 x 10
// operators (norm, qkv, rope, attn_core, attn_out, residual, norm, mlp,
// swiglu, residual), lm_head and cross_entropy, and as many backward: 86.
constexpr int kOpsPerMicroBatch = 86;

// Every operator of tiny-llama's step at 0 us but `keep`.
void zero_all_but(StepRequest& req, const std::vector<std::string>& keep) {
  for (const char* op : {"embedding", "norm", "qkv", "rope", "attn_core", "attn_out", "residual", "mlp", "swiglu", "lm_head",
                         "cross_entropy", "optimizer", "router", "permute", "experts", "shared_experts", "unpermute"}) {
    if (std::find(keep.begin(), keep.end(), op) == keep.end()) req.compute.add(op, "*", 0.0);
  }
}

// One AIC's time for `waves` waves of full 128 x 256 output blocks over a
// reduction of k, at the profile's GEMM rate and block cost.
double block_waves_s(double waves, double k, std::uint64_t rate, Time fixed) {
  return waves * (static_cast<double>(fixed.ps) * 1e-12 + 2.0 * 128 * 256 * k / static_cast<double>(rate));
}

}  // namespace

TEST_CASE("step: pure compute equals the sum of the operator times", "[step]") {
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=3,micro=1,seq=512");
  req.compute.add("*", "*", 10.0);
  req.compute.add("optimizer", "*", 7.0);
  const auto plan = plan_step(spec, req);
  const StepResult r = run_step_estimate(*plan);
  CHECK(r.groups.empty());
  CHECK(r.micro_batches == 3);
  CHECK(r.compute_us == Approx(3 * kOpsPerMicroBatch * 10.0 + 7.0).epsilon(1e-12));
  CHECK(r.step_time_us == Approx(r.compute_us).epsilon(1e-12));
  CHECK(r.bubble_us == Approx(0).margin(1e-9));
}

TEST_CASE("step: a GEMM is its 128 x 256 output blocks in waves over the AIC", "[step]") {
  // qkv of tiny-llama at 512 tokens: x (512 x 1024) times W (1024 x 2048,
  // 16 + 2 x 8 heads of 64). Forward 4 x 8 = 32 blocks over 24 AIC: 2
  // waves of K = 1024. Backward dX = dY W^T (512 x 1024 over K = 2048): 16
  // blocks, 1 wave; dW = x^T dY (1024 x 2048 over K = 512): 64 blocks, 3
  // waves. Each block costs npu.cores.aic_gemm_block_fixed on top of its K
  // loop; bytes / 1.6 TB/s stay below. Every other operator 0, 4 layers.
  const TopologySpec spec = a2_server();
  const CoreParams& c = spec.npu.cores;
  REQUIRE(c.aic == 24);
  REQUIRE(c.aic_gemm_block_fixed.ps > 0);
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  zero_all_but(req, {"qkv"});
  const double fwd = block_waves_s(2, 1024, c.aic_flops_per_s, c.aic_gemm_block_fixed);
  const double bwd = block_waves_s(1, 2048, c.aic_flops_per_s, c.aic_gemm_block_fixed) +
                     block_waves_s(3, 512, c.aic_flops_per_s, c.aic_gemm_block_fixed);
  const double bytes = 1024.0 * 2048 * 2 + 2.0 * 512 * 1024 * 2;
  REQUIRE(fwd > bytes / 1.6e12);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  CHECK(r.compute_us == Approx(4 * (fwd + bwd) * 1e6).epsilon(1e-6));
}

TEST_CASE("step: a GEMM shorter than a block is cut to the 16 x 16 fractal", "[step]") {
  // qkv in a prefill of 16 tokens: 16 x 1024 by 1024 x 2048 is 8 blocks of
  // 16 x 256, one wave, each its block cost and a K loop of 1024 over 16 x
  // 256 (the 4 MB of weights at 1.6 TB/s take less). At 128 tokens the
  // blocks are full: the K loop grows 8x, the block cost does not.
  const TopologySpec spec = a2_server();
  const CoreParams& c = spec.npu.cores;
  const double hbm = static_cast<double>(spec.npu.memory.hbm_bandwidth.bytes_per_s);
  for (const int tokens : {16, 128}) {
    StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=" + std::to_string(tokens));
    req.phase = StepPhase::Prefill;
    zero_all_but(req, {"qkv"});
    const double block = static_cast<double>(c.aic_gemm_block_fixed.ps) * 1e-12 +
                         2.0 * tokens * 256 * 1024 / static_cast<double>(c.aic_flops_per_s);
    REQUIRE(block > (1024.0 * 2048 * 2 + 2.0 * tokens * 1024 * 2) / hbm);
    const StepResult r = run_step_estimate(*plan_step(spec, req));
    CHECK(r.compute_us == Approx(4 * block * 1e6).epsilon(1e-6));
  }
}

TEST_CASE("step: the cross entropy is Megatron's vector passes over the fp32 logits", "[step]") {
  // 512 tokens x 32,000 logits: 38 bytes an element forward (made fp32, max,
  // minus max, exp, sum, divide) and 14 backward, at HBM's rate (the vector
  // units' 48 x 460 GB/s are faster).
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  zero_all_but(req, {"cross_entropy"});
  const double hbm = static_cast<double>(spec.npu.memory.hbm_bandwidth.bytes_per_s);
  REQUIRE(hbm < 48.0 * static_cast<double>(spec.npu.cores.aiv_bandwidth.bytes_per_s));
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  CHECK(r.compute_us == Approx((38.0 + 14.0) * 512 * 32000 / hbm * 1e6).epsilon(1e-6));
  // Inference computes no loss.
  req.phase = StepPhase::Prefill;
  CHECK(run_step_estimate(*plan_step(spec, req)).compute_us == Approx(0).margin(1e-9));
}

TEST_CASE("step: a layer's elementwise passes are their bytes at HBM's rate", "[step]") {
  // Per layer at 512 tokens: rope reads and writes Q and K (16 + 8 heads of
  // 64), backward the same; two residual adds of three hidden vectors, backward
  // the same; SwiGLU reads gate and up and writes their product (3 x 2816),
  // backward 5 / 3 of it. bf16.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  zero_all_but(req, {"rope", "residual", "swiglu"});
  const double hbm = static_cast<double>(spec.npu.memory.hbm_bandwidth.bytes_per_s);
  const double rope = 2.0 * 512 * 24 * 64 * 2, residual = 3.0 * 512 * 1024 * 2, swiglu = 3.0 * 512 * 2816 * 2;
  const double per_layer = 2 * rope + 2 * (2 * residual) + swiglu * (1 + 5.0 / 3.0);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  CHECK(r.compute_us == Approx(4 * per_layer / hbm * 1e6).epsilon(1e-6));
}

TEST_CASE("step: the MoE token permutation is its copies' bytes at HBM's rate", "[step]") {
  // tiny-moe on one rank (ep = 1, the alltoall dispatcher): each of its 3 MoE
  // layers sorts 512 tokens' top-4 copies by expert before the experts and
  // puts them back after: each reads the tokens and writes the copies (or
  // back), (1 + 4) x 512 x 1024 bf16 elements, backward the same.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-moe.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  zero_all_but(req, {"permute", "unpermute"});
  const double hbm = static_cast<double>(spec.npu.memory.hbm_bandwidth.bytes_per_s);
  const double copies = (1.0 + 4) * 512 * 1024 * 2;
  CHECK(run_step_estimate(*plan_step(spec, req)).compute_us == Approx(3 * 2 * 2 * copies / hbm * 1e6).epsilon(1e-6));
}

TEST_CASE("step: flash attention is its score blocks, each a softmax and two matmuls", "[step]") {
  // attn_core of tiny-llama at 512 tokens (causal): 512 queries x 512 keys
  // in 128 x 256 blocks; the causal mask leaves query block i the key blocks
  // up to its last row: 1 + 1 + 2 + 2 = 6 a head, for 16 heads 96 blocks
  // over 24 AIC in 4 waves (a plain half of the 8 would be 64, 3 waves). A block costs
  // npu.cores.aic_attention_block_fixed (its online softmax) and Q K^T and P V
  // (64 + 64 deep) at the attention rate; backward twice the forward;
  // bytes / 1.6 TB/s stay below. Every other operator 0, 4 layers.
  const TopologySpec spec = a2_server();
  const CoreParams& c = spec.npu.cores;
  REQUIRE(c.aic_attention_block_fixed.ps > 0);
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  zero_all_but(req, {"attn_core"});
  const double fwd = block_waves_s(4, 64 + 64, c.aic_attention_flops_per_s, c.aic_attention_block_fixed);
  const double bytes = 512.0 * 16 * (64 + 64) * 2 + 512.0 * 2 * 8 * 64 * 2;
  REQUIRE(fwd > bytes / 1.6e12);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  CHECK(r.compute_us == Approx(4 * 3 * fwd * 1e6).epsilon(1e-6));
}

TEST_CASE("step: attention's matmuls run at the GEMM rate unless the profile gives aic_attention_rate", "[step]") {
  nlohmann::json doc = load_json_file(source_file("configs/profiles/a2-910b.json"));
  doc.erase("calibration");
  const HardwareProfile plain = read_profile(doc, "a2.json");
  CHECK(plain.npu.cores.aic_attention_flops_per_s == plain.npu.cores.aic_flops_per_s);
  doc["npu"]["cores"]["aic_attention_rate"] = {{"value", "5TFLOPS"}, {"source", "assumed: a test"}};
  const HardwareProfile own = read_profile(doc, "a2-with-attention-rate.json");
  CHECK(own.npu.cores.aic_attention_flops_per_s == 5'000'000'000'000ULL);
  // Without the block costs a GEMM is its K loops alone.
  doc["npu"]["cores"].erase("aic_gemm_block_fixed");
  doc["npu"]["cores"].erase("aic_attention_block_fixed");
  const HardwareProfile bare = read_profile(doc, "a2-without-block-costs.json");
  CHECK(bare.npu.cores.aic_gemm_block_fixed.ps == 0);
  CHECK(bare.npu.cores.aic_attention_block_fixed.ps == 0);
}

TEST_CASE("step: a Mixtral config is MoE in every layer with experts of intermediate_size", "[step]") {
  const ModelConfig m = read_model_config(source_file("configs/models/mixtral-8x7b.json"));
  CHECK(m.experts == 8);
  CHECK(m.topk == 2);
  CHECK(m.moe_ffn == 14336);
  CHECK(m.shared_experts == 0);
  for (std::int64_t layer = 0; layer < m.layers; ++layer) CHECK(m.is_moe_layer(layer));
}

TEST_CASE("step: a 1F1B pipeline of equal stages idles (pp-1) micro-batch slots", "[step]") {
  // pp = 2 over 4 micro-batches, every operator 10 ms but the loss (0): both
  // stages take f = b = 210 ms a micro-batch (two layers of 10 operators, and
  // the embedding or the head). The PP sends are microseconds: bubble +
  // exposed PP is (pp-1)(f+b) within them.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=2,dp=1", "global=4,micro=1,seq=512");
  req.compute.add("*", "*", 10000.0);
  req.compute.add("cross_entropy", "*", 0.0);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  const double slot = 420000.0;  // f + b, us
  const StepGroupResult* pp = group(r, "pp");
  REQUIRE(pp != nullptr);
  REQUIRE(pp->time_us < 0.01 * slot);
  CHECK(r.compute_us == Approx(4 * slot + 10000.0).epsilon(1e-12));
  CHECK(r.bubble_us + pp->exposed_us == Approx(1 * slot).margin(4 * pp->time_us));
  CHECK(r.bubble_us + pp->exposed_us >= slot);
  CHECK(r.step_time_us == Approx((4 + 2 - 1) * slot + 10000.0).margin(4 * pp->time_us));
  // The step is its parts on the critical rank: compute, bubble, exposed communication.
  CHECK(r.step_time_us == Approx(r.compute_us + r.bubble_us + pp->exposed_us).epsilon(1e-9));
}

TEST_CASE("step: the interleaved schedule shrinks the bubble by vpp", "[step]") {
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=2,dp=1,vpp=2", "global=4,micro=1,seq=512");
  req.compute.add("*", "*", 1000.0);
  req.compute.add("embedding", "*", 0.0);
  req.compute.add("lm_head", "*", 0.0);
  req.compute.add("cross_entropy", "*", 0.0);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  const StepGroupResult* pp = group(r, "pp");
  REQUIRE(pp != nullptr);
  // A chunk is one layer: 10 ms forward and 10 ms backward; (pp-1)/vpp of the
  // non-interleaved bubble of 2 chunks' (f+b) = 40 ms is 20 ms.
  CHECK(r.bubble_us + pp->exposed_us == Approx(20000.0).margin(16 * pp->time_us));
}

TEST_CASE("step: a TP-only step is its AllReduces as perf times them", "[step]") {
  // tp = 8 without sequence parallelism and no compute: two AllReduces a
  // layer forward and two backward, one after another on the TP domain.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=8,pp=1,dp=1", "global=1,micro=1,seq=512");
  req.sequence_parallel = false;
  req.compute.add("*", "*", 0.0);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  const PerfRequest pr = tp_all_reduce(spec);
  const double ar_us = static_cast<double>(estimate_perf(spec, pr).front().time.ps) / 1e6;
  const StepGroupResult* tp = group(r, "tp");
  REQUIRE(tp != nullptr);
  CHECK(tp->executor == estimate_perf(spec, pr).front().executor);
  CHECK(r.step_time_us == Approx(16 * ar_us).epsilon(1e-9));
  CHECK(tp->time_us == Approx(16 * ar_us).epsilon(1e-9));
  CHECK(tp->exposed_us == Approx(16 * ar_us).epsilon(1e-9));
}

TEST_CASE("step: MC2 runs the TP transfers under their matmuls but the first and last piece", "[step]") {
  // tp = 8 with sequence parallelism, the three TP matmuls 10 ms each (their
  // backward 20 ms), every other operator 0. With --mc2 each AllGather and
  // ReduceScatter next to a matmul goes in 8 pieces, each piece of the matmul
  // after its gathered piece and each scattered piece after its matmul piece:
  // a site exposes only its first gathered and last scattered piece. Forward
  // a layer has 2 gathering and 2 scattering sites; backward 2 gathering ones
  // (the row-parallel layers), while a column-parallel layer's whole
  // ReduceScatter runs under its weight gradient, as MindSpeed's MC2 does.
  // Pieces are 512 x 1024 / 8 / 8 elements; the head's whole AllGather too.
  // A fused kernel is launched once: its first piece pays op_launch, the
  // later ones (the exposed last scattered piece among them) do not.
  const TopologySpec spec = a2_server();
  TopologySpec in_kernel = spec;
  in_kernel.npu.stream.op_launch = in_kernel.npu.stream.task_dispatch;
  StepRequest req = request("tiny-llama.json", "tp=8,pp=1,dp=1", "global=1,micro=1,seq=512");
  req.compute.add("*", "*", 0.0);
  for (const char* op : {"qkv", "attn_out", "mlp"}) req.compute.add(op, "*", 10000.0);
  auto collective_us = [&](CollOp op, std::uint64_t count, const TopologySpec& on) {
    PerfRequest pr = tp_all_reduce(on);
    pr.op = op;
    pr.sizes = {data_size_of(op, 8, DataType::Bf16, count)};
    return static_cast<double>(estimate_perf(on, pr).front().time.ps) / 1e6;
  };
  const std::uint64_t block = 512 * 1024 / 8;
  const double compute = 4 * 3 * (10000.0 + 20000.0);
  const double gathered = collective_us(CollOp::AllGather, block / 8, spec);
  const double scattered = collective_us(CollOp::ReduceScatter, block / 8, in_kernel);
  REQUIRE(scattered < collective_us(CollOp::ReduceScatter, block / 8, spec));
  const double head = collective_us(CollOp::AllGather, block, spec);
  req.mc2 = true;
  const StepResult fused = run_step_estimate(*plan_step(spec, req));
  const StepGroupResult* tp = group(fused, "tp");
  REQUIRE(tp != nullptr);
  CHECK(fused.compute_us == Approx(compute).epsilon(1e-12));
  const double exposed = 4 * (4 * gathered + 2 * scattered) + head;
  CHECK(tp->exposed_us == Approx(exposed).epsilon(1e-9));
  CHECK(fused.step_time_us == Approx(compute + exposed).epsilon(1e-9));
  // Without MC2 the forward's collectives are exposed; backward only the
  // row-parallel layers' AllGathers: a column-parallel layer's input is
  // gathered again under its input gradient and that gradient
  // reduce-scattered under its weight gradient (Megatron's sequence-parallel
  // backward), both far shorter than the 10 ms halves.
  req.mc2 = false;
  const StepResult serial = run_step_estimate(*plan_step(spec, req));
  const double gather = collective_us(CollOp::AllGather, block, spec), scatter = collective_us(CollOp::ReduceScatter, block, spec);
  CHECK(serial.step_time_us == Approx(compute + 4 * (2 * gather + 2 * scatter + 2 * gather) + head).epsilon(1e-9));
  // All of them under way: per layer forward 2 + 2, backward 4 AllGathers (two of
  // them the inputs again) and 2 ReduceScatters.
  const StepGroupResult* tp_serial = group(serial, "tp");
  REQUIRE(tp_serial != nullptr);
  CHECK(tp_serial->time_us == Approx(4 * (6 * gather + 4 * scatter) + head).epsilon(1e-9));
}

TEST_CASE("step: a detailed step of compute alone takes the sum of its operators and no launch", "[step]") {
  // The stream engines charge no op launch of their own in a step (its
  // collectives launch themselves): compute on one rank starts at 0 and runs
  // back to back, each task (the first too) after the stream's dispatch gap.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=3,micro=1,seq=512");
  req.compute.add("*", "*", 10.0);
  req.compute.add("optimizer", "*", 7.0);
  const auto plan = plan_step(spec, req);
  Platform platform(spec);
  const StepResult r = run_step_detailed(platform, *plan);
  const int tasks = 3 * kOpsPerMicroBatch + 1;
  const double gap_us = static_cast<double>(spec.npu.stream.task_dispatch.ps) / 1e6;
  CHECK(r.step_time_us == Approx(3 * kOpsPerMicroBatch * 10.0 + 7.0 + tasks * gap_us).epsilon(1e-12));
}

TEST_CASE("step: the detailed TP-only step is its AllReduces as perf runs them", "[step]") {
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=8,pp=1,dp=1", "global=1,micro=1,seq=512");
  req.sequence_parallel = false;
  req.compute.add("*", "*", 0.0);
  const auto plan = plan_step(spec, req);
  Platform platform(spec);
  const PerfRequest pr = tp_all_reduce(spec);
  const double ar_us = static_cast<double>(run_perf(platform, pr).front().time.ps) / 1e6;
  const StepResult r = run_step_detailed(platform, *plan);
  // Within the zero-length compute tasks' dispatch gaps between AllReduces.
  CHECK(r.step_time_us == Approx(16 * ar_us).epsilon(0.05));
  CHECK(r.step_time_us >= 16 * ar_us * 0.95);
  const StepGroupResult* tp = group(r, "tp");
  REQUIRE(tp != nullptr);
  CHECK(tp->exposed_us == Approx(tp->time_us).epsilon(1e-9));
}

TEST_CASE("step: a TP collective is on the critical path of every layer", "[step]") {
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=4,pp=1,dp=2", "global=2,micro=1,seq=512");
  req.compute.add("*", "*", 5.0);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  // Sequence parallelism: per layer forward two AllGathers and two
  // ReduceScatters; backward also the column-parallel layers' inputs gathered
  // again. With 5 us operators the TP stream is the critical path throughout.
  for (int layer = 0; layer < 4; ++layer) {
    for (const char* dir : {"F", "B"}) {
      int found = 0;
      for (const StepPathEntry& e : r.critical_path) {
        if (e.group == "tp" && e.op.find(std::string(dir) + " mb0 L" + std::to_string(layer)) != std::string::npos) ++found;
      }
      INFO(dir << " layer " << layer);
      CHECK(found == (std::string(dir) == "F" ? 4 : 6));
    }
  }
}

TEST_CASE("step: PP sends sharing a spine link slow each other by the flow model's share", "[step]") {
  // 16 A2 servers on two leaves of a 2:1 oversubscribed fabric (64 NICs a
  // leaf, 8 spines: each leaf-spine link carries 64 / 8 / 2 = 4 NICs' rate).
  // pp = 2 puts stage 0 on one leaf and stage 1 on the other; in a prefill
  // with no compute all 64 pairs send their 16 MiB at once. Alone (the
  // estimate) a send takes fixed costs + S / NIC; together the k sends
  // that ECMP puts on the busiest spine link share it, each 4 / k of a NIC.
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-cluster-oversubscribed.json"), {}, 16);
  StepRequest req = request("tiny-llama.json", "tp=1,pp=2,dp=64", "global=64,micro=1,seq=8192");
  req.phase = StepPhase::Prefill;
  req.compute.add("*", "*", 0.0);
  const auto plan = plan_step(spec, req);
  const StepResult alone = run_step_estimate(*plan);
  Platform platform(spec);
  const StepResult together = run_step_detailed(platform, *plan);
  const double bytes = 8192.0 * 1024 * 2;
  double nic = 0;
  for (const LinkSpec& l : spec.links) {
    if (l.kind == "roce") {
      nic = static_cast<double>(l.params.bandwidth.bytes_per_s);
      break;
    }
  }
  REQUIRE(nic > 0);
  REQUIRE_FALSE(together.busiest_links.empty());
  const double k = std::round(static_cast<double>(together.busiest_links.front().bytes) / bytes);
  REQUIRE(k > 4);  // more sends than the link has NICs' rate for
  const StepGroupResult* pp_alone = group(alone, "pp");
  const StepGroupResult* pp_together = group(together, "pp");
  REQUIRE(pp_alone != nullptr);
  REQUIRE(pp_together != nullptr);
  const double fixed_us = pp_alone->time_us - bytes / nic * 1e6;
  const double shared_us = fixed_us + k * bytes / (4 * nic) * 1e6;
  CHECK(pp_together->time_us == Approx(shared_us).epsilon(0.05));
}

TEST_CASE("step: bad layouts are refused naming the option", "[step]") {
  const TopologySpec spec = a2_server();
  auto refused = [&](const std::string& model, const std::string& layout, const std::string& batch, const std::string& text) {
    INFO(layout << " " << batch);
    StepRequest req = request(model, layout, batch);
    try {
      plan_step(spec, req);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
  };
  refused("tiny-llama.json", "tp=8,pp=2,dp=1", "global=2,micro=1,seq=512", "16 ranks");
  refused("tiny-llama.json", "tp=1,pp=1,dp=2,ep=2", "global=2,micro=1,seq=512", "dense");
  refused("tiny-llama.json", "tp=1,pp=1,dp=4", "global=6,micro=1,seq=512", "micro x dp");
  refused("tiny-llama.json", "tp=1,pp=2,dp=1,vpp=2", "global=3,micro=1,seq=512", "multiple of pp");
  refused("tiny-llama.json", "tp=1,pp=8,dp=1", "global=8,micro=1,seq=512", "layers");
  refused("tiny-moe.json", "tp=1,pp=1,dp=6,ep=4", "global=6,micro=1,seq=512", "ep must divide dp");
  refused("tiny-llama.json", "tp=1,pp=1,dp=2,vpp=2", "global=2,micro=1,seq=512", "needs pp > 1");
  refused("tiny-moe.json", "tp=4,pp=1,dp=2,ep=2,etp=2", "global=2,micro=1,seq=512", "etp must be 1 or tp");
  refused("tiny-llama.json", "tp=2,pp=1,dp=4,etp=2", "global=4,micro=1,seq=512", "dense");
  CHECK_THROWS_AS(parse_layout("tp=8,pp=0"), InputError);
  CHECK_THROWS_AS(parse_layout("tp=8,tp=2"), InputError);
  CHECK_THROWS_AS(parse_layout("tq=8"), InputError);
  CHECK_THROWS_AS(parse_batch("global=8,micro=1"), InputError);
}

TEST_CASE("step: with etp = tp the TP group gathers the routed copies and splits each expert", "[step]") {
  // tiny-moe (3 MoE layers of 16 experts, top 4, FFN 256) on tp = 2, ep = 2,
  // dp = 4, 512 tokens: a rank dispatches 256 tokens (its sequence share), 1024
  // copies. With etp = 2 each MoE layer adds a TP AllGather of those 1024 x
  // 1024 elements before the experts and a ReduceScatter after (backward the
  // other way round); the experts run twice the copies through half of each
  // FFN: the same flops. With compute at 0 the added time is those
  // collectives, 3 layers x 2 directions x (AllGather + ReduceScatter).
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-moe.json", "tp=2,pp=1,dp=4,ep=2", "global=4,micro=1,seq=512");
  req.compute.add("*", "*", 0.0);
  const StepResult whole = run_step_estimate(*plan_step(spec, req));
  req.layout = parse_layout("tp=2,pp=1,dp=4,ep=2,etp=2");
  CHECK(req.layout.describe() == "tp=2,cp=1,ep=2,dp=4,pp=1,vpp=1,etp=2");
  const StepResult split = run_step_estimate(*plan_step(spec, req));
  auto collective_us = [&](CollOp op) {
    PerfRequest pr = tp_all_reduce(spec);
    pr.op = op;
    pr.ranks = 2;
    pr.sizes = {data_size_of(op, 2, DataType::Bf16, 1024ULL * 1024)};
    const TopologySpec pair = group_view(spec, {0, 1}, "a TP pair");
    return static_cast<double>(estimate_perf(pair, pr).front().time.ps) / 1e6;
  };
  const StepGroupResult* tp_whole = group(whole, "tp");
  const StepGroupResult* tp_split = group(split, "tp");
  REQUIRE(tp_whole != nullptr);
  REQUIRE(tp_split != nullptr);
  CHECK(tp_split->time_us - tp_whole->time_us ==
        Approx(3 * 2 * (collective_us(CollOp::AllGather) + collective_us(CollOp::ReduceScatter))).epsilon(1e-6));
}

TEST_CASE("step: with etp = tp a rank holds 1/tp of its experts' parameters, gradients and optimizer state", "[step]") {
  // tiny-moe, ep = 2: 3 MoE layers of 16 experts, 8 on a rank, each 3 x 1024
  // x 256 weights. etp = 2 halves them on the rank: bf16 parameters, fp32
  // gradients, 12 bytes of optimizer state over the expert-DP group (dp /
  // ep = 2); everything else stays.
  const MemoryUse whole = step_memory(request("tiny-moe.json", "tp=2,pp=1,dp=4,ep=2", "global=4,micro=1,seq=512"));
  const MemoryUse split = step_memory(request("tiny-moe.json", "tp=2,pp=1,dp=4,ep=2,etp=2", "global=4,micro=1,seq=512"));
  const std::uint64_t halved = 3ULL * 8 * (3 * 1024 * 256) / 2;
  CHECK(whole.parameters - split.parameters == 2 * halved);
  CHECK(whole.gradients - split.gradients == 4 * halved);
  CHECK(whole.optimizer - split.optimizer == 12 * halved / 2);
  CHECK(whole.activations == split.activations);
}

TEST_CASE("step: a search over etp times each valid expert split as its own layout and refuses etp not 1 or tp", "[step]") {
  const TopologySpec spec = a2_server();
  StepRequest base = request("tiny-moe.json", "tp=1,pp=1,dp=1", "global=8,micro=1,seq=256");
  const std::vector<SearchRow> rows = search_layouts(spec, base, "tp=1,2;ep=2;etp=1,2");
  REQUIRE(rows.size() == 4);
  int valid = 0;
  for (const SearchRow& row : rows) {
    INFO(row.layout.describe());
    if (row.layout.etp != 1 && row.layout.etp != row.layout.tp) {
      CHECK(!row.valid);
      CHECK(row.why.find("etp must be 1 or tp") != std::string::npos);
      continue;
    }
    REQUIRE(row.valid);
    ++valid;
    // The same layout run alone gives the same step.
    StepRequest one = base;
    one.layout = row.layout;
    CHECK(row.step_time_us == run_step_estimate(*plan_step(spec, one, StepPlanScope::Symmetric)).step_time_us);
  }
  CHECK(valid == 3);
}

TEST_CASE("step: a step beyond 2^62 ps is refused, not wrapped around 64 bits of picoseconds", "[step]") {
  // 1000 micro-batches of 86 operators at the table's largest time (1e9 us)
  // is 8.6 x 10^7 s of compute on one rank.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1000,micro=1,seq=512");
  req.compute.add("*", "*", 1e9);
  try {
    plan_step(spec, req);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("option --batch") != std::string::npos);
    CHECK(std::string(e.what()).find("2^62 ps") != std::string::npos);
  }
  // A profile whose block cost makes one operator longer than the bound.
  nlohmann::json doc = load_json_file(source_file("configs/profiles/a2-910b.json"));
  doc.erase("calibration");
  doc["npu"]["cores"]["aic_gemm_block_fixed"] = {{"value", "999999s"}, {"source", "assumed: a test"}};
  TopologySpec slow = spec;
  slow.npu = read_profile(doc, "slow.json").npu;
  slow.profile_file = "slow.json";
  StepRequest roof = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=8192");
  try {
    plan_step(slow, roof);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("slow.json at $.npu") != std::string::npos);
  }
}

TEST_CASE("step: both back ends refuse the same step at hcclsim's time limit", "[step]") {
  // Two pipeline stages at 10^9 us an operator: the step's path chains both
  // stages' compute. 100 micro-batches end near 4.44 x 10^18 ps, below 2^62
  // (4.61 x 10^18): both back ends run it, the same; 110 end near 4.88 x
  // 10^18 (each rank's compute alone, 4.62 x 10^18 for the first stage, is
  // above too): both refuse it.
  const TopologySpec spec = a2_server();
  auto plan_of = [&](int global) {
    StepRequest req = request("tiny-llama.json", "tp=1,pp=2,dp=1", "global=" + std::to_string(global) + ",micro=1,seq=512");
    req.compute.add("*", "*", 1e9);
    return req;
  };
  const auto plan = plan_step(spec, plan_of(100));
  const StepResult estimate = run_step_estimate(*plan);
  CHECK(estimate.step_time_us > 4.4e12);
  CHECK(estimate.step_time_us < static_cast<double>(kTimeLimit.ps) / 1e6);
  Platform platform(spec);
  CHECK(run_step_detailed(platform, *plan).step_time_us == Approx(estimate.step_time_us).epsilon(1e-6));
  try {
    (void)run_step_estimate(*plan_step(spec, plan_of(110)));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("2^62 ps") != std::string::npos);
  }
}

TEST_CASE("step: the estimate names the groups that share links while both are under way", "[step]") {
  // tp 8 fills a server; pp 2 and dp 2 each pair ranks of different
  // servers, so both cross RoCE NICs and the leaf/spine fabric, and the
  // PP sends and DP collectives of the last micro-batches overlap.
  const TopologySpec cluster = load_topology(source_file("configs/topologies/a2-cluster.json"), {}, 4);
  const StepRequest req = request("tiny-llama.json", "tp=8,pp=2,dp=2", "global=8,micro=1,seq=512");
  const StepResult r = run_step_estimate(*plan_step(cluster, req, StepPlanScope::Symmetric));
  REQUIRE(r.shared_links.size() == 1);
  const StepSharedLinks& s = r.shared_links.front();
  CHECK(s.first == "dp");
  CHECK(s.second == "pp");
  CHECK(s.link_kinds == std::vector<std::string>{"roce"});
  CHECK(s.link_directions > 0);
  CHECK(s.together_us > 0);
  for (const StepGroupResult& g : r.groups) {
    if (g.group == "dp" || g.group == "pp") CHECK(s.together_us <= g.time_us);
  }
  // The every-rank plan finds the same.
  const StepResult every = run_step_estimate(*plan_step(cluster, req));
  REQUIRE(every.shared_links.size() == 1);
  CHECK(every.shared_links.front().together_us == Approx(s.together_us));
  // One group alone shares nothing.
  CHECK(run_step_estimate(*plan_step(a2_server(), request("tiny-llama.json", "tp=8", "global=1,micro=1,seq=512")))
            .shared_links.empty());
}

TEST_CASE("step: a recomputed layer runs its forward again before its backward and keeps only its input", "[step]") {
  // tiny-llama, 4 layers of 10 forward operators, every operator 10 us, one
  // rank, 3 micro-batches: full recomputation adds 3 x 4 x 10 operators,
  // block:1 the first layer's 3 x 10; the step is its compute.
  const TopologySpec spec = a2_server();
  auto run = [&](const char* mode) {
    StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=3,micro=1,seq=512");
    req.compute.add("*", "*", 10.0);
    req.recompute = parse_recompute(mode);
    return run_step_estimate(*plan_step(spec, req));
  };
  const double none = run("none").compute_us;
  CHECK(none == Approx(3 * kOpsPerMicroBatch * 10.0 + 10.0).epsilon(1e-12));   // (and the optimizer)
  CHECK(run("full").compute_us == Approx(none + 3 * 4 * 10 * 10.0).epsilon(1e-12));
  CHECK(run("block:1").compute_us == Approx(none + 3 * 1 * 10 * 10.0).epsilon(1e-12));
  CHECK(run("block:9").compute_us == Approx(run("full").compute_us).epsilon(1e-12));   // more than the chunk's 4: all
  // With tp 2 and sequence parallelism the recomputed forward gathers and
  // scatters again: one AllGather and one ReduceScatter more per site.
  auto tp_time = [&](const char* mode) {
    StepRequest req = request("tiny-llama.json", "tp=2,pp=1,dp=1", "global=1,micro=1,seq=512");
    req.compute.add("*", "*", 0.0);
    req.recompute = parse_recompute(mode);
    return group(run_step_estimate(*plan_step(spec, req)), "tp")->time_us;
  };
  CHECK(tp_time("full") > tp_time("none"));
  // Memory: a recomputed layer keeps 2 x s x b x h bytes, the layer being
  // recomputed its 34 x s x b x h once (h 1024, s 512, 4 layers, one micro-batch).
  StepRequest mem = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  const double per_layer = 512.0 * 1024.0;
  CHECK(step_memory(mem).activations == static_cast<std::uint64_t>(34 * per_layer * 4));
  mem.recompute = parse_recompute("full");
  CHECK(step_memory(mem).activations == static_cast<std::uint64_t>(per_layer * (2 * 4 + 34)));
  mem.recompute = parse_recompute("block:1");
  CHECK(step_memory(mem).activations == static_cast<std::uint64_t>(per_layer * (34 * 3 + 2 + 34)));
  // Bad modes name the option; inference has nothing to recompute.
  for (const char* bad : {"block:0", "block:", "half", "block:-1", "block:1234567"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_recompute(bad), Catch::Contains("expected none, full or block:N"));
  }
  StepRequest decode = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=1,micro=1,seq=512");
  decode.phase = StepPhase::Decode;
  decode.recompute = parse_recompute("full");
  CHECK_THROWS_WITH(plan_step(spec, decode), Catch::Contains("training"));
}

TEST_CASE("step: plain DDP all-reduces the gradients; without overlap they wait for the backward's end", "[step]") {
  // tiny-llama on dp 2, every operator 1 ms: its 40M-parameter buckets fill
  // during the last backward, so with --overlap-grad-reduce (the default)
  // the first ones run under the backward's remaining layers.
  const TopologySpec spec = a2_server();
  auto run = [&](bool distributed, bool overlap) {
    StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=2", "global=2,micro=1,seq=512");
    req.compute.add("*", "*", 1000.0);
    req.distributed_optimizer = distributed;
    req.overlap_grad_reduce = overlap;
    return run_step_estimate(*plan_step(spec, req));
  };
  const StepResult sharded = run(true, true);
  const StepGroupResult* dp = group(sharded, "dp");
  REQUIRE(dp != nullptr);
  CHECK(dp->executor.find("ReduceScatter") != std::string::npos);
  CHECK(dp->executor.find("AllGather") != std::string::npos);
  CHECK(dp->exposed_us < dp->time_us);   // a bucket under the backward
  const StepResult held = run(true, false);
  CHECK(group(held, "dp")->exposed_us == Approx(group(held, "dp")->time_us).epsilon(1e-12));
  CHECK(held.step_time_us > sharded.step_time_us);
  const StepResult ddp = run(false, true);
  const StepGroupResult* ar = group(ddp, "dp");
  REQUIRE(ar != nullptr);
  CHECK(ar->executor.find("AllReduce") != std::string::npos);
  CHECK(ar->executor.find("AllGather") == std::string::npos);   // no parameter gather after the step
  CHECK(ar->executor.find("ReduceScatter") == std::string::npos);
  // The optimizer's state is whole on every rank without the distributed optimizer.
  StepRequest mem = request("tiny-llama.json", "tp=1,pp=1,dp=2", "global=2,micro=1,seq=512");
  const std::uint64_t shared = step_memory(mem).optimizer;
  mem.distributed_optimizer = false;
  CHECK(step_memory(mem).optimizer == Approx(2.0 * static_cast<double>(shared)).epsilon(1e-9));
}

TEST_CASE("step: --num-layer-list sets each pipeline stage's layers", "[step]") {
  // tiny-llama's 4 layers on pp 2 as 1 + 3 instead of 2 + 2, one
  // micro-batch, every operator 10 us: the second stage has 3 x 20 layer
  // operators, the head and the loss (fwd and bwd) and the optimizer.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,pp=2,dp=1", "global=1,micro=1,seq=512");
  req.compute.add("*", "*", 10.0);
  req.layer_list = parse_layer_list("1,3");
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  // The critical rank is the first stage's (it ends the step with the
  // embedding's backward): 1 x 20 layer operators, the embedding's 2 and
  // the optimizer.
  CHECK(r.compute_us == Approx((1 * 20 + 2 + 1) * 10.0).epsilon(1e-12));
  req.layer_list.clear();
  CHECK(run_step_estimate(*plan_step(spec, req)).compute_us == Approx((2 * 20 + 2 + 1) * 10.0).epsilon(1e-12));
  // Memory, on the stage that needs the most: evenly the first stage holds
  // 2 layers x 2 micro-batches in flight; as 1 + 3 the second stage, 3 x 1
  // (34 x 512 x 1024 bytes a layer): why the first stage gets fewer layers.
  StepRequest mem = request("tiny-llama.json", "tp=1,pp=2,dp=1", "global=2,micro=1,seq=512");
  const std::uint64_t per_layer = 34ULL * 512 * 1024;
  CHECK(step_memory(mem).activations == 4 * per_layer);
  mem.layer_list = parse_layer_list("1,3");
  CHECK(step_memory(mem).activations == 3 * per_layer);
  // A list that does not fit the layout or the model, or is not a list.
  for (const char* bad : {"1,2", "2,2,0", "4", "1,x", "", ",4"}) {
    INFO(bad);
    CHECK_THROWS_WITH(
        [&] {
          StepRequest r2 = request("tiny-llama.json", "tp=1,pp=2,dp=1", "global=1,micro=1,seq=512");
          r2.layer_list = parse_layer_list(bad);
          plan_step(spec, r2);
        }(),
        Catch::Contains("--num-layer-list"));
  }
  StepRequest vpp = request("tiny-llama.json", "tp=1,pp=2,dp=1,vpp=2", "global=2,micro=1,seq=512");
  vpp.layer_list = parse_layer_list("2,2");
  CHECK_THROWS_WITH(plan_step(spec, vpp), Catch::Contains("vpp 1"));
}

TEST_CASE("step: --overlap-param-gather gathers the parameters under the first micro-batch's forward", "[step]") {
  // tiny-llama on dp 2, every operator 1 ms (its buckets as in the DDP test):
  // after the optimizer the gathers are exposed; at the step's start they
  // run under the forward, the first layer waiting for its bucket only.
  const TopologySpec spec = a2_server();
  auto req_of = [&](bool overlap) {
    StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=2", "global=4,micro=1,seq=512");
    req.compute.add("*", "*", 1000.0);
    req.overlap_param_gather = overlap;
    return req;
  };
  const StepResult after = run_step_estimate(*plan_step(spec, req_of(false)));
  const StepResult under = run_step_estimate(*plan_step(spec, req_of(true)));
  CHECK(under.compute_us == Approx(after.compute_us).epsilon(1e-12));
  CHECK(group(under, "dp")->exposed_us < group(after, "dp")->exposed_us);
  CHECK(under.step_time_us < after.step_time_us);
  // The detailed model agrees.
  Platform platform(spec);
  const auto plan = plan_step(spec, req_of(true));
  CHECK(run_step_detailed(platform, *plan).step_time_us == Approx(under.step_time_us).epsilon(0.05));
  // It is the distributed optimizer's.
  StepRequest ddp = req_of(true);
  ddp.distributed_optimizer = false;
  CHECK_THROWS_WITH(plan_step(spec, ddp), Catch::Contains("option --overlap-param-gather"));
}

TEST_CASE("step: the estimate is within 5% of the detailed step on a grid of small models", "[step]") {
  // Layouts whose groups do not share links on an A2 server's full mesh
  // (the estimate models no contention between groups; see the PP test).
  const Case cases[] = {
      {"tiny-llama.json", "tp=8", "global=1,micro=1,seq=512", StepPhase::Train},
      {"tiny-llama.json", "tp=2,pp=2,dp=2", "global=4,micro=1,seq=512", StepPhase::Train},
      {"tiny-llama.json", "pp=2,dp=4,vpp=2", "global=16,micro=1,seq=512", StepPhase::Train},
      {"tiny-llama.json", "tp=2,cp=2,dp=2", "global=4,micro=1,seq=1024", StepPhase::Train},
      {"tiny-llama.json", "tp=2,pp=2,dp=2", "global=8,micro=1,seq=512", StepPhase::Decode},
      {"tiny-moe.json", "tp=1,pp=2,dp=4,ep=4", "global=8,micro=1,seq=256", StepPhase::Train},
      {"tiny-llama.json", "tp=4,dp=2", "global=8,micro=1,seq=512", StepPhase::Train, true},
      {"tiny-moe.json", "tp=2,dp=4,ep=2,etp=2", "global=8,micro=1,seq=512", StepPhase::Train},
      {"tiny-llama.json", "tp=8", "global=8,micro=1,seq=512", StepPhase::Train, false, false},
      {"tiny-llama.json", "tp=2,pp=2,dp=2", "global=4,micro=1,seq=512", StepPhase::Train, false, true, "full"},
      {"tiny-llama.json", "tp=2,pp=2,dp=2", "global=4,micro=1,seq=512", StepPhase::Train, false, true, "none", true},
  };
  const TopologySpec spec = a2_server();
  Platform platform(spec);
  for (const Case& c : cases) {
    StepRequest req = request(c.model, c.layout, c.batch);
    req.phase = c.phase;
    req.mc2 = c.mc2;
    req.sequence_parallel = c.sequence_parallel;
    req.recompute = parse_recompute(c.recompute);
    req.distributed_optimizer = req.overlap_grad_reduce = !c.ddp;
    const auto plan = plan_step(spec, req);
    const StepResult est = run_step_estimate(*plan);
    const StepResult det = run_step_detailed(platform, *plan);
    INFO(c.model << " " << c.layout << " " << c.batch << (c.mc2 ? " --mc2" : "") << (c.sequence_parallel ? "" : " no SP")
                 << " recompute " << c.recompute << (c.ddp ? " ddp" : ""));
    CHECK(est.compute_us == Approx(det.compute_us).epsilon(1e-9));
    CHECK(est.step_time_us == Approx(det.step_time_us).epsilon(0.05));
  }
}

TEST_CASE("step: the estimate times the deepep kernels alone on their group, within 5% of the detailed step", "[step]") {
  // The MoE kernels have no closed form: the estimate runs each distinct
  // call once on its group's platform and schedules every instance at that
  // time, on the step's platform.
  const TopologySpec spec = a2_server();
  Platform platform(spec);
  std::vector<StepPlanPtr> plans;
  std::vector<StepResult> estimates;
  for (const StepPhase phase : {StepPhase::Train, StepPhase::Decode}) {
    StepRequest req = request("tiny-moe.json", "tp=1,dp=8,ep=8", "global=8,micro=1,seq=256");
    req.dispatcher = Dispatcher::DeepEp;
    req.phase = phase;
    plans.push_back(plan_step(spec, req, StepPlanScope::EveryRank));
    CHECK_THROWS_AS(run_step_estimate(*plans.back()), InputError);   // no platform: refused, as a layout search is
    estimates.push_back(run_step_estimate(*plans.back(), nullptr, &platform));
    const StepGroupResult* ep = nullptr;
    for (const StepGroupResult& g : estimates.back().groups) {
      if (g.group == "ep") ep = &g;
    }
    REQUIRE(ep != nullptr);
    CHECK(ep->executor == (phase == StepPhase::Train ? "deepep_normal" : "deepep_low_latency"));
    CHECK(ep->time_us > 0);
  }
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const StepResult det = run_step_detailed(platform, *plans[i]);
    INFO((i == 0 ? "train" : "decode"));
    CHECK(estimates[i].compute_us == Approx(det.compute_us).epsilon(1e-9));
    CHECK(estimates[i].step_time_us == Approx(det.step_time_us).epsilon(0.05));
  }
}

TEST_CASE("step: ring attention hides the CP sends under the attention steps", "[step]") {
  // cp = 2, attention 1 ms forward (2 ms backward), every other operator 0:
  // each layer's first step of 0.5 ms (1 ms) overlaps the send of the K/V
  // block, which takes tens of microseconds, so no CP time is exposed and
  // the step is its compute.
  const TopologySpec spec = a2_server();
  StepRequest req = request("tiny-llama.json", "tp=1,cp=2,pp=1,dp=1", "global=1,micro=1,seq=1024");
  req.compute.add("*", "*", 0.0);
  req.compute.add("attn_core", "*", 1000.0);
  const StepResult r = run_step_estimate(*plan_step(spec, req));
  const StepGroupResult* cp = group(r, "cp");
  REQUIRE(cp != nullptr);
  CHECK(cp->ranks == std::vector<int>{0, 1});
  CHECK(cp->time_us > 0);
  // Per layer and direction rank 0 sends one block and receives one: 16 sends of tens of microseconds.
  CHECK(cp->time_us < 16 * 100.0);
  CHECK(cp->exposed_us == Approx(0).margin(1e-9));
  CHECK(r.compute_us == Approx(4 * (1000.0 + 2000.0)).epsilon(1e-12));
  CHECK(r.step_time_us == Approx(r.compute_us).epsilon(1e-12));
}

TEST_CASE("step: the symmetric estimate plan gives the every-rank plan's report exactly", "[step]") {
  // The estimate plans TP and DP index 0 only (StepPlanScope::Symmetric);
  // on every kind of group the report is the same to the last picosecond.
  const Case cases[] = {
      {"tiny-llama.json", "tp=2,pp=2,dp=2", "global=4,micro=1,seq=512", StepPhase::Train},
      {"tiny-llama.json", "tp=2,dp=2,pp=2,vpp=2", "global=8,micro=1,seq=512", StepPhase::Train},
      {"tiny-llama.json", "tp=2,cp=2,dp=2", "global=4,micro=1,seq=1024", StepPhase::Train},
      {"tiny-llama.json", "tp=4,dp=2", "global=8,micro=1,seq=512", StepPhase::Decode},
      {"tiny-moe.json", "tp=1,pp=2,dp=4,ep=2", "global=8,micro=1,seq=256", StepPhase::Train},
      {"tiny-moe.json", "tp=2,dp=4,ep=4", "global=8,micro=1,seq=256", StepPhase::Prefill},
  };
  const TopologySpec spec = a2_server();
  for (const Case& c : cases) {
    StepRequest req = request(c.model, c.layout, c.batch);
    req.phase = c.phase;
    INFO(c.model << " " << c.layout << " " << c.batch);
    const auto every = plan_step(spec, req, StepPlanScope::EveryRank);
    const auto symmetric = plan_step(spec, req, StepPlanScope::Symmetric);
    CHECK(step_plan_ops(*symmetric) < step_plan_ops(*every));
    const StepResult a = run_step_estimate(*every);
    const StepResult b = run_step_estimate(*symmetric);
    CHECK(a.step_time_us == b.step_time_us);
    CHECK(a.compute_us == b.compute_us);
    CHECK(a.bubble_us == b.bubble_us);
    CHECK(a.critical_rank == b.critical_rank);
    REQUIRE(a.groups.size() == b.groups.size());
    for (std::size_t i = 0; i < a.groups.size(); ++i) {
      CHECK(a.groups[i].group == b.groups[i].group);
      CHECK(a.groups[i].ranks == b.groups[i].ranks);
      CHECK(a.groups[i].time_us == b.groups[i].time_us);
      CHECK(a.groups[i].exposed_us == b.groups[i].exposed_us);
    }
    REQUIRE(a.critical_path.size() == b.critical_path.size());
    for (std::size_t i = 0; i < a.critical_path.size(); ++i) CHECK(a.critical_path[i].op == b.critical_path[i].op);
  }
}

TEST_CASE("step: per layer the critical rank's compute is its operators and a TP collective is exposed unless a weight gradient hides it", "[step]") {
  const TopologySpec spec = a2_server();
  // tiny-llama, 4 layers, 3 micro-batches: per layer 10 operators forward and
  // 10 backward of 10 us each.
  StepRequest req = request("tiny-llama.json", "tp=1,pp=1,dp=1", "global=3,micro=1,seq=512");
  req.compute.add("*", "*", 10.0);
  const StepResult alone = run_step_estimate(*plan_step(spec, req));
  REQUIRE(alone.layers.size() == 4);
  for (int l = 0; l < 4; ++l) {
    CHECK(alone.layers[static_cast<std::size_t>(l)].layer == l);
    CHECK(alone.layers[static_cast<std::size_t>(l)].compute_us == Approx(3 * 20 * 10.0).epsilon(1e-12));
    CHECK(alone.layers[static_cast<std::size_t>(l)].communication_us == 0);
  }
  // tp = 8 without sequence parallelism: per layer and micro-batch two
  // AllReduces forward, which block, and two backward, each after a
  // column-parallel layer's input gradient and under its weight gradient.
  // With those backward matmuls at 0 nothing hides them: all four exposed.
  req = request("tiny-llama.json", "tp=8,pp=1,dp=1", "global=1,micro=1,seq=512");
  req.sequence_parallel = false;
  req.compute.add("*", "*", 10.0);
  req.compute.add("qkv_bwd", "*", 0.0);
  req.compute.add("mlp_bwd", "*", 0.0);
  const StepResult tp = run_step_estimate(*plan_step(spec, req));
  const double ar_us = static_cast<double>(estimate_perf(spec, tp_all_reduce(spec)).front().time.ps) / 1e6;
  REQUIRE(tp.layers.size() == 4);
  for (const StepLayerResult& l : tp.layers) {
    CHECK(l.communication_us == Approx(4 * ar_us).epsilon(1e-9));
    CHECK(l.exposed_us == Approx(4 * ar_us).epsilon(1e-9));
  }
  // With them at 10 ms the weight gradients (a share of each from its GEMMs,
  // milliseconds) hide the backward AllReduces: two exposed a layer.
  req.compute.add("qkv_bwd", "*", 10000.0);
  req.compute.add("mlp_bwd", "*", 10000.0);
  const StepResult hidden = run_step_estimate(*plan_step(spec, req));
  REQUIRE(hidden.layers.size() == 4);
  for (const StepLayerResult& l : hidden.layers) {
    CHECK(l.communication_us == Approx(4 * ar_us).epsilon(1e-9));
    CHECK(l.exposed_us == Approx(2 * ar_us).epsilon(1e-9));
  }
}

// Known gap A2-STEP-2/mixtral-8x7b-32k: the model charges an MoE layer its
// expert GEMMs at the dense rate plus the router, the token permutation and
// the dispatcher's collectives, so Mixtral's step computes within a few
// percent of a dense twin's (one MLP of two experts' width, the same
// attention). The measured step is far beyond that twin while the dense rows
// measured beside it are not: what the model lacks is the work Megatron
// core_r0.6.0's MoE layer adds around its GEMMs as the script ran it (the
// experts one after another from Python, no grouped GEMM; the allgather
// dispatcher's index gathers and scatters; the load-balancing loss).
TEST_CASE("known gap: Mixtral's measured step is far slower than its dense twin, which the model's MoE layer matches", "[step][calibration][gap]") {
  std::vector<MeasuredPoint> rows;
  for (const MeasuredPoint& p : load_measurements(source_file("configs/calibration/measurements.json"))) {
    if (p.group == "A2-STEP-2 ModelLink pretraining, not fitted") rows.push_back(p);
  }
  const auto mixtral = std::find_if(rows.begin(), rows.end(), [](const MeasuredPoint& p) { return p.id == "A2-STEP-2/mixtral-8x7b-32k"; });
  REQUIRE(mixtral != rows.end());
  REQUIRE(rows.size() == 4);
  CHECK_FALSE(mixtral->known_gap.empty());
  // The dense rows of the group: within 15% (each measured by the same
  // README table and scripts of the same commit).
  for (const ValidationResult& r : run_validation(rows)) {
    if (r.point->id == mixtral->id) continue;
    INFO(r.point->id << ": simulated " << r.simulated << " tokens/NPU/s, measured " << r.point->value);
    CHECK(std::abs(r.simulated / r.point->value - 1) < 0.15);
  }
  // The row's step as validate runs it, and its dense twin.
  const TopologySpec spec = load_topology(source_file("configs/topologies/a2-cluster.json"), {}, 8);
  StepRequest moe;
  moe.model = read_model_config(source_file("configs/models/mixtral-8x7b.json"));
  moe.layout = parse_layout("tp=8,pp=4,cp=2,dp=1,etp=8");
  moe.batch = parse_batch("global=128,micro=1,seq=32768");
  moe.dispatcher = Dispatcher::AllGather;
  StepRequest dense = moe;
  REQUIRE(moe.model.experts == 8);
  dense.model.experts = dense.model.topk = dense.model.moe_ffn = 0;
  dense.model.ffn = moe.model.topk * moe.model.moe_ffn;
  dense.layout = parse_layout("tp=8,pp=4,cp=2,dp=1");
  const StepResult with_experts = run_step_estimate(*plan_step(spec, moe, StepPlanScope::Symmetric));
  const StepResult twin = run_step_estimate(*plan_step(spec, dense, StepPlanScope::Symmetric));
  INFO("compute: MoE " << with_experts.compute_us << " us, dense twin " << twin.compute_us << " us");
  CHECK(with_experts.compute_us > twin.compute_us);
  CHECK(with_experts.compute_us < 1.1 * twin.compute_us);
  const double measured_us = 128.0 * 32768 / (mixtral->value * 64) * 1e6;
  INFO("measured step " << measured_us << " us, simulated " << with_experts.step_time_us << " us, twin " << twin.step_time_us << " us");
  CHECK(measured_us > 1.5 * twin.step_time_us);
  // No rate of the MoE layer's modelled extras makes up the difference.
  CHECK(measured_us - with_experts.step_time_us > 10 * (with_experts.compute_us - twin.compute_us));
}
