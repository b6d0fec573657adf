// hcclsim step's inputs as typed values: a Hugging Face config.json read as
// it is (dense Llama, Qwen3-MoE, DeepSeek-V3 with MLA and shared experts),
// the parallel layout, the batch, and a user's table of measured operator
// times. Only the keys the step needs are read; the others (rope scaling,
// quantisation, token ids, ...) are left alone, as a config.json carries
// many. No SystemC here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace hcclsim {

struct ModelConfig {
  std::string file;
  std::string model_type;          // "llama", "qwen3_moe", "deepseek_v3", ...
  std::int64_t hidden = 0;         // hidden_size
  std::int64_t layers = 0;         // num_hidden_layers
  std::int64_t heads = 0;          // num_attention_heads
  std::int64_t kv_heads = 0;       // num_key_value_heads (default: heads)
  std::int64_t head_dim = 0;       // head_dim (default: hidden / heads)
  std::int64_t ffn = 0;            // intermediate_size: a dense layer's MLP
  std::int64_t vocab = 0;          // vocab_size
  bool tied_embeddings = false;    // tie_word_embeddings
  // Multi-head latent attention (DeepSeek-V3): present when kv_lora_rank is.
  bool mla = false;
  std::int64_t q_lora_rank = 0;    // 0: no query compression (q projected directly)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_dim = 0, qk_rope_dim = 0, v_head_dim = 0;
  // Mixture of experts: experts == 0 for a dense model.
  std::int64_t experts = 0;        // n_routed_experts / num_experts
  std::int64_t topk = 0;           // num_experts_per_tok
  std::int64_t moe_ffn = 0;        // moe_intermediate_size
  std::int64_t shared_experts = 0; // n_shared_experts
  std::int64_t first_dense = 0;    // first_k_dense_replace: the first layers are dense
  std::int64_t moe_every = 1;      // moe_layer_freq / decoder_sparse_step

  bool is_moe_layer(std::int64_t layer) const;
  // Parameters (elements), whole model: one layer's attention, its MLP (dense,
  // or router + routed experts + shared experts), embedding and head.
  std::int64_t attention_params() const;
  std::int64_t dense_mlp_params() const { return 3 * hidden * ffn; }
  std::int64_t expert_params() const { return 3 * hidden * moe_ffn; }  // one expert (SwiGLU)
  std::int64_t qk_dim() const { return mla ? qk_nope_dim + qk_rope_dim : head_dim; }
  std::int64_t v_dim() const { return mla ? v_head_dim : head_dim; }
};

// Reads `file`; an InputError names the file and JSON path of a missing or
// wrong value, or the model_type that is not supported.
ModelConfig read_model_config(const std::string& file);

// "tp=8,pp=8,ep=64,dp=2[,cp=2][,vpp=2]" (a key left out is 1); unknown or
// repeated keys and values below 1 are refused (InputError naming --layout).
struct Layout {
  int tp = 1, pp = 1, dp = 1, ep = 1, cp = 1, vpp = 1;
  // Expert tensor parallelism: 1 (experts whole on a rank) or tp (each
  // expert's FFN split over the TP group, Megatron's default).
  int etp = 1;
  int world() const { return tp * cp * dp * pp; }
  std::string describe() const;   // "tp=8,cp=1,ep=8,dp=2,pp=8,vpp=1" (and ",etp=N" when not 1)
};
Layout parse_layout(const std::string& text, const std::string& option = "--layout");
// `text` as a whole number in [1, max] (all of it read by std::stoll), else
// nothing: the numbers of the step's options.
std::optional<std::int64_t> positive_number(const std::string& text, std::int64_t max);

// "global=1024,micro=1,seq=4096": sequences per step, per micro-batch, and
// the sequence length (decode: the context length the new token attends).
struct Batch {
  std::int64_t global = 0, micro = 1, seq = 0;
};
Batch parse_batch(const std::string& text);

// --compute FILE: measured operator times, CSV lines "operator,shape,us"
// (a header line starting with "operator" is skipped; '#' starts a comment).
// `shape` is the step's own shape text of the operator (docs/user-guide.md)
// or "*" for any shape. Errors name the file and line.
class ComputeTable {
 public:
  static ComputeTable read(const std::string& file);
  // The time in microseconds of `op` at `shape`, if the table has it.
  std::optional<double> find(const std::string& op, const std::string& shape) const;
  bool empty() const { return times_.empty(); }
  // One entry, as a line of the file would give it (tests, callers with their own source).
  void add(const std::string& op, const std::string& shape, double us) { times_[{op, shape}] = us; }

 private:
  std::map<std::pair<std::string, std::string>, double> times_;
};

}  // namespace hcclsim
