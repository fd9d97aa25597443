// Plan + model + batch shape -> the op graph of one serving iteration, and the per-GPU memory
// check. Formulas are listed in planner/compile/README.md; the code follows them line by line.
#include "planner/compile/compiler.hpp"
#include "planner/compile/graph_batch.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "planner/compile/act_fusion.hpp"
#include "planner/compile/mla_memory.hpp"
#include "planner/model/decode_split.hpp"
#include "planner/model/moe_kernel_class.hpp"
#include "planner/model/routing_model.hpp"
#include "planner/plan/sharding.hpp"
#include "planner/topology/executor_launch.hpp"
#include "planner/core/error.hpp"

namespace peerplan {

namespace {

double gib(int64_t b) { return double(b) / double(1LL << 30); }

// Tokens and sequences one rank of a stage processes (dp > 1: the batch is split over replicas).
struct RankBatch {
  int64_t pf_seqs = 0, pf_tokens = 0, pf_context = 0, dc_seqs = 0, dc_context = 0;
  int64_t dc_min = 0, dc_max = 0, dc_real = 0;  // BatchShape's decode_context_min / _max / decode_real_seqs
  int64_t tokens() const { return pf_tokens + dc_seqs; }
  int64_t seqs() const { return pf_seqs + dc_seqs; }
};

RankBatch rank_batch(const BatchShape& b, int dp) {
  RankBatch r;
  r.pf_seqs = ceil_div(b.prefill_seqs, dp);
  r.pf_tokens = ceil_div(b.prefill_tokens, dp);
  r.pf_context = b.prefill_context;
  r.dc_seqs = ceil_div(b.decode_seqs, dp);
  r.dc_context = b.decode_context;
  r.dc_min = b.decode_context_min, r.dc_max = b.decode_context_max;
  r.dc_real = b.decode_real_seqs > 0 ? ceil_div(b.decode_real_seqs, dp) : 0;
  return r;
}

// Builds the ops into `graph` in place: op slots (and their name, gpus and deps storage) left by
// an earlier compile into the same graph are reused, so a pricer compiling one plan for thousands
// of shapes allocates next to nothing per shape (they were ~10^3 allocations each).
class Builder {
 public:
  Builder(const Plan& p, const ModelFigures& fig, int dtype_bytes, OpGraph& g, std::vector<int>& last)
      : graph(g), plan_(p), fig_(fig), d_(dtype_bytes), last_(last) {
    last_.clear();
  }
  OpGraph& graph;
  size_t used = 0;  // ops built so far (graph.ops may hold more slots from an earlier compile)
  // The last decode effective context (decode_split::effective_context) and what it was asked with:
  // every layer of an iteration asks the same (sorting up to a few thousand block lengths), so a
  // compile pays it once, not once a layer (the executor compiles each eager iteration on its
  // critical path).
  std::array<int64_t, 9> eff_ctx_in{};
  int64_t eff_ctx = 0;

