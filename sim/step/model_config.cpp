#include "sim/step/model_config.h"

#include <fstream>
#include <set>
#include <vector>

#include "base/error.h"
#include "base/json_reader.h"

namespace hcclsim {

namespace {
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 24;  // far above any model's width or count

}  // namespace

std::optional<std::int64_t> positive_number(const std::string& text, std::int64_t max) {
  if (text.empty()) return std::nullopt;
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != text.size() || v < 1 || v > max) return std::nullopt;
  return v;
}

namespace {
// "k=v,k=v" with integer values >= 1 into `set(key, value)`; errors name the option.
template <class Set>
void parse_pairs(const std::string& text, const std::string& option, const std::string& expected, Set set) {
  std::set<std::string> seen;
  if (text.empty()) throw InputError("option " + option, "empty; expected " + expected);
  for (std::size_t from = 0; from <= text.size();) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    const std::string item = text.substr(from, comma - from);
    from = comma + 1;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    const std::optional<std::int64_t> number = positive_number(value, std::int64_t{1} << 40);
    if (eq == std::string::npos || !number) {
      throw InputError("option " + option, "'" + item + "' is not KEY=N with a whole N >= 1; expected " + expected);
    }
    const long long v = *number;
    if (!seen.insert(key).second) throw InputError("option " + option, "'" + key + "' is given twice");
    if (!set(key, v)) throw InputError("option " + option, "unknown key '" + key + "'; expected " + expected);
  }
}
}  // namespace

bool ModelConfig::is_moe_layer(std::int64_t layer) const {
  return experts > 0 && layer >= first_dense && (layer + 1 - first_dense) % moe_every == 0;
}

std::int64_t ModelConfig::attention_params() const {
  if (!mla) return hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden;
  const std::int64_t q = q_lora_rank > 0 ? hidden * q_lora_rank + q_lora_rank * heads * qk_dim() : hidden * heads * qk_dim();
  return q + hidden * (kv_lora_rank + qk_rope_dim) + kv_lora_rank * heads * (qk_nope_dim + v_head_dim) +
         heads * v_head_dim * hidden;
}

ModelConfig read_model_config(const std::string& file) {
  const nlohmann::json doc = load_json_file(file);
  ObjectReader r(doc, JsonLocation{file, "$"});
  ModelConfig m;
  m.file = file;
  m.model_type = r.required_string("model_type");
  const std::set<std::string> dense = {"llama", "mistral", "qwen2", "qwen3"};
  const std::set<std::string> moe = {"qwen3_moe", "qwen2_moe", "deepseek_v3", "deepseek_v2", "mixtral"};
  if (dense.count(m.model_type) == 0 && moe.count(m.model_type) == 0) {
    throw InputError(file + " at $.model_type", "model_type '" + printable(m.model_type) +
                                                    "' is not supported; expected llama, mistral, qwen2, qwen3 (dense), "
                                                    "qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3 or mixtral");
  }
  m.hidden = r.required_int_in("hidden_size", 1, kMaxDimension);
  m.layers = r.required_int_in("num_hidden_layers", 1, 100000);
  m.heads = r.required_int_in("num_attention_heads", 1, kMaxDimension);
  m.kv_heads = r.int_in_or("num_key_value_heads", 1, m.heads, m.heads);
  m.vocab = r.required_int_in("vocab_size", 1, kMaxDimension);
  m.ffn = r.required_int_in("intermediate_size", 1, kMaxDimension);
  m.tied_embeddings = r.bool_or("tie_word_embeddings", false);
  // head_dim may be null or absent: hidden / heads.
  const nlohmann::json* hd = r.optional_value("head_dim");
  m.head_dim = hd != nullptr && !hd->is_null() ? r.required_int_in("head_dim", 1, kMaxDimension) : m.hidden / m.heads;
  if (m.head_dim < 1) throw InputError(file + " at $.hidden_size", "smaller than num_attention_heads");
  if (m.heads % m.kv_heads != 0) {
    throw InputError(file + " at $.num_key_value_heads", "must divide num_attention_heads (" + std::to_string(m.heads) + ")");
  }
  const nlohmann::json* kv_lora = r.optional_value("kv_lora_rank");
  if (kv_lora != nullptr && !kv_lora->is_null()) {
    m.mla = true;
    m.kv_lora_rank = r.required_int_in("kv_lora_rank", 1, kMaxDimension);
    const nlohmann::json* q_lora = r.optional_value("q_lora_rank");
    m.q_lora_rank = q_lora != nullptr && !q_lora->is_null() ? r.required_int_in("q_lora_rank", 1, kMaxDimension) : 0;
    m.qk_nope_dim = r.required_int_in("qk_nope_head_dim", 1, kMaxDimension);
    m.qk_rope_dim = r.required_int_in("qk_rope_head_dim", 1, kMaxDimension);
    m.v_head_dim = r.required_int_in("v_head_dim", 1, kMaxDimension);
    m.kv_heads = m.heads;
  }
  if (m.model_type == "mixtral") {
    // Mixtral: every layer's MLP is num_local_experts experts of intermediate_size, no shared expert.
    m.experts = r.required_int_in("num_local_experts", 1, kMaxDimension);
    m.topk = r.required_int_in("num_experts_per_tok", 1, m.experts);
    m.moe_ffn = m.ffn;
  } else if (moe.count(m.model_type) != 0) {
    const bool deepseek = m.model_type.rfind("deepseek", 0) == 0;
    const std::string experts_key = deepseek ? "n_routed_experts" : "num_experts";
    m.experts = r.required_int_in(experts_key, 1, kMaxDimension);
    m.topk = r.required_int_in("num_experts_per_tok", 1, m.experts);
    m.moe_ffn = r.required_int_in("moe_intermediate_size", 1, kMaxDimension);
    if (deepseek) {
      m.shared_experts = r.int_in_or("n_shared_experts", 0, 1024, 0);
      m.first_dense = r.int_in_or("first_k_dense_replace", 0, m.layers, 0);
      m.moe_every = r.int_in_or("moe_layer_freq", 1, m.layers, 1);
    } else {
      m.moe_every = r.int_in_or("decoder_sparse_step", 1, m.layers, 1);
      if (const nlohmann::json* only = r.optional_value("mlp_only_layers");
          only != nullptr && only->is_array() && !only->empty()) {
        throw InputError(file + " at $.mlp_only_layers", "dense layers among MoE layers are not supported; expected []");
      }
      // Qwen2-MoE's one shared expert of its own width is read as shared experts of moe_intermediate_size.
      const std::int64_t shared = r.int_in_or("shared_expert_intermediate_size", 0, kMaxDimension, 0);
      m.shared_experts = shared / m.moe_ffn;
    }
  }
  // The rest of a config.json (rope, token ids, quantisation, MTP layers) is not read.
  return m;
}

