// Number formats in the search space (planner/search/formats.hpp, issue 16): each format is the
// quantization path's config, a checkpoint is refused formats it cannot take, one search ranks the
// formats together and says what a format buys, and a search over one format is the search
// without --dtypes, bit for bit.
#include "planner/search/formats.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "planner/core/error.hpp"
#include "planner/model/quantization.hpp"
#include "planner/report/search_report.hpp"
#include "planner/search/search.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "planner/topology/machine.hpp"

using namespace peerplan;
namespace fs = std::filesystem;

namespace {

Workload chat(int64_t n, double rate = 0) {
  Workload w = load_workload(resolve_workload_path("chat"));
  w.num_requests = n;
  if (rate > 0) w.rate_rps = rate;
  return w;
}

ModelConfig model(const std::string& name) { return load_model_config(resolve_model_path(name)); }

// The search JSON without its wall-clock time (the only figure two runs may differ in).
std::string json_without_wall(const SearchResult& r) {
  nlohmann::json j = search_to_json(r);
  j.erase("wall_s");
  return j.dump();
}

// Quantization has no operator==: the parts that decide sizes and prices, and where they came from.
bool same_quant(const Quantization& a, const Quantization& b) {
  return a.method == b.method && a.source == b.source && a.linear == b.linear && a.activations == b.activations &&
         a.ignore == b.ignore && a.lm_head == b.lm_head && a.experts_only == b.experts_only;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Formats, EachFormatIsTheQuantizationPathsConfig) {
  // 2 x 2 formats, weights outermost; each config is the one --weights / --kv-dtype give.
  const ModelConfig base = model("llama-3.1-70b");
  std::vector<SearchFormat> f = search_formats(base, {DType::BF16, DType::FP8_E4M3}, {DType::BF16, DType::FP8_E4M3});
  ASSERT_EQ(f.size(), 4u);
  const char* labels[] = {"bf16/bf16", "bf16/fp8", "fp8/bf16", "fp8/fp8"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(f[i].label(), labels[i]);
    ModelConfig c = base;
    apply_precision(c, f[i].precision);
    const ModelFigures fig = derive_figures(c);
    EXPECT_EQ(f[i].fig.weight_bytes, fig.weight_bytes) << labels[i];
    EXPECT_EQ(f[i].fig.kv_bytes_per_token, fig.kv_bytes_per_token) << labels[i];
    EXPECT_TRUE(same_quant(f[i].cfg.quant, c.quant)) << labels[i];
  }
  // bf16 is the checkpoint's own: its config is untouched (no --weights source)
  EXPECT_EQ(f[0].cfg.quant.source, base.quant.source);
  EXPECT_FALSE(f[0].precision.weights.has_value());
  // fp8 weights: about half the bytes (embeddings and LM head stay dense); fp8 KV: exactly half per token
  EXPECT_LT(f[2].fig.weight_bytes, 0.55 * double(f[0].fig.weight_bytes));
  EXPECT_EQ(2 * f[1].fig.kv_bytes_per_token, f[0].fig.kv_bytes_per_token);
  // Duplicates are dropped; empty lists keep the config's own part.
  EXPECT_EQ(search_formats(base, {DType::FP8_E4M3, DType::FP8_E4M3}, {}).size(), 1u);
  std::vector<SearchFormat> own = search_formats(base, {}, {});
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0].label(), "bf16/bf16");
  EXPECT_EQ(own[0].fig.weight_bytes, derive_figures(base).weight_bytes);
}