  // The next op's slot, reset to a fresh Op but for its containers' storage; `prefix` + `name` is
  // its name. An op begun and not committed is simply overwritten by the next one.
  Op& begin(OpKind k, std::string_view prefix, std::string_view name, int stage, int layer, const int* gpus,
            size_t ngpus) {
    if (used == graph.ops.size()) graph.ops.emplace_back();
    Op& op = graph.ops[used];
    std::string nm = std::move(op.name);
    std::vector<int> gp = std::move(op.gpus), dp = std::move(op.deps);
    op = Op{};
    op.name = std::move(nm);
    op.name.assign(prefix).append(name);
    op.gpus = std::move(gp);
    op.gpus.assign(gpus, gpus + ngpus);
    op.deps = std::move(dp);
    op.deps.clear();
    op.kind = k;
    op.stage = stage;
    op.layer = layer;
    op.p2p = plan_.p2p;
    if (k == OpKind::AllReduce) op.allreduce = plan_.allreduce;
    return op;
  }
  Op& begin(OpKind k, std::string_view prefix, std::string_view name, int stage, int layer, std::initializer_list<int> gpus) {
    return begin(k, prefix, name, stage, layer, gpus.begin(), gpus.size());
  }
  Op& begin(OpKind k, std::string_view prefix, std::string_view name, int stage, int layer, const std::vector<int>& gpus) {
    return begin(k, prefix, name, stage, layer, gpus.data(), gpus.size());
  }
  // Commits the op begun last: its id, and a dependency on the last op of each of its GPUs (on an
  // auxiliary branch: the branch's last, starting from the op it forked after; after join_aux, the
  // next op also depends on the branch's last op).
  void commit(Op& op) {
    op.id = int(used);
    for (int g : op.gpus)
      if (size_t(g) < last_.size() && last_[size_t(g)] >= 0) op.deps.push_back(last_[size_t(g)]);
    for (int g : op.gpus) {
      if (size_t(g) >= aux_.size()) continue;
      Aux& a = aux_[size_t(g)];
      if (a.on && is_compute(op.kind)) op.stream = 1;
      if (a.join && a.last >= 0) op.deps.push_back(a.last), a.last = -1, a.join = false;
    }
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
    for (int g : op.gpus) {
      if (size_t(g) >= last_.size()) last_.resize(size_t(g) + 1, -1);
      last_[size_t(g)] = op.id;
    }
    ++used;
  }
  // The gate_up op just committed by gemm() / grouped_gemm() writes SiLU(gate) * up, [m][n / 2], in its
  // epilogue (act_fusion.hpp): it writes half its outputs, and no activation op follows it. Nothing when the
  // call committed no op (no rows) and the op before is not a GEMM, or is one already marked.
  void act_in_last_gemm() {
    if (used == 0) return;
    Op& op = graph.ops[used - 1];
    if ((op.kind != OpKind::Gemm && op.kind != OpKind::GroupedGemm) || op.act_epilogue) return;
    op.act_epilogue = true;
    op.mem_bytes -= double(op.m * op.n / 2) * double(d_) * op.group_share;
  }
  // `matrix`: the model matrix's name ("qkv", "expert.down"; "lm_head" outside layers).
  void gemm(std::string_view prefix, std::string_view matrix, int stage, int layer, int gpu, int64_t m, int64_t n,
            int64_t k, int64_t batch = 1) {
    if (m <= 0 || batch <= 0) return;  // no tokens reach it (e.g. a rank without local experts)
    Op& op = begin(OpKind::Gemm, prefix, matrix, stage, layer, {gpu});
    op.m = m, op.n = n, op.k = k, op.batch_count = batch;
    op.flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
    // Activations in and out in the model's dtype; the weights as stored (fp8, packed int4 with
    // their scales, ...): what a weight-bound GEMM streams from HBM.
    const MatrixShape* w = weight_of(layer, matrix);
    op.wdtype = w ? w->format.dtype : DType::BF16;
    const double wbytes = w ? w->bytes_per_param() : double(d_);
    op.mem_bytes = (double(m * k + m * n) * double(d_) + double(k * n) * wbytes) * double(batch);
    commit(op);
  }
  // The model matrix named `matrix` of decoder layer `layer` (of the model's own matrices for
  // layer -1: "lm_head"); null for names that are not a model matrix.
  const MatrixShape* weight_of(int layer, std::string_view matrix) const {
    const std::vector<MatrixShape>* ms = &fig_.model_matrices;
    if (layer >= 0 && size_t(layer) < fig_.layers.size()) ms = &fig_.layers[size_t(layer)].matrices;
    for (const auto& m : *ms)
      if (m.name == matrix) return &m;
    return nullptr;
  }
  // What an elementwise op computes and its [rows][cols] shape, for the executor's kernel.
  struct Ew {
    EwKind kind;
    int64_t rows, cols;
  };
  // Memory-bound op over `elems` elements, touched `rw` times (reads + writes), plus weights.
  void elementwise(std::string_view prefix, std::string_view name, Ew ew, int stage, int layer, int gpu, int64_t elems,
                   int rw, double flops_per_elem, int64_t weight_elems = 0) {
    if (elems <= 0) return;
    Op& op = begin(OpKind::Elementwise, prefix, name, stage, layer, {gpu});
    op.ew = ew.kind, op.ew_rows = ew.rows, op.ew_cols = ew.cols;
    op.flops = flops_per_elem * double(elems);
    op.mem_bytes = double(elems * rw + weight_elems) * double(d_);
    commit(op);
  }
  // Routed experts of one GPU as one grouped GEMM over its touched experts (issue 14): only their
  // weights are read; `load` is what routing sent them.
  void grouped_gemm(std::string_view prefix, std::string_view matrix, int stage, int layer, int gpu,
                    const routing::GroupLoad& load, int64_t tokens, int64_t n, int64_t k, const ExpertBlock& experts,
                    double share = 1.0, const ExpertRows& expert_rows = {}) {
    if (load.rows <= 0) return;
    Op& op = begin(OpKind::GroupedGemm, prefix, matrix, stage, layer, {gpu});
    op.m = load.rows, op.n = n, op.k = k, op.batch_count = load.touched, op.group_max_rows = load.max_rows;
    op.group_tokens = tokens;
    op.group_share = share;
    op.group_expert_rows = expert_rows;
    op.expert_first = experts.first, op.expert_count = experts.count;
    op.flops = share * 2.0 * double(load.rows) * double(n) * double(k);
    // Weights as stored (issue 15: fp8, MXFP4, int4 experts stream fewer bytes than bf16).
    const MatrixShape* w = weight_of(layer, matrix);
    op.wdtype = w ? w->format.dtype : DType::BF16;
    op.mem_bytes = share * (double(load.rows * k + load.rows * n) * double(d_) +
                            double(load.touched * k * n) * (w ? w->bytes_per_param() : double(d_)));
    commit(op);
  }
  // The routing and combine steps of a MoE layer on one GPU (memory-bound, with its expert range).
  void moe_elementwise(std::string_view prefix, std::string_view name, EwKind kind, int stage, int layer, int gpu,
                       int64_t rows, int64_t cols, int rw, const ExpertBlock& experts) {
    if (rows <= 0 || cols <= 0) return;
    Op& op = begin(OpKind::Elementwise, prefix, name, stage, layer, {gpu});
    op.ew = kind, op.ew_rows = rows, op.ew_cols = cols;
    op.expert_first = experts.first, op.expert_count = experts.count;
    op.flops = 4.0 * double(rows * cols);
    op.mem_bytes = double(rows * cols * rw) * double(d_);
    commit(op);
  }
  void collective(OpKind k, std::string_view prefix, std::string_view name, int stage, int layer,
                  const std::vector<int>& gpus, int64_t bytes) {
    if (gpus.size() < 2 || bytes <= 0) return;
    Op& op = begin(k, prefix, name, stage, layer, gpus);
    op.bytes = bytes;
    commit(op);
  }
  // The graph as built: slots beyond `used` dropped, each stage's ops listed.
  // A branch on `gpu`'s auxiliary stream: the ops committed between aux_begin and aux_end run there,
  // after the op last committed before it; the GPU's next ops continue from that op, not from the
  // branch, until join_aux makes the next one wait for the branch.
  void aux_begin(int gpu) {
    if (size_t(gpu) >= aux_.size()) aux_.resize(size_t(gpu) + 1);
    if (size_t(gpu) >= last_.size()) last_.resize(size_t(gpu) + 1, -1);
    aux_[size_t(gpu)].fork = last_[size_t(gpu)];
    aux_[size_t(gpu)].on = true;
  }
  void aux_end(int gpu) {
    Aux& a = aux_.at(size_t(gpu));
    a.last = last_[size_t(gpu)];
    last_[size_t(gpu)] = a.fork;
    a.on = false;
  }
  void join_aux(int gpu) {
    if (size_t(gpu) < aux_.size() && aux_[size_t(gpu)].last >= 0) aux_[size_t(gpu)].join = true;
  }
  void finish() {
    graph.ops.resize(used);
    graph.stage_ops.resize(size_t(graph.num_stages));
    for (auto& s : graph.stage_ops) s.clear();
    for (const auto& op : graph.ops) graph.stage_ops[size_t(op.stage)].push_back(op.id);
  }