std::string Layout::describe() const {
  return "tp=" + std::to_string(tp) + ",cp=" + std::to_string(cp) + ",ep=" + std::to_string(ep) +
         ",dp=" + std::to_string(dp) + ",pp=" + std::to_string(pp) + ",vpp=" + std::to_string(vpp) +
         (etp != 1 ? ",etp=" + std::to_string(etp) : "");
}

Layout parse_layout(const std::string& text, const std::string& option) {
  Layout l;
  const std::string expected = "tp=N,pp=N,dp=N[,ep=N][,cp=N][,vpp=N][,etp=N] (a key left out is 1)";
  parse_pairs(text, option, expected, [&](const std::string& key, long long v) {
    if (v > (1 << 20)) throw InputError("option " + option, key + "=" + std::to_string(v) + " is too large");
    const int n = static_cast<int>(v);
    if (key == "tp") l.tp = n;
    else if (key == "pp") l.pp = n;
    else if (key == "dp") l.dp = n;
    else if (key == "ep") l.ep = n;
    else if (key == "cp") l.cp = n;
    else if (key == "vpp") l.vpp = n;
    else if (key == "etp") l.etp = n;
    else return false;
    return true;
  });
  return l;
}

Batch parse_batch(const std::string& text) {
  Batch b;
  const std::string expected = "global=N,micro=N,seq=N (sequences per step, per micro-batch, tokens per sequence)";
  bool has_global = false, has_seq = false;
  parse_pairs(text, "--batch", expected, [&](const std::string& key, long long v) {
    if (key == "global") b.global = v, has_global = true;
    else if (key == "micro") b.micro = v;
    else if (key == "seq") b.seq = v, has_seq = true;
    else return false;
    return true;
  });
  if (!has_global || !has_seq) throw InputError("option --batch", "global and seq are required; expected " + expected);
  if (b.seq > (1 << 24) || b.micro > (1 << 20) || b.global > (1LL << 30)) {
    throw InputError("option --batch", "too large: at most seq=16777216, micro=1048576, global=2^30");
  }
  return b;
}

ComputeTable ComputeTable::read(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw InputError(file, "cannot be read; expected a CSV file of lines operator,shape,us");
  ComputeTable t;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.rfind("operator", 0) == 0) continue;
    const auto last = line.rfind(',');
    const auto first = line.find(',');
    const std::string where = file + " line " + std::to_string(number);
    if (first == std::string::npos || first == last) throw InputError(where, "expected operator,shape,us");
    const std::string op = line.substr(0, first);
    const std::string shape = line.substr(first + 1, last - first - 1);
    const std::string us = line.substr(last + 1);
    std::size_t used = 0;
    double v = -1;
    try {
      v = std::stod(us, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || us.find_first_not_of(" \t", used) != std::string::npos || !(v >= 0) || v > 1e9) {
      throw InputError(where, "'" + printable(us) + "' is not a time in microseconds (0 to 1e9)");
    }
    if (!t.times_.emplace(std::pair{op, shape}, v).second) {
      throw InputError(where, "operator '" + printable(op) + "' at shape '" + printable(shape) + "' is given twice");
    }
  }
  return t;
}

std::optional<double> ComputeTable::find(const std::string& op, const std::string& shape) const {
  auto it = times_.find({op, shape});
  if (it == times_.end()) it = times_.find({op, "*"});
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

}  // namespace hcclsim