TEST(Formats, ACheckpointTakesItsOwnFormatOrFewerBits) {
  // An FP8 checkpoint: bf16 (16 bits) or int8 (same 8 bits, another format) would plan weights
  // that do not exist; fp8 is its own (its quantization_config kept), int4 has fewer bits.
  const ModelConfig fp8 = model("llama-3.1-70b-fp8");
  for (DType d : {DType::BF16, DType::INT8}) {
    const std::string e = error_of([&] { search_formats(fp8, {d}, {}); });
    EXPECT_NE(e.find("--dtypes"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("'") + dtype_name(d) + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("its own (fp8)"), std::string::npos) << e;
  }
  std::vector<SearchFormat> ok = search_formats(fp8, {DType::FP8_E4M3, DType::INT4}, {});
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_TRUE(same_quant(ok[0].cfg.quant, fp8.quant)) << "its own format keeps the checkpoint's scheme";
  EXPECT_EQ(ok[1].cfg.quant.linear.dtype, DType::INT4);
  // An AWQ (int4) checkpoint takes int4 only, and keeps its own zero points for it.
  const ModelConfig awq = model("llama-3.1-70b-awq");
  EXPECT_TRUE(same_quant(search_formats(awq, {DType::INT4}, {})[0].cfg.quant, awq.quant));
  EXPECT_NE(error_of([&] { search_formats(awq, {DType::FP8_E4M3}, {}); }).find("'fp8'"), std::string::npos);
  // Any KV-cache format: a serving-time choice.
  EXPECT_EQ(search_formats(fp8, {}, {DType::BF16, DType::FP8_E4M3}).size(), 2u);
  // Values the options do not offer name the option and the value.
  std::string e = error_of([] { parse_dtype_list("--dtypes", {"bf16", "fp4"}, weights_choices()); });
  EXPECT_NE(e.find("--dtypes"), std::string::npos) << e;
  EXPECT_NE(e.find("'fp4'"), std::string::npos) << e;
  e = error_of([] { parse_dtype_list("--kv-dtypes", {"int8"}, kv_dtype_choices()); });
  EXPECT_NE(e.find("--kv-dtypes"), std::string::npos) << e;
  EXPECT_NE(e.find("'int8'"), std::string::npos) << e;
  EXPECT_EQ(parse_dtype_list("--dtypes", {"bf16", "FP8", "bf16"}, weights_choices()),
            (std::vector<DType>{DType::BF16, DType::FP8_E4M3}));
}

TEST(Formats, OneFormatIsTheSearchWithoutDtypesBitForBit) {
  // The search over the checkpoint's own format is the plain search; --dtypes fp8 alone is the
  // --weights fp8 search: same JSON, figure for figure.
  const ModelConfig cfg = model("llama-3.1-8b");
  Machine m = load_machine(resolve_machine_path("pcie-gen5x8-2socket"));
  Topology topo(m);
  SearchOptions so;
  so.num_requests = 40;
  const SearchResult plain = search_plans(cfg, derive_figures(cfg), topo, chat(40), so);
  const SearchResult own = search_plans(search_formats(cfg, {DType::BF16}, {}), topo, chat(40), so);
  EXPECT_FALSE(own.multi_format());
  EXPECT_EQ(json_without_wall(own), json_without_wall(plain));
  EXPECT_EQ(ranked_table(own, 30, "").substr(300), ranked_table(plain, 30, "").substr(300)) << "past the wall time";
  ModelConfig q = cfg;
  apply_precision(q, DType::FP8_E4M3, std::nullopt);
  const SearchResult weights = search_plans(q, derive_figures(q), topo, chat(40), so);
  const SearchResult listed = search_plans(search_formats(cfg, {DType::FP8_E4M3}, {}), topo, chat(40), so);
  EXPECT_EQ(json_without_wall(listed), json_without_wall(weights));
}

TEST(Formats, Fp8WeightsMeetTheSlosOnFewerGpusAndTheFewestAreRecommended) {
  // Llama-3.1-70B on the shipped hgx-h100x8 (80 GB H100s), chat at 4 req/s, --dtypes bf16,fp8:
  // fp8 weights hold more sequences on as many GPUs and meet the SLOs on fewer; the recommendation
  // is the fewest GPUs meeting the SLOs over both formats, and the verdict says what fp8 buys.
  const ModelConfig cfg = model("llama-3.1-70b");
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  SearchOptions so;
  so.num_requests = 400;
  so.screen_requests = 80;
  so.capacity_recommended = false;
  const SearchResult r = search_plans(search_formats(cfg, {DType::BF16, DType::FP8_E4M3}, {}), topo, chat(400), so);
  ASSERT_TRUE(r.multi_format());
  ASSERT_EQ(r.formats[1].weights, "fp8");
  // Memory fit per format: on the same GPUs, fp8 weights leave room for more sequences (at the
  // chat workload's 10 240-token context neither fits one sequence on one 80 GB GPU: fp8 weights
  // take 67.7 GiB, so both need 2 GPUs to fit; bf16 TP2 then holds 1 sequence, fp8 TP2 22).
  std::map<std::string, int64_t> bf16_seqs;
  for (const auto* list : {&r.ranked, &r.rejected})
    for (const auto& c : *list)
      if (c.format == 0) bf16_seqs[c.plan.name] = c.memory.max_seqs_that_fit;
  int more_seqs = 0;
  for (const auto* list : {&r.ranked, &r.rejected})
    for (const auto& c : *list)
      if (c.format == 1 && bf16_seqs.count(c.plan.name) && bf16_seqs[c.plan.name] < r.workload.max_num_seqs) {
        EXPECT_GE(c.memory.max_seqs_that_fit, bf16_seqs[c.plan.name]) << c.plan.name;
        more_seqs += c.memory.max_seqs_that_fit > 2 * std::max<int64_t>(bf16_seqs[c.plan.name], 1);
      }
  EXPECT_GT(more_seqs, 0) << "some plan holds over twice the sequences with fp8 weights";
  size_t fp8_ranked = 0;
  for (const auto& c : r.ranked) fp8_ranked += c.format == 1;
  EXPECT_GT(fp8_ranked, 0u) << "fp8 candidates are ranked";
  ASSERT_GE(r.recommended, 0);
  const CandidateResult& rec = r.ranked[size_t(r.recommended)];
  ASSERT_TRUE(rec.meets_slos) << r.verdict;
  int fewest[2] = {1 << 30, 1 << 30};
  for (const auto& c : r.ranked)
    if (c.meets_slos) fewest[c.format] = std::min(fewest[c.format], c.plan.num_gpus());
  EXPECT_EQ(rec.plan.num_gpus(), std::min(fewest[0], fewest[1])) << r.verdict;
  EXPECT_EQ(rec.format, 1u) << "fp8 meets the SLOs on fewer GPUs: " << r.verdict;
  ASSERT_LT(fewest[0], 1 << 30) << "bf16 is screened up to its own fewest GPUs: " << r.verdict;
  EXPECT_NE(r.verdict.find(fmt::format("fp8 weights: the same SLOs on {} GPU{} instead of {}", fewest[1],
                                       fewest[1] == 1 ? "" : "s", fewest[0])),
            std::string::npos)
      << r.verdict;
  // A plan left unsimulated for its GPU count has more GPUs than its format's fewest meeting the
  // SLOs, or as many in a format that cannot be recommended (its fewest above the recommendation's).
  const int rec_gpus = rec.plan.num_gpus();
  int skipped_at_fewest = 0;
  for (const auto& c : r.rejected)
    if (c.pruned_by == "gpus") {
      EXPECT_GE(c.plan.num_gpus(), fewest[c.format]) << c.plan.name;
      if (c.plan.num_gpus() == fewest[c.format]) {
        EXPECT_GT(fewest[c.format], rec_gpus) << c.plan.name << ": " << c.why_not;
        ++skipped_at_fewest;
      }
    }
  EXPECT_GT(skipped_at_fewest, 0) << "bf16 stops at its first plan on 4 GPUs that meets the SLOs";
  // Screening and the one-at-a-time rounds of formats that cannot be recommended change nothing
  // in the recommendation: the search with every plan of both formats simulated fully agrees.
  SearchOptions full = so;
  full.screen_requests = 0;
  const SearchResult all = search_plans(search_formats(cfg, {DType::BF16, DType::FP8_E4M3}, {}), topo, chat(400), full);
  ASSERT_GE(all.recommended, 0);
  const CandidateResult& all_rec = all.ranked[size_t(all.recommended)];
  EXPECT_EQ(all_rec.plan.name, rec.plan.name);
  EXPECT_EQ(all_rec.format, rec.format);
  EXPECT_EQ(all_rec.metrics.tpot.p50, rec.metrics.tpot.p50);
  EXPECT_EQ(all_rec.metrics.goodput_rps, rec.metrics.goodput_rps);
  for (size_t f = 0; f < 2; ++f) {
    int n = 1 << 30;
    for (const auto& c : all.ranked)
      if (c.format == f && c.meets_slos) n = std::min(n, c.plan.num_gpus());
    EXPECT_EQ(n, fewest[f]) << "each format's fewest GPUs meeting the SLOs, as the full search finds them";
  }
  // The table, the JSON and the CSV name each plan's format.
  const std::string table = ranked_table(r, 60, "");
  EXPECT_NE(table.find("w/kv"), std::string::npos);
  EXPECT_NE(table.find("fp8/bf16"), std::string::npos);
  const nlohmann::json j = search_to_json(r);
  EXPECT_EQ(j.at("recommended_format"), "fp8/bf16");
  EXPECT_EQ(j.at("formats").size(), 2u);
  EXPECT_EQ(j.at("ranked")[size_t(r.recommended)].at("format").at("weights"), "fp8");
  EXPECT_NE(search_to_csv(r).find(",weights,kv_dtype\n"), std::string::npos);
}

TEST(Formats, Fp8KvCacheHoldsTwiceTheSequencesOfTheSamePlan) {
  // --kv-dtypes bf16,fp8: the same plan in both KV formats; the fp8 cache holds about twice the
  // sequences (the weights take the same memory, the KV bytes per token halve).
  const ModelConfig cfg = model("llama-3.1-70b");
  Machine m = load_machine(resolve_machine_path("hgx-h100x8"));
  Topology topo(m);
  SearchOptions so;
  so.num_requests = 40;
  so.capacity_recommended = false;
  so.compare_p2p = false;
  so.strategy_files = {resolve_strategy("tensor_parallel")};
  const SearchResult r = search_plans(search_formats(cfg, {}, {DType::BF16, DType::FP8_E4M3}), topo, chat(40), so);
  std::map<std::string, const CandidateResult*> fp8_kv;
  for (const auto& c : r.ranked)
    if (c.format == 1) fp8_kv[c.plan.name] = &c;
  int compared = 0;
  for (const auto& c : r.ranked) {
    if (c.format != 0 || !fp8_kv.count(c.plan.name)) continue;
    const MemoryReport& f8 = fp8_kv[c.plan.name]->memory;
    EXPECT_EQ(c.memory.kv_bytes_per_seq, 2 * f8.kv_bytes_per_seq) << c.plan.name;
    // at least as many sequences; twice as many unless max_num_seqs caps them
    EXPECT_GE(f8.max_seqs_that_fit, std::min<int64_t>(2 * c.memory.max_seqs_that_fit - 1, r.workload.max_num_seqs))
        << c.plan.name;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(Formats, CliTeachesAndRefuses) {
  const std::string bin = PEERPLAN_BINARY;
  const fs::path tmp = fs::temp_directory_path() / "peerplan_formats_test";
  fs::create_directories(tmp);
  auto run = [&](const std::string& args, std::string* err = nullptr) {
    const std::string e = (tmp / "err.txt").string();
    const int rc = std::system((bin + " " + args + " > " + (tmp / "out.txt").string() + " 2> " + e).c_str());
    if (err) {
      std::ifstream in(e);
      std::stringstream ss;
      ss << in.rdbuf();
      *err = ss.str();
    }
    return WEXITSTATUS(rc);
  };
  std::string err;
  EXPECT_EQ(run("plan --help"), 0);
  {
    std::ifstream in(tmp / "out.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_NE(ss.str().find("--dtypes"), std::string::npos);
    EXPECT_NE(ss.str().find("--kv-dtypes"), std::string::npos);
  }
  EXPECT_EQ(run("plan --model llama-3.1-70b-fp8 --machine hgx-h100x8 --dtypes bf16,fp8", &err), 2);
  EXPECT_NE(err.find("--dtypes"), std::string::npos) << err;
  EXPECT_NE(err.find("'bf16'"), std::string::npos) << err;
  EXPECT_EQ(run("plan --model llama-3.1-70b --machine hgx-h100x8 --dtypes fp8 --weights fp8", &err), 2);
  EXPECT_NE(err.find("--dtypes"), std::string::npos) << err;
  EXPECT_EQ(run("plan --model llama-3.1-70b --machine hgx-h100x8 --kv-dtypes bf16,int8", &err), 2);
  EXPECT_NE(err.find("--kv-dtypes"), std::string::npos) << err;
}