 private:
  const Plan& plan_;
  const ModelFigures& fig_;
  int d_;
  std::vector<int>& last_;  // by GPU id: its last op (-1: none yet)
  struct Aux {
    int fork = -1, last = -1;  // the op the branch forked after; its last op until joined (-1: none)
    bool on = false, join = false;
  };
  std::vector<Aux> aux_;  // by GPU id (empty unless a branch was opened)
};

void check_shape(const BatchShape& b) {
  auto bad = [](const char* field, const std::string& what) { throw InputError("batch shape", field, what); };
  if (b.prefill_seqs < 0 || b.prefill_tokens < 0 || b.decode_seqs < 0 || b.prefill_context < 0 || b.decode_context < 0)
    bad("", "non-negative counts");
  if (b.tokens() <= 0) bad("", "at least one prefill token or decoding sequence");
  if (b.prefill_tokens > 0 && b.prefill_seqs <= 0) bad("prefill_seqs", ">= 1 when prefill_tokens > 0");
  if (b.prefill_seqs > b.prefill_tokens) bad("prefill_tokens", ">= prefill_seqs (each prefill has a token)");
  if (b.decode_seqs > 0 && b.decode_context <= 0) bad("decode_context", ">= 1 when decoding");
}

void attention_ops(Builder& B, const ModelConfig& cfg, const AttnShard& a, const RankBatch& rb, int s, int layer,
                   int64_t window, int gpu, int d, std::string_view L, int sm_count) {
  const double per_attended = 2.0 * double(a.heads) * double(a.qk_dim + a.v_dim);  // QK^T and PV
  const int64_t qo_per_token = a.heads * (a.qk_dim + a.v_dim) * d;
  // A sliding-window layer (Mistral-7B-v0.1, gpt-oss) attends to at most `window` tokens and caches no more.
  // `window` is the layer's figures' (LayerFigures::window), not cfg.window_of(layer): the pricer compiles a
  // reduced model whose layer indices are its representatives', not the model's (iteration_cost.cpp).
  auto bounded = [&](int64_t c) { return window > 0 ? std::min(c, window) : c; };
  if (rb.pf_seqs > 0) {
    Op& op = B.begin(OpKind::Attention, L, "attn_prefill", s, layer, {gpu});
    op.kv_dtype = cfg.kv_dtype;
    int64_t q = ceil_div(rb.pf_tokens, rb.pf_seqs);
    int64_t ctx = std::max(rb.pf_context, q);
    // Causal: token i of a chunk of q attends to ctx - q + i + 1 tokens; the mean is ctx - (q-1)/2.
    // Windowed: min(that, window) each (attended_pairs: the band's work, issue 18), and the cache
    // read is the chunk's span: its q tokens plus the window before it.
    const double attended =
        window > 0 ? attended_pairs(q, ctx, window) / double(q) : double(ctx) - double(q - 1) / 2.0;
    op.flops = per_attended * double(rb.pf_tokens) * attended;
    const int64_t read = window > 0 ? std::min(ctx, window + q) : ctx;
    op.mem_bytes = double(rb.pf_seqs * read * a.kv_bytes_per_token + rb.pf_tokens * a.kv_bytes_per_token +
                          rb.pf_tokens * qo_per_token);
    op.attn_batch = rb.pf_seqs, op.attn_q_len = q, op.attn_context = ctx;
    op.attn_heads = a.heads, op.attn_kv_heads = a.kv_heads, op.attn_head_dim = a.qk_dim, op.attn_prefill = true;
    op.attn_v_dim = a.v_dim;
    op.attn_window = window;
    B.commit(op);
  }
  if (rb.dc_seqs > 0) {
    Op& op = B.begin(OpKind::Attention, L, "attn_decode", s, layer, {gpu});
    op.kv_dtype = cfg.kv_dtype;
    const int64_t dctx = bounded(rb.dc_context);
    op.flops = per_attended * double(rb.dc_seqs) * double(dctx);
    op.mem_bytes = double(rb.dc_seqs * dctx * a.kv_bytes_per_token + rb.dc_seqs * a.kv_bytes_per_token +
                          rb.dc_seqs * qo_per_token);
    op.attn_batch = rb.dc_seqs, op.attn_q_len = 1, op.attn_context = dctx;
    // Priced at the context where the profile's uniform grid costs what these unequal contexts and
    // padding rows do on the kernel (decode_split.hpp); the work (flops, bytes) stays the mean's.
    // Windowed layers keep the mean: every sequence's span is bounded alike.
    if (window <= 0 && rb.dc_real > 0 && a.kv_heads > 0) {
      const std::array<int64_t, 9> in{rb.dc_real, rb.dc_seqs, dctx, rb.dc_min, rb.dc_max, a.kv_heads, a.heads, a.qk_dim, sm_count};
      if (in != B.eff_ctx_in || B.eff_ctx <= 0) {
        B.eff_ctx = decode_split::effective_context(rb.dc_real, rb.dc_seqs, dctx, rb.dc_min, rb.dc_max, int(a.kv_heads),
                                                    int(a.heads / a.kv_heads), int(a.qk_dim), sm_count);
        B.eff_ctx_in = in;
      }
      op.attn_context = B.eff_ctx;
    }
    op.attn_heads = a.heads, op.attn_kv_heads = a.kv_heads, op.attn_head_dim = a.qk_dim, op.attn_prefill = false;
    op.attn_v_dim = a.v_dim;
    op.attn_window = window;
    B.commit(op);
  }
}

// Multi-head latent attention (DeepSeek-V2/V3) as vLLM's and SGLang's MLA backends run it (the
// formulas: docs/attention.md "MLA"). The cache holds one latent row per token (kv_lora_rank
// normalised values + the rotated rope key), shared by the rank's heads.
// Prefill: the latent rows of every token a chunk attends to are decompressed by kv_b (again for
// the cached context, each chunk), then attention runs as MHA over q.k 192 / v 128.
// Decode ("absorbed"): q_nope times W_UK per head (one batched GEMM) gives a 512-wide latent query,
// attention runs as MQA over the 576-wide cache rows (V = their first 512 values), and the 512-wide
// per-head output times W_UV per head (a second batched GEMM) gives v_head_dim values per head.
void mla_attention_ops(Builder& B, const ModelConfig& cfg, const AttnShard& a, const MatrixShard* kv_b,
                       const RankBatch& rb, int s, int layer, int gpu, int d, std::string_view L) {
  const int64_t H = a.heads, qk = a.qk_dim, v = a.v_dim, lat = cfg.kv_lora_rank, rope = a.rope_dim;
  if (rb.pf_seqs > 0) {
    const int64_t q = ceil_div(rb.pf_tokens, rb.pf_seqs);
    const int64_t ctx = std::max(rb.pf_context, q);
    // Every attended token's latent row through kv_b: [pf_seqs * ctx][lat] x [lat][H (nope + v)].
    if (kv_b) B.gemm(L, "kv_b", s, layer, gpu, rb.pf_seqs * ctx, kv_b->n, kv_b->k, kv_b->count);
    Op& op = B.begin(OpKind::Attention, L, "attn_prefill", s, layer, {gpu});
    // The decompressed K and V are activations in the model's dtype, whatever the cache's format
    // (vLLM dequantizes an FP8 latent cache into its bf16 prefill workspace).
    op.kv_dtype = DType::BF16;
    const double attended = double(ctx) - double(q - 1) / 2.0;  // causal mean, as attention_ops
    op.flops = 2.0 * double(H) * double(qk + v) * double(rb.pf_tokens) * attended;
    const int64_t kv_per_token = H * (qk + v) * d;  // K (nope | shared rope) and V of every head
    op.mem_bytes = double(rb.pf_seqs * ctx * kv_per_token + rb.pf_tokens * H * (qk + v) * d);
    op.attn_batch = rb.pf_seqs, op.attn_q_len = q, op.attn_context = ctx;
    op.attn_heads = H, op.attn_kv_heads = H, op.attn_head_dim = qk, op.attn_v_dim = v, op.attn_prefill = true;
    B.commit(op);
  }
  if (rb.dc_seqs > 0) {
    const int64_t row = lat + rope;  // 576: the cache row, and the latent query of each head
    B.gemm(L, "q_absorb", s, layer, gpu, rb.dc_seqs, lat, cfg.qk_nope_head_dim, H);
    Op& op = B.begin(OpKind::Attention, L, "attn_decode", s, layer, {gpu});
    op.kv_dtype = cfg.kv_dtype;
    const int64_t dctx = rb.dc_context;
    op.flops = 2.0 * double(H) * double(row + lat) * double(rb.dc_seqs) * double(dctx);
    // The latent rows read once for all heads (MQA); the latent queries in, the latent outputs out.
    op.mem_bytes = double(rb.dc_seqs * dctx * a.kv_bytes_per_token + rb.dc_seqs * H * (row + lat) * d);
    op.attn_batch = rb.dc_seqs, op.attn_q_len = 1, op.attn_context = dctx;
    op.attn_heads = H, op.attn_kv_heads = 1, op.attn_head_dim = row, op.attn_v_dim = lat, op.attn_prefill = false;
    B.commit(op);
    B.gemm(L, "v_absorb", s, layer, gpu, rb.dc_seqs, v, lat, H);
  }
}

bool is_attn_in(std::string_view n) {
  return n == "qkv" || n == "q" || n == "q_a" || n == "q_b" || n == "kv_a" || n == "kv_b";
}

// What routing sends to each rank's experts for the `tokens` tokens of the EP group over `layers`
// (one layer: exactly its draws). Each layer's rank loads are sorted busiest first and taken position
// by position, handed back in the order of the first layer: the busiest rank of every layer, not a
// mean of ranks that are busy by turns. `mix`: per rank, each distinct load and the share of the
// layers that route it (the grouped GEMMs are priced per load: op_graph.hpp group_share); `mean`:
// their average, rounded, for what is linear in the rows (activation, all-to-all, combine).
// `expert_rows`: per rank, in eager iterations (tokens > kGraphTimedMaxRows, where the cuBLAS path may
// run), each touched expert's rows in each layer, taken by the same busiest-first position.
struct MoeLoads {
  std::vector<routing::GroupLoad> mean;
  std::vector<std::vector<std::pair<routing::GroupLoad, double>>> mix;
  std::vector<ExpertRows> expert_rows;
};
MoeLoads moe_loads(const ModelConfig& cfg, const std::vector<ExpertBlock>& blocks, int64_t tokens,
                   const std::vector<int>& layers) {
  const size_t nr = blocks.size();
  auto busier = [](const routing::GroupLoad& a, const routing::GroupLoad& b) {
    return a.rows != b.rows ? a.rows > b.rows : a.touched > b.touched;
  };
  MoeLoads out;
  out.mean.resize(nr);
  out.mix.resize(nr);
  std::vector<size_t> first_order;
  std::vector<std::map<std::array<int64_t, 3>, int>> seen(nr);  // by position: load -> layers
  const bool eager = tokens > kGraphTimedMaxRows;
  std::vector<std::vector<int32_t>> rows_at(nr);  // by position: every layer's expert rows
  auto take_rows = [&](size_t pos, const std::vector<int32_t>& c, const ExpertBlock& b) {
    for (int64_t e = b.first; e < b.first + b.count && size_t(e) < c.size(); ++e) rows_at[pos].push_back(c[size_t(e)]);
  };
  auto finish_rows = [&](const std::vector<size_t>& order_of_position) {
    out.expert_rows.assign(nr, ExpertRows{});
    if (!eager || order_of_position.size() != nr) return;
    for (size_t i = 0; i < nr; ++i)
      out.expert_rows[order_of_position[i]] = ExpertRows::make(std::move(rows_at[i]), int(layers.size()));
  };
  for (int l : layers) {
    const std::vector<int32_t>& c = routing::expert_counts(cfg.moe_routing, cfg.experts, cfg.experts_per_token, tokens, l);
    std::vector<routing::GroupLoad> g(nr);
    for (size_t r = 0; r < nr; ++r) g[r] = routing::group_load(c, blocks[r].first, blocks[r].count);
    if (layers.size() == 1) {
      std::vector<size_t> same(nr);
      for (size_t r = 0; r < nr; ++r) {
        out.mix[r] = {{g[r], 1.0}};
        same[r] = r;
        if (eager) take_rows(r, c, blocks[r]);
      }
      out.mean = std::move(g);
      finish_rows(same);
      return out;
    }
    std::vector<size_t> order(nr);
    for (size_t r = 0; r < nr; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return busier(g[a], g[b]); });
    if (first_order.empty()) first_order = order;
    for (size_t i = 0; i < nr; ++i) {
      const routing::GroupLoad& x = g[order[i]];
      ++seen[i][{x.rows, x.touched, x.max_rows}];
      if (eager) take_rows(i, c, blocks[order[i]]);
    }
  }
  finish_rows(first_order);
  const int64_t n = int64_t(layers.size());
  auto mean = [n](int64_t sum) { return (sum + n / 2) / n; };  // rounded half up
  for (size_t i = 0; i < nr; ++i) {
    std::array<int64_t, 3> sum{};
    bool gemv = false;
    for (const auto& [key, count] : seen[i]) {
      for (size_t f = 0; f < 3; ++f) sum[f] += key[f] * count;
      gemv = gemv || moe_gemv_class(key[2]);
    }
    routing::GroupLoad& o = out.mean[first_order[i]];
    o.rows = mean(sum[0]), o.touched = mean(sum[1]), o.max_rows = mean(sum[2]);
    o.touched = std::min(o.touched, o.rows);
    o.max_rows = std::clamp(o.max_rows, o.touched > 0 ? ceil_div(o.rows, o.touched) : int64_t(0), o.rows);
    // Past the gemv's sizes (every layer's busiest expert over 4 rows: prefill, large batches) cost is
    // near linear in the rows and one mean load prices it: 32 distinct loads of a prefill chunk made
    // Mixtral's plan search 2.5x slower for nothing.
    if (!gemv) {
      out.mix[first_order[i]] = {{o, 1.0}};
      continue;
    }
    for (const auto& [key, count] : seen[i])
      out.mix[first_order[i]].push_back({routing::GroupLoad{key[0], key[1], key[2]}, double(count) / double(n)});
  }
  return out;
}

}  // namespace

