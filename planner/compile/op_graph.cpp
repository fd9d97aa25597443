#include "planner/compile/op_graph.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace peerplan {

void BatchShapeSum::add_prefill(int64_t new_tokens, int64_t context) {
  ++s_.prefill_seqs;
  s_.prefill_tokens += new_tokens;
  twice_pairs_ += new_tokens * (2 * context - new_tokens + 1);
}

void BatchShapeSum::add_decode(int64_t context) {
  decode_min_ = s_.decode_seqs == 0 ? context : std::min(decode_min_, context);
  decode_max_ = std::max(decode_max_, context);
  ++s_.decode_seqs;
  decode_ctx_ += context;
}

BatchShape BatchShapeSum::shape() const {
  BatchShape b = s_;
  if (b.prefill_seqs > 0 && b.prefill_tokens > 0) {
    // ctx = pairs / N + (q - 1) / 2, to the nearest token: floor((2 pairs + N q) / 2N); at least q
    // (the compiler's max(context, q)). One chunk of n at c: floor(c + 1/2) = c.
    const int64_t n = b.prefill_tokens, q = (n + b.prefill_seqs - 1) / b.prefill_seqs;
    b.prefill_context = std::max(q, (twice_pairs_ + n * q) / (2 * n));
  }
  // Mean, rounded to the nearest token.
  if (b.decode_seqs > 0) {
    b.decode_context = (decode_ctx_ + b.decode_seqs / 2) / b.decode_seqs;
    b.decode_context_min = decode_min_, b.decode_context_max = decode_max_, b.decode_real_seqs = b.decode_seqs;
  }
  return b;
}

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::Gemm: return "gemm";
    case OpKind::GroupedGemm: return "grouped_gemm";
    case OpKind::Attention: return "attention";
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Embedding: return "embedding";
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllToAll:
    case OpKind::Broadcast: return coll_op_name(coll_op(k));
    case OpKind::Send: return "send";
  }
  return "?";
}

CollOp coll_op(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return CollOp::AllReduce;
    case OpKind::AllGather: return CollOp::AllGather;
    case OpKind::ReduceScatter: return CollOp::ReduceScatter;
    case OpKind::AllToAll: return CollOp::AllToAll;
    case OpKind::Broadcast: return CollOp::Broadcast;
    default: throw std::invalid_argument(std::string("not a collective: ") + to_string(k));
  }
}

ExpertRows ExpertRows::make(std::vector<int32_t> rows, int layers) {
  rows.erase(std::remove_if(rows.begin(), rows.end(), [](int32_t r) { return r <= 0; }), rows.end());
  ExpertRows e;
  if (layers <= 0 || rows.empty()) return e;
  std::sort(rows.begin(), rows.end());
  uint64_t h = 0x9E3779B97F4A7C15ull ^ uint64_t(layers);
  for (int32_t r : rows) h = (h ^ uint64_t(r)) * 0x100000001B3ull + (h >> 29);
  e.hash = h;
  e.layers = layers;
  e.rows = std::make_shared<const std::vector<int32_t>>(std::move(rows));
  return e;
}

uint64_t priced_hash(const Op& o) {
  // One multiply per word, then one splitmix64 finaliser so every input bit reaches every output
  // bit: the cost model looks an op up once per op of every priced shape, so this is hot (a full
  // splitmix per word made a memo hit ~1.6x slower than the old 14-word key).
  uint64_t h = 0xCBF29CE484222325ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001B3ull + (h >> 29); };
  auto add = [&mix](const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, ExpertRows>) {
      mix(v.empty() ? 0 : v.hash);
    } else if constexpr (std::is_same_v<T, std::vector<int>>) {
      mix(v.size());
      for (int x : v) mix(uint64_t(int64_t(x)));
    } else if constexpr (std::is_floating_point_v<T>) {
      double d = v == 0 ? 0.0 : double(v);  // -0.0 == 0.0, so they must hash alike
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof bits);
      mix(bits);
    } else {
      mix(uint64_t(int64_t(v)));
    }
  };
  std::apply([&add](const auto&... f) { (add(f), ...); }, priced_fields(o));
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  return h ^ (h >> 31);
}

const char* op_class(OpKind k) {
  switch (k) {
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::Broadcast: return "collective";
    default: return to_string(k);  // the other kinds are their own class
  }
}

}  // namespace peerplan