bool shared_in_bf16(const LayerFigures& lf) {
  for (const MatrixShape& m : lf.matrices)
    if ((m.name.rfind("shared.", 0) == 0 || m.name == "shared_gate") && m.format.dtype != DType::BF16) return false;
  return true;
}

struct CompileCacheData {
  bool checked = false;  // the plan passed validate_plan and check_shardable
  OpGraph graph;         // the last graph: its op slots are reused by the next compile
  std::vector<int> last; // Builder's scratch: each GPU's last op
  // By stage: the layout, each rank's expert block (MoE models), and by layer of the stage (from
  // layer_begin) its attention shard, each rank's weight shards and the name prefix "L<l>.".
  struct Stage {
    StageLayout layout;
    std::vector<ExpertBlock> blocks;
    std::vector<AttnShard> attn;
    std::vector<std::vector<std::vector<MatrixShard>>> shards;
    std::vector<std::string> prefix;
  };
  std::vector<Stage> stages;
  // Routed loads by (compiled layer, the EP group's tokens): moe_loads of the stage's blocks.
  std::map<std::pair<int, int64_t>, MoeLoads> moe;
};

CompileCache::CompileCache() : data(std::make_unique<CompileCacheData>()) {}
CompileCache::~CompileCache() = default;
CompileCache::CompileCache(CompileCache&&) noexcept = default;
CompileCache& CompileCache::operator=(CompileCache&&) noexcept = default;

namespace {

// What the plan and model alone decide, once (after the checks compile_iteration makes first).
void fill_cache(CompileCacheData& c, const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig) {
  c.stages.assign(plan.stages.size(), {});
  for (size_t si = 0; si < plan.stages.size(); ++si) {
    const PlanStage& st = plan.stages[si];
    CompileCacheData::Stage& cs = c.stages[si];
    cs.layout = stage_layout(plan, si);
    const int nr = int(st.gpus.size());
    for (int64_t li = st.layer_begin; li < st.layer_end; ++li) {
      const LayerFigures& lf = fig.layers[size_t(li)];
      cs.attn.push_back(attn_shard(cfg, lf, cs.layout.tp));
      std::vector<std::vector<MatrixShard>> shards;
      for (int r = 0; r < nr; ++r) shards.push_back(layer_shards(plan, si, r, cfg, lf));
      cs.shards.push_back(std::move(shards));
      cs.prefix.push_back(fmt::format("L{}.", li));
      if (lf.moe && cs.blocks.empty())
        for (int r = 0; r < nr; ++r) cs.blocks.push_back(expert_block(plan, si, r, cfg));
    }
  }
  c.checked = true;
}

}  // namespace

const OpGraph& compile_iteration(CompileCache& cache, const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig,
                                 const Machine& machine, const BatchShape& shape, const CompileOptions& opt) {
  CompileCacheData& C = *cache.data;
  if (!C.checked) {
    validate_plan(plan, cfg.layers, cfg.experts, machine.gpu_count(), plan.name);
    check_shardable(plan, cfg);
  }
  check_shape(shape);
  if (!C.checked) fill_cache(C, plan, cfg, fig);
  const int d = cfg.dtype_bytes;
  const int64_t H = cfg.hidden;
  const int64_t Tg = shape.tokens();
  C.graph.shape = shape;
  C.graph.num_stages = int(plan.stages.size());
  Builder B(plan, fig, d, C.graph, C.last);
  // SMs of a GPU for the decode kernel's split plan (decode_split.hpp); a machine file without the
  // figure: an H100 / H200's 132.
  auto sm_of = [&](int gpu) {
    const int c = gpu >= 0 && size_t(gpu) < machine.gpus.size() ? machine.gpus[size_t(gpu)].sm_count : 0;
    return c > 0 ? c : 132;
  };

  // The norms as the executor that timed the profile ran them (machine.hpp fused_add_norm).
  const bool fuse = fused_add_norm(machine);
  auto norm = [&](int64_t rows) { return Builder::Ew{fuse ? EwKind::AddRmsNorm : EwKind::RmsNorm, rows, H}; };
  // The activation inside the gate_up GEMV where the executor's kernel does it (act_fusion.hpp).
  const bool act_on = opt.fused_act < 0 ? fused_gate_up_act(machine) : opt.fused_act >= 1;
  const bool act_all = opt.fused_act == kActEverywhere;  // also where it was measured slower (A/B runs)
  const bool pdl = opt.pdl >= 0 ? opt.pdl == 1 : executor_launch(machine) != "serial";

  for (size_t si = 0; si < plan.stages.size(); ++si) {
    const PlanStage& st = plan.stages[si];
    const CompileCacheData::Stage& cs = C.stages[si];
    const int s = int(si);
    const StageLayout& lay = cs.layout;
    const RankBatch rb = rank_batch(shape, lay.dp);
    const int64_t T = rb.tokens();
    const int nr = int(st.gpus.size());
    auto each = [&](auto&& f) {
      for (int r = 0; r < nr; ++r) f(r, st.gpus[size_t(r)]);
    };
    // The boundary into this stage: each rank receives the hidden states from the rank at the same
    // position of the previous stage (or position modulo its size when the previous stage is smaller).
    if (si > 0) {
      const PlanStage& prev = plan.stages[si - 1];
      TransferMode mode = plan.boundary_modes[si - 1] == "peer" ? TransferMode::PeerCopyEngine : TransferMode::HostStaged;
      each([&](int r, int gpu) {
        int src = prev.gpus[size_t(r) % prev.gpus.size()];
        Op& op = B.begin(OpKind::Send, "", "", s - 1, -1, {src, gpu});
        if (nr > 1) fmt::format_to(std::back_inserter(op.name), "stage{}->{}.r{}", s - 1, s, r);
        else fmt::format_to(std::back_inserter(op.name), "stage{}->{}", s - 1, s);
        // Fused norms: the hidden states and the residual stream, not yet summed (the next norm adds
        // them), as vLLM's and SGLang's pipeline stages pass both tensors.
        op.bytes = (fuse ? 2 : 1) * T * H * d;
        op.mode = mode;
        B.commit(op);
      });
    }
    if (st.embeddings) {
      each([&](int, int gpu) {
        Op& op = B.begin(OpKind::Embedding, "", "embed", s, -1, {gpu});
        // Gather rows into the hidden states; fused norms: into the block-output buffer, the residual
        // stream zeroed, so the first layer's fused norm adds them (vLLM's first layer runs a plain norm
        // instead: one read fewer).
        op.mem_bytes = double((fuse ? 3 : 2) * T * H * d);
        B.commit(op);
      });
      if (lay.tp > 1) B.collective(OpKind::AllReduce, "", "embed_allreduce", s, -1, st.gpus, T * H * d);
    }
    for (int64_t li = st.layer_begin; li < st.layer_end; ++li) {
      const size_t lk = size_t(li - st.layer_begin);
      const LayerFigures& lf = fig.layers[size_t(li)];
      const int l = int(li);
      const std::string& L = cs.prefix[lk];
      const AttnShard& a = cs.attn[lk];
      const std::vector<std::vector<MatrixShard>>& shards = cs.shards[lk];
      auto find = [&](int r, std::string_view name) -> const MatrixShard* {
        for (const auto& m : shards[size_t(r)])
          if (m.name == name) return &m;
        return nullptr;
      };
      auto gemm_named = [&](int r, int gpu, std::string_view name, int64_t m) {
        if (const MatrixShard* ms = find(r, name)) B.gemm(L, name, s, l, gpu, m, ms->n, ms->k, ms->count);
      };
      // --- attention block ---
      // Fused: each block opens with the add + norm (vLLM's fused_add_rms_norm): the block output
      // before it (or the embedding, or the previous stage's) added into the residual stream, then
      // normalised; read x and residual, write residual and out. Every layer alike, so the reduced
      // model's one layer per kind stands for all of them.
      each([&](int, int gpu) { B.elementwise(L, "attn_norm", norm(T), s, l, gpu, T * H, fuse ? 4 : 2, 4.0, H); });
      if (cfg.mla) {
        each([&](int r, int gpu) {
          gemm_named(r, gpu, "q", T);  // full-rank q (DeepSeek-V2-Lite), or q_a, its norm, q_b
          if (find(r, "q_a")) {
            gemm_named(r, gpu, "q_a", T);
            const int64_t qr = cfg.q_lora_rank;
            B.elementwise(L, "q_a_norm", {EwKind::RmsNorm, T, qr}, s, l, gpu, T * qr, 2, 4.0, qr);
            gemm_named(r, gpu, "q_b", T);
          }
          gemm_named(r, gpu, "kv_a", T);
          const int64_t lat = cfg.kv_lora_rank;  // kv_a_layernorm over the latent (not the rope key)
          B.elementwise(L, "kv_norm", {EwKind::RmsNorm, T, lat}, s, l, gpu, T * lat, 2, 4.0, lat);
          // Rope of each head's q_pe and the shared k_pe; the latent row (normalised latent + k_pe)
          // is written to the cache in the same pass: read and written, q_pe in place.
          const int64_t rotated = (a.heads + 1) * a.rope_dim;
          B.elementwise(L, "rotary", {EwKind::MlaRotary, T, rotated}, s, l, gpu,
                        T * (a.heads * a.rope_dim + lat + a.rope_dim), 2, 3.0);
          mla_attention_ops(B, cfg, a, find(r, "kv_b"), rb, s, l, gpu, d, L);
          gemm_named(r, gpu, "o", T);
        });
      } else {
        each([&](int r, int gpu) {
          for (const auto& ms : shards[size_t(r)])
            if (is_attn_in(ms.name)) B.gemm(L, ms.name, s, l, gpu, T, ms.n, ms.k, ms.count);
        });
        if (cfg.qk_norm)  // Qwen3: q_norm and k_norm over each head's head_dim, reading and writing q and k
          each([&](int, int gpu) {
            const int64_t normed = (a.heads + a.kv_heads) * a.qk_dim;  // values normalised per token
            B.elementwise(L, "qk_norm", {EwKind::QkNorm, T, normed}, s, l, gpu, T * normed, 2, 4.0, 2 * a.qk_dim);
          });
        each([&](int, int gpu) {
          const int64_t rotated = (a.heads + a.kv_heads) * a.rope_dim;  // values rotated per token
          B.elementwise(L, "rotary", {EwKind::Rotary, T, rotated}, s, l, gpu, T * rotated, 2, 3.0);
        });
        each([&](int, int gpu) { attention_ops(B, cfg, a, rb, s, l, lf.window, gpu, d, L, sm_of(gpu)); });
        each([&](int r, int gpu) { gemm_named(r, gpu, "o", T); });
      }
      if (lay.tp > 1) B.collective(OpKind::AllReduce, L, "attn_allreduce", s, l, st.gpus, T * H * d);
      if (!fuse)
        each([&](int, int gpu) {
          B.elementwise(L, "attn_residual", {EwKind::Residual, T, H}, s, l, gpu, T * H, 3, 1.0);
        });
      each([&](int, int gpu) { B.elementwise(L, "mlp_norm", norm(T), s, l, gpu, T * H, fuse ? 4 : 2, 4.0, H); });
      // --- MLP block ---
      // A gated MLP's gate_up of m rows with SiLU(gate) * up in its epilogue (act_fusion.hpp).
      auto act_fuses = [&](std::string_view matrix, const MatrixShard* ms, int64_t m) {
        if (!act_on || !cfg.gated_mlp || !ms || ms->count != 1) return false;
        const MatrixShape* w = B.weight_of(l, matrix);
        return gate_up_act_fuses(w ? w->format.dtype : DType::BF16, m, ms->n, ms->k, pdl, act_all);
      };
      if (!lf.moe) {
        each([&](int r, int gpu) {
          const MatrixShard* up = find(r, cfg.gated_mlp ? "gate_up" : "up");
          gemm_named(r, gpu, cfg.gated_mlp ? "gate_up" : "up", T);
          int64_t inter = up ? (cfg.gated_mlp ? up->n / 2 : up->n) : 0;
          // SiLU(gate) * up
          if (act_fuses("gate_up", up, T)) B.act_in_last_gemm();
          else B.elementwise(L, "act", {EwKind::Act, T, inter}, s, l, gpu, T * inter, cfg.gated_mlp ? 3 : 2, 5.0);
          gemm_named(r, gpu, "down", T);
        });
        if (lay.tp > 1) B.collective(OpKind::AllReduce, L, "mlp_allreduce", s, l, st.gpus, T * H * d);
      } else {
        const int64_t topk = cfg.experts_per_token;
        const bool a2a = lay.ep > 1 && lay.dp > 1;  // replicated attention: tokens must travel to experts
        // Routed counts of the EP group's Tg tokens (routing_model.hpp): what each rank's experts get.
        const std::vector<ExpertBlock>& blocks = cs.blocks;
        auto known = C.moe.find({l, Tg});
        if (known == C.moe.end()) {
          std::vector<int> rlayers{l};
          if (opt.routing_layers && size_t(l) < opt.routing_layers->size() && !(*opt.routing_layers)[size_t(l)].empty())
            rlayers = (*opt.routing_layers)[size_t(l)];
          known = C.moe.emplace(std::make_pair(l, Tg), moe_loads(cfg, blocks, Tg, rlayers)).first;
        }
        const std::vector<routing::GroupLoad>& load = known->second.mean;
        const auto& mix = known->second.mix;
        // All-to-all per-rank buffer: the busiest rank's traffic, what it sends (top-k copies of its
        // tokens) or what its experts receive, whichever is larger.
        int64_t a2a_rows = T * topk;
        for (const auto& g : load) a2a_rows = std::max(a2a_rows, g.rows);
        auto shared_experts = [&](int r, int gpu) {
          if (const MatrixShard* sh = find(r, "shared.gate_up")) {
            B.gemm(L, "shared.gate_up", s, l, gpu, T, sh->n, sh->k, 1);
            if (act_fuses("shared.gate_up", sh, T)) B.act_in_last_gemm();
            else B.elementwise(L, "shared.act", {EwKind::Act, T, sh->n / 2}, s, l, gpu, T * sh->n / 2, 3, 5.0);
            gemm_named(r, gpu, "shared.down", T);
            gemm_named(r, gpu, "shared_gate", T);
          }
        };
        // The shared experts on the auxiliary stream (CompileOptions::shared_stream), as vLLM at up to
        // kSharedStreamMaxTokens: forked after the router GEMM, so the shared weights stream while the
        // tokens are routed and the routed experts run; joined at the combine. bf16 shared experts only
        // (the executor keeps one quantized GEMM runner per GPU).
        const bool aux = (opt.shared_stream < 0 ? shared_expert_stream(machine) : opt.shared_stream == 1) &&
                         T <= kSharedStreamMaxTokens && shared_in_bf16(lf);
        each([&](int r, int gpu) {
          gemm_named(r, gpu, "router", T);
          if (aux) {
            B.aux_begin(gpu);
            shared_experts(r, gpu);
            B.aux_end(gpu);
          }
          B.moe_elementwise(L, "moe_route", EwKind::MoeRoute, s, l, gpu, T, cfg.experts, 2, blocks[size_t(r)]);
        });
        if (a2a) B.collective(OpKind::AllToAll, L, "ep_dispatch", s, l, st.gpus, a2a_rows * H * d);
        each([&](int r, int gpu) {
          if (!aux) shared_experts(r, gpu);
          const MatrixShard* eg = find(r, "expert.gate_up");
          const MatrixShard* ed = find(r, "expert.down");
          const routing::GroupLoad& g = load[size_t(r)];
          if (eg && ed && eg->count > 0 && g.rows > 0) {
            // The activation in the gemv's epilogue when every load of the op's layers takes the gemv (the
            // executor compiles each layer alone: one load); else the activation kernel for all of them.
            const MatrixShape* ew = B.weight_of(l, "expert.gate_up");
            bool fused = act_on && cfg.gated_mlp;
            for (const auto& [x, share] : mix[size_t(r)])
              fused = fused && grouped_gate_up_act_fuses(ew ? ew->format.dtype : DType::BF16, x.max_rows, eg->n, act_all);
            for (const auto& [x, share] : mix[size_t(r)]) {
              B.grouped_gemm(L, "expert.gate_up", s, l, gpu, x, T, eg->n, eg->k, blocks[size_t(r)], share,
                             known->second.expert_rows[size_t(r)]);
              if (fused) B.act_in_last_gemm();
            }
            if (!fused)
              B.elementwise(L, "expert.act", {EwKind::Act, g.rows, eg->n / 2}, s, l, gpu, g.rows * eg->n / 2, 3, 5.0);
            for (const auto& [x, share] : mix[size_t(r)])
              B.grouped_gemm(L, "expert.down", s, l, gpu, x, T, ed->n, ed->k, blocks[size_t(r)], share,
                             known->second.expert_rows[size_t(r)]);
          }
          // Each token's k expert outputs, weighted by its router probabilities (after the return
          // all-to-all when tokens travelled; before the all-reduce otherwise).
          if (!a2a) {
            if (aux) B.join_aux(gpu);
            B.moe_elementwise(L, "moe_combine", EwKind::MoeCombine, s, l, gpu, T, H, int(topk) + 1, blocks[size_t(r)]);
          }
        });
        if (a2a) {
          B.collective(OpKind::AllToAll, L, "ep_combine", s, l, st.gpus, a2a_rows * H * d);
          each([&](int r, int gpu) {
            if (aux) B.join_aux(gpu);
            B.moe_elementwise(L, "moe_combine", EwKind::MoeCombine, s, l, gpu, T, H, int(topk) + 1, blocks[size_t(r)]);
          });
        } else if (nr > 1) {
          // TP-sharded experts, or EP with TP attention (every rank holds every token, as vLLM's
          // default EP): partial expert outputs are summed by one all-reduce.
          B.collective(OpKind::AllReduce, L, lay.ep > 1 ? "ep_combine_allreduce" : "moe_allreduce", s, l, st.gpus,
                       T * H * d);
        }
      }
      // Fused: the next block's norm (or final_norm, or the next stage's first) adds this MLP output.
      if (!fuse)
        each([&](int, int gpu) {
          B.elementwise(L, "mlp_residual", {EwKind::Residual, T, H}, s, l, gpu, T * H, 3, 1.0);
        });
    }
    if (st.lm_head) {
      const int64_t vocab_local = ceil_div(cfg.vocab, lay.tp);
      each([&](int, int gpu) {
        B.elementwise("", "final_norm", norm(T), s, -1, gpu, T * H, fuse ? 4 : 2, 4.0, H);
        // Logits only for each sequence's last position (what the sampler needs, as vLLM).
        B.gemm("", "lm_head", s, -1, gpu, rb.seqs(), vocab_local, H);
      });
      if (lay.tp > 1)
        B.collective(OpKind::AllGather, "", "lm_head_allgather", s, -1, st.gpus, rb.seqs() * vocab_local * lay.tp * d);
    }
  }
  B.finish();
  return C.graph;
}

OpGraph compile_iteration(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                          const BatchShape& shape, const CompileOptions& opt) {
  CompileCache cache;
  compile_iteration(cache, plan, cfg, fig, machine, shape, opt);
  return std::move(cache.data->graph);
}

MemoryReport check_memory(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const Machine& machine,
                          const MemoryOptions& opt) {
  validate_plan(plan, cfg.layers, cfg.experts, machine.gpu_count(), plan.name);
  check_shardable(plan, cfg);
  const int64_t d = cfg.dtype_bytes, H = cfg.hidden;
  MemoryReport rep;
  rep.max_seqs_that_fit = INT64_MAX;
  // Every replica of a replicated plan is checked on its own GPUs (they may differ in memory);
  // max_seqs_that_fit is then what the tightest replica holds, which each replica's scheduler gets.
  std::vector<Plan> replicas;
  for (int ri = 0; ri < plan.replica_count(); ++ri) replicas.push_back(replica_plan(plan, ri));
  for (size_t sri = 0; sri < plan.stages.size() * replicas.size(); ++sri) {
    const size_t si = sri % plan.stages.size();
    const PlanStage& st = replicas[sri / plan.stages.size()].stages[si];
    const StageLayout lay = stage_layout(plan, si);
    const int64_t seqs = ceil_div(opt.max_seqs, lay.dp);
    const int64_t A = ceil_div(opt.max_batched_tokens, lay.dp);
    for (int r = 0; r < int(st.gpus.size()); ++r) {
      GpuMemory g;
      g.gpu = st.gpus[size_t(r)];
      g.capacity = machine.gpus.at(size_t(g.gpu)).memory_bytes;
      int64_t widest_attn = 0, widest_mlp = 0, moe_rows_width = 0, moe_rows = 0;
      int64_t per_seq = 0;  // KV bytes of one sequence of opt.context tokens (windowed layers hold their window)
      for (int64_t li = st.layer_begin; li < st.layer_end; ++li) {
        const LayerFigures& lf = fig.layers[size_t(li)];
        g.weights += layer_weight_bytes(plan, si, r, cfg, lf);
        per_seq += attn_shard(cfg, lf, lay.tp).kv_bytes_per_token * (lf.window > 0 ? std::min(opt.context, lf.window) : opt.context);
        for (const auto& ms : layer_shards(plan, si, r, cfg, lf)) {
          if (is_attn_in(ms.name)) widest_attn = std::max(widest_attn, ms.n);
          else if (ms.name == "expert.gate_up" && ms.count > 0) {
            // Rows entering this rank's experts, for the worst routing the scheduler's largest
            // iteration can meet (engines size these buffers so): top-k copies of every token
            // (TP-sharded experts), or under EP every token of the group sending min(k, local
            // experts) of its copies here (a token picks k distinct experts).
            const int64_t rows = lay.ep > 1 ? opt.max_batched_tokens * std::min(cfg.experts_per_token, ms.count)
                                            : A * cfg.experts_per_token;
            moe_rows = std::max(moe_rows, rows);
            moe_rows_width = std::max(moe_rows_width, rows * ms.n);
          } else if (ms.name == "gate_up" || ms.name == "up" || ms.name == "shared.gate_up") {
            widest_mlp = std::max(widest_mlp, ms.n);
          }
        }
      }
      // Vocab-parallel embedding and LM head, each in its stored format (an lm_head quantized by
      // compressed-tensors, dense otherwise); a tied head shares the embedding's storage.
      auto vocab_shard = [&](const MatrixShape& m) {
        return int64_t(std::llround(double(ceil_div(cfg.vocab, lay.tp) * H) * m.bytes_per_param()));
      };
      if (st.embeddings) g.weights += vocab_shard(fig.model_matrices[0]);
      if (st.lm_head) {
        g.weights += fig.final_norm_params * d;
        if (!(cfg.tied_embeddings && st.embeddings))
          g.weights += vocab_shard(cfg.tied_embeddings ? fig.model_matrices[0] : fig.model_matrices[1]);
      }
      g.kv_cache = seqs * per_seq;
      // Peak live activations for A tokens: residual stream, normed input, attention output and
      // a scratch row (4 x hidden), the widest attention projection, the widest MLP up-projection,
      // the MoE expert intermediate, EP dispatch/combine buffers and the fp32 logits.
      g.activations = d * (A * (4 * H + widest_attn + widest_mlp) + moe_rows_width);
      // EP all-to-all: the top-k copies of this rank's tokens sent, the worst case received.
      if (lay.ep > 1 && lay.dp > 1) g.activations += (A * cfg.experts_per_token + moe_rows) * H * d;
      // Prefill-sized iterations: gate_up's rows gathered for cuBLAS per expert (the executor's Z).
      if (moe_rows > 0 && A > kGraphTimedMaxRows) g.activations += moe_rows * H * d;
      if (st.lm_head) g.activations += seqs * ceil_div(cfg.vocab, lay.tp) * 4;
      // MLA: the executor's expansion scratch, kv_b output, absorbed rows and decode workspace, at
      // the executor's limits (every slot and the whole token budget on each GPU of the stage).
      if (cfg.mla && st.layer_end > st.layer_begin) {
        const int64_t heads = attn_shard(cfg, fig.layers[size_t(st.layer_begin)], lay.tp).heads;
        g.mla_scratch = mla_scratch(cfg, heads, opt.context, opt.max_batched_tokens, opt.max_seqs,
                                    machine.gpus.at(size_t(g.gpu)).sm_count)
                            .total();
      }
      g.reserve = int64_t(opt.reserve_fraction * double(g.capacity)) + opt.reserve_bytes;
      int64_t free_for_kv = g.capacity - g.weights - g.activations - g.mla_scratch - g.reserve;
      int64_t fit = free_for_kv <= 0 ? 0 : (per_seq > 0 ? free_for_kv / per_seq * lay.dp : INT64_MAX);
      rep.max_seqs_that_fit = std::min(rep.max_seqs_that_fit, fit);
      rep.gpus.push_back(g);
    }
  }
  if (rep.max_seqs_that_fit == INT64_MAX) rep.max_seqs_that_fit = 0;
  rep.kv_dtype = cfg.kv_dtype;
  rep.kv_bytes_per_seq = fig.kv_bytes_per_seq(opt.context);
  rep.weight_bytes_by_dtype = fig.weight_bytes_by_dtype();
  std::sort(rep.gpus.begin(), rep.gpus.end(), [](const GpuMemory& a, const GpuMemory& b) { return a.gpu < b.gpu; });
  const GpuMemory* worst = nullptr;
  int over = 0;
  for (const auto& g : rep.gpus) {
    if (g.fits()) continue;
    ++over;
    if (!worst || g.used() - g.capacity > worst->used() - worst->capacity) worst = &g;
  }
  if (worst) {
    rep.fits = false;
    const std::string mla = worst->mla_scratch > 0 ? fmt::format(" + MLA scratch {:.1f}", gib(worst->mla_scratch)) : "";
    rep.why = fmt::format("GPU {} needs {:.1f} GiB: weights {:.1f} + KV {:.1f} + act {:.1f}{} + reserve {:.1f} > {:.1f} GiB",
                          worst->gpu, gib(worst->used()), gib(worst->weights), gib(worst->kv_cache),
                          gib(worst->activations), mla, gib(worst->reserve), gib(worst->capacity));
    if (worst->mla_scratch > 0 && worst->used() - worst->mla_scratch <= worst->capacity)
      rep.why += " (it fits without the MLA scratch: the executor's expanded prefill K/V, kv_b output, absorbed "
                 "query / output rows and decode workspace, planner/compile/mla_memory.hpp; a shorter context or "
                 "fewer batched tokens shrinks it)";
    if (over > 1) rep.why += fmt::format(" (and {} more GPU{} over)", over - 1, over > 2 ? "s" : "");
    if (rep.max_seqs_that_fit > 0)
      rep.why += fmt::format("; it would fit {} sequences of {} tokens", rep.max_seqs_that_fit, opt.context);
  }
  return rep;
}

}  // namespace peerplan
