// peerplan export: the launches each engine gets for the plan shapes strategies produce, checked
// word by word against the engine's pinned flag list; the refusals; the script as bash runs it.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/export/engine_export.hpp"
#include "planner/export/export_request.hpp"
#include "planner/export/llamacpp_split.hpp"
#include "planner/model/model_config.hpp"
#include "tests/export/flag_list.hpp"
#include "tests/plan_fixtures.hpp"

namespace peerplan {
namespace {

using test_export::expect_documented;

ExportRequest request(Plan p, int64_t layers = 32, std::string model = "meta-llama/Llama-3.1-8B-Instruct") {
  ExportRequest r;
  r.plan = std::move(p);
  r.model_ref = std::move(model);
  r.model_layers = layers;
  r.model_context = 131072;
  r.max_model_len = 10240;
  return r;
}

std::string env_of(const Launch& l, const std::string& k) {
  for (const auto& [n, v] : l.env)
    if (n == k) return v;
  return "<unset>";
}

bool has(const Launch& l, const std::string& w) { return std::find(l.argv.begin(), l.argv.end(), w) != l.argv.end(); }
std::string after(const Launch& l, const std::string& flag) {
  auto it = std::find(l.argv.begin(), l.argv.end(), flag);
  return it == l.argv.end() || it + 1 == l.argv.end() ? "<absent>" : *(it + 1);
}

std::string refusal(Engine e, const ExportRequest& r) {
  try {
    export_plan(e, r);
  } catch (const InputError& err) {
    EXPECT_EQ(err.field(), "--engine");
    return err.what();
  }
  return "accepted";
}

// Mixtral-like: 8 experts, contiguous blocks over the stage's GPUs in order.
Plan ep_plan(const std::vector<int>& gpus, const std::string& attention) {
  Plan p = test_plans::tp(gpus, 32, "ep");
  p.ep = int(gpus.size());
  p.ep_attention = attention;
  for (int e = 0; e < 8; ++e) p.expert_gpu.push_back(gpus[size_t(e * p.ep / 8)]);
  return p;
}

TEST(Export, EveryEngineWritesOnlyDocumentedFlags) {
  std::vector<ExportRequest> reqs;
  reqs.push_back(request(test_plans::tp({3, 1}, 32)));
  reqs.push_back(request(test_plans::tp_pp({{0}, {2}}, 32)));
  ExportRequest off = request(test_plans::tp({0, 1, 2, 3}, 32));
  off.plan.p2p = false;
  off.kv_dtype = DType::FP8_E4M3;
  off.weights = DType::FP8_E4M3;
  off.chunked_prefill = false;
  off.max_batched_tokens = 16384;
  reqs.push_back(off);
  for (const char* a : {"tp", "replicated"}) {
    ExportRequest r = request(ep_plan({4, 5, 6, 7}, a));
    r.model_experts = 8;
    reqs.push_back(r);
  }
  for (Engine e : {Engine::Vllm, Engine::Sglang, Engine::Trtllm})
    for (const ExportRequest& r : reqs) {
      SCOPED_TRACE(std::string(engine_info(e).key) + " " + r.plan.name);
      expect_documented(export_plan(e, r));
    }
  for (ExportRequest r : {reqs[0], reqs[1]}) {
    r.model_ref = "/m/Llama-3.1-8B-Q4_K_M.gguf";
    SCOPED_TRACE(r.plan.name);
    expect_documented(export_plan(Engine::Llamacpp, r));
  }
}

TEST(Export, VllmRealisesThePlan) {
  ExportRequest r = request(test_plans::tp_pp({{2, 3}, {0, 1}}, 32));
  r.plan.stages[0].layer_end = r.plan.stages[1].layer_begin = 18;  // uneven: 18 + 14
  r.plan.p2p = false;
  r.max_num_seqs = 64;
  r.max_batched_tokens = 4096;
  EngineExport x = export_plan(Engine::Vllm, r);
  ASSERT_EQ(x.launches.size(), 1u);
  const Launch& l = x.launches[0];
  EXPECT_EQ(env_of(l, "CUDA_VISIBLE_DEVICES"), "2,3,0,1") << "ranks in the plan's order";
  EXPECT_EQ(env_of(l, "VLLM_PP_LAYER_PARTITION"), "18,14");
  EXPECT_EQ(env_of(l, "NCCL_P2P_DISABLE"), "1");
  EXPECT_TRUE(has(l, "--disable-custom-all-reduce"));
  EXPECT_EQ(after(l, "--tensor-parallel-size"), "2");
  EXPECT_EQ(after(l, "--pipeline-parallel-size"), "2");
  EXPECT_EQ(after(l, "--max-num-seqs"), "64");
  EXPECT_EQ(after(l, "--max-num-batched-tokens"), "4096");
  EXPECT_EQ(after(l, "--max-model-len"), "10240");
  EXPECT_EQ(after(l, "--kv-cache-dtype"), "auto");
  EXPECT_EQ(after(l, "--port"), "8000");
  EXPECT_TRUE(has(l, "--enable-chunked-prefill"));
  // P2P on, the plan priced with vLLM's all-reduce rule: neither the NCCL variable nor the switch.
  r.plan.p2p = true;
  r.plan.allreduce = ArSetting::AutoVllm;
  const Launch l2 = export_plan(Engine::Vllm, r).launches[0];
  EXPECT_EQ(env_of(l2, "NCCL_P2P_DISABLE"), "<unset>");
  EXPECT_FALSE(has(l2, "--disable-custom-all-reduce"));
}

// Issue 17: the engine's all-reduce switch follows the plan's setting (allreduce_rule.hpp).
bool has_note(const EngineExport& x, const std::string& part) {
  for (const auto& n : x.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(Export, AllReduceSwitchFollowsThePlan) {
  ExportRequest r = request(test_plans::tp({0, 1}, 32));
  // Priced with NCCL (the default): the engines' custom all-reduce goes, as simulated.
  EXPECT_TRUE(has(export_plan(Engine::Vllm, r).launches[0], "--disable-custom-all-reduce"));
  EXPECT_TRUE(has(export_plan(Engine::Sglang, r).launches[0], "--disable-custom-all-reduce"));
  EngineExport t = export_plan(Engine::Trtllm, r);
  ASSERT_EQ(t.launches[0].files.size(), 1u);
  EXPECT_NE(t.launches[0].files[0].second.find("allreduce_strategy: NCCL"), std::string::npos);
  // The engine's own rule: the switch stays on, TensorRT-LLM gets AUTO, no note.
  r.plan.allreduce = ArSetting::AutoSglang;
  EngineExport g = export_plan(Engine::Sglang, r);
  EXPECT_FALSE(has(g.launches[0], "--disable-custom-all-reduce"));
  EXPECT_FALSE(has_note(g, "all-reduce:"));
  r.plan.allreduce = ArSetting::AutoTrtllm;
  t = export_plan(Engine::Trtllm, r);
  EXPECT_NE(t.launches[0].files[0].second.find("allreduce_strategy: AUTO"), std::string::npos);
  EXPECT_FALSE(has_note(t, "all-reduce:"));
  expect_documented(t);
  // Another rule than the engine's: on, with a note naming the engine's own.
  r.plan.allreduce = ArSetting::Custom;
  EngineExport v = export_plan(Engine::Vllm, r);
  EXPECT_FALSE(has(v.launches[0], "--disable-custom-all-reduce"));
  EXPECT_TRUE(has_note(v, "--allreduce auto:vllm")) << "vLLM applies its own thresholds";
  // P2P off wins over any setting but custom (refused by validate_plan): NCCL.
  r.plan.allreduce = ArSetting::AutoVllm;
  r.plan.p2p = false;
  EXPECT_TRUE(has(export_plan(Engine::Vllm, r).launches[0], "--disable-custom-all-reduce"));
  // llama.cpp has no switch: said, not dropped.
  ExportRequest ll = request(test_plans::tp({0, 1}, 32), 32, "/m/x.gguf");
  EXPECT_TRUE(has_note(export_plan(Engine::Llamacpp, ll), "no all-reduce switch"));
}

TEST(Export, ExpertParallelSizesPerEngine) {
  ExportRequest r = request(ep_plan({4, 5, 6, 7}, "replicated"));
  r.model_experts = 8;
  const Launch v = export_plan(Engine::Vllm, r).launches[0];
  EXPECT_EQ(after(v, "--data-parallel-size"), "4");
  EXPECT_EQ(after(v, "--tensor-parallel-size"), "1");
  EXPECT_TRUE(has(v, "--enable-expert-parallel"));
  const Launch s = export_plan(Engine::Sglang, r).launches[0];
  EXPECT_EQ(after(s, "--tp-size"), "4");
  EXPECT_EQ(after(s, "--dp-size"), "4");
  EXPECT_EQ(after(s, "--ep-size"), "4");
  EXPECT_TRUE(has(s, "--enable-dp-attention"));
  const Launch t = export_plan(Engine::Trtllm, r).launches[0];
  EXPECT_EQ(after(t, "--ep_size"), "4");
  ASSERT_EQ(t.files.size(), 1u);
  EXPECT_NE(t.files[0].second.find("enable_attention_dp: true"), std::string::npos);
  r.plan.ep_attention = "tp";
  EXPECT_EQ(after(export_plan(Engine::Vllm, r).launches[0], "--tensor-parallel-size"), "4");
}

TEST(Export, RefusesWhatTheEngineCannotExpress) {
  ExportRequest uneven = request(test_plans::tp_pp({{0}, {1}}, 32));
  uneven.plan.stages[0].layer_end = uneven.plan.stages[1].layer_begin = 20;
  EXPECT_NE(refusal(Engine::Trtllm, uneven).find("[20,12]; TensorRT-LLM splits them evenly"), std::string::npos)
      << refusal(Engine::Trtllm, uneven);
  EXPECT_EQ(refusal(Engine::Vllm, uneven), "accepted") << "vLLM takes per-stage counts";
  ExportRequest odd = request(test_plans::tp_pp({{0}, {1}, {2}}, 32));  // 10, 10, 12
  EXPECT_NE(refusal(Engine::Trtllm, odd).find("[11,11,10]"), std::string::npos) << refusal(Engine::Trtllm, odd);
  odd.plan.stages[0].layer_end = odd.plan.stages[1].layer_begin = 11;
  odd.plan.stages[1].layer_end = odd.plan.stages[2].layer_begin = 22;
  EXPECT_EQ(refusal(Engine::Trtllm, odd), "accepted") << "TensorRT-LLM's own split of 32 over 3";

  ExportRequest ep = request(ep_plan({0, 1}, "tp"), 32, "/m/mixtral.gguf");
  ep.model_experts = 8;
  EXPECT_NE(refusal(Engine::Llamacpp, ep).find("no expert parallelism"), std::string::npos);
  std::swap(ep.plan.expert_gpu[0], ep.plan.expert_gpu[7]);
  EXPECT_NE(refusal(Engine::Vllm, ep).find("contiguous blocks"), std::string::npos) << refusal(Engine::Vllm, ep);

  ExportRequest mixed = request(test_plans::tp_pp({{0, 1}, {2}}, 32));
  EXPECT_NE(refusal(Engine::Sglang, mixed).find("one tensor-parallel size"), std::string::npos);
  ExportRequest both = request(test_plans::tp_pp({{0, 1}, {2, 3}}, 32), 32, "/m/x.gguf");
  EXPECT_NE(refusal(Engine::Llamacpp, both).find("not both"), std::string::npos);
  ExportRequest hf = request(test_plans::tp({0, 1}, 32));
  EXPECT_NE(refusal(Engine::Llamacpp, hf).find("GGUF"), std::string::npos);
  ExportRequest fp8 = request(test_plans::tp({0, 1}, 32), 32, "/m/x.gguf");
  fp8.kv_dtype = DType::FP8_E4M3;
  EXPECT_NE(refusal(Engine::Llamacpp, fp8).find("no FP8"), std::string::npos);
  ExportRequest p2p = request(test_plans::tp({0, 1}, 32), 32, "/m/x.gguf");
  p2p.plan.p2p = false;
  EXPECT_NE(refusal(Engine::Llamacpp, p2p).find("GGML_CUDA_NO_PEER_COPY"), std::string::npos);
  ExportRequest nochunk = request(test_plans::tp({0}, 32));
  nochunk.chunked_prefill = false;  // 8192 batched tokens < 10240 context
  EXPECT_NE(refusal(Engine::Vllm, nochunk).find("max_num_batched_tokens >= max_model_len"), std::string::npos);
  ExportRequest int4kv = request(test_plans::tp({0}, 32));
  int4kv.kv_dtype = DType::INT4;
  EXPECT_NE(refusal(Engine::Sglang, int4kv).find("int4 KV cache"), std::string::npos);
}

TEST(Export, LlamaCppTensorSplitPlacesEveryLayerAsPlanned) {
  using namespace export_detail;
  for (std::vector<int64_t> stages : std::vector<std::vector<int64_t>>{
           {16, 16}, {20, 12}, {1, 31}, {11, 11, 10}, {7, 9, 8, 8}, {40, 40}, {13, 27, 20}, {1, 1, 1, 1, 1, 1, 1, 1}}) {
    EXPECT_EQ(llamacpp_layer_devices(llamacpp_layer_split(stages), stages), llamacpp_plan_devices(stages))
        << ::testing::PrintToString(stages);
  }
  // Without the output layer's +1 the split is off by one (the check can fail).
  std::vector<int64_t> s = {20, 12};
  EXPECT_NE(llamacpp_layer_devices(s, s), llamacpp_plan_devices(s));
  ExportRequest r = request(test_plans::tp_pp({{1}, {0}}, 32), 32, "/m/Llama-3.1-8B-Q4_K_M.gguf");
  r.plan.stages[0].layer_end = r.plan.stages[1].layer_begin = 20;
  r.seqs_that_fit = 12;
  r.max_num_seqs = 256;
  const Launch l = export_plan(Engine::Llamacpp, r).launches[0];
  EXPECT_EQ(after(l, "--split-mode"), "layer");
  EXPECT_EQ(after(l, "--tensor-split"), "20,13");
  EXPECT_EQ(after(l, "--main-gpu"), "0");
  EXPECT_EQ(env_of(l, "CUDA_VISIBLE_DEVICES"), "1,0");
  EXPECT_EQ(after(l, "--parallel"), "12") << "slots the KV cache holds";
  EXPECT_EQ(after(l, "--ctx-size"), std::to_string(12 * 10240));
  const Launch row = export_plan(Engine::Llamacpp, request(test_plans::tp({2, 3}, 32), 32, "/m/x.gguf")).launches[0];
  EXPECT_EQ(after(row, "--split-mode"), "row");
  EXPECT_EQ(after(row, "--tensor-split"), "1,1");
}

TEST(Export, OneLaunchPerReplicaOnItsOwnPort) {
  ExportRequest r = request(test_plans::tp({0, 1}, 32));
  r.replicas = {{0, 1}, {2, 3}, {5, 4}};
  r.port = 9000;
  EngineExport x = export_plan(Engine::Sglang, r);
  ASSERT_EQ(x.launches.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(x.launches[size_t(i)].port, 9000 + i);
    EXPECT_EQ(after(x.launches[size_t(i)], "--port"), std::to_string(9000 + i));
  }
  EXPECT_EQ(env_of(x.launches[2], "CUDA_VISIBLE_DEVICES"), "5,4");
  EXPECT_NE(render_script(x).find("\nwait\n"), std::string::npos);
  r.replicas = {{0, 1}, {1, 2}};
  EXPECT_NE(refusal(Engine::Vllm, r).find("GPU 1 appears in two replicas"), std::string::npos);
  r.replicas = {{0, 1, 2}};
  EXPECT_NE(refusal(Engine::Vllm, r).find("needs 2"), std::string::npos);
}

TEST(Export, ShellQuoting) {
  EXPECT_EQ(shell_quote("abc-1.2/x:y,z=w"), "abc-1.2/x:y,z=w");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(shell_quote("~/m"), "'~/m'");
}

// The script as bash runs it: each program replaced by a function printing its arguments and the
// launch's variables, so quoting, here-documents and the environment are checked end to end.
TEST(Export, ScriptRunsUnderBashWithTheLaunchWordsIntact) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("peerplan-export-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ExportRequest r = request(test_plans::tp_pp({{0}, {1}}, 32), 32, "/models/it's a \"model\" $HOME");
  r.plan.name = "pp2\nrm -rf /";  // a name reaching the comment line must not end it
  r.plan.p2p = false;
  r.replicas = {{0, 1}, {2, 3}};
  for (Engine e : {Engine::Vllm, Engine::Trtllm}) {
    EngineExport x = export_plan(e, r);
    const std::string script = (dir / "launch.sh").string(), out = (dir / "out.txt").string();
    std::string shim = "out=" + shell_quote(out) + "\n";
    shim += "show() { printf 'CVD=%s P2P=%s\\n' \"${CUDA_VISIBLE_DEVICES-}\" \"${NCCL_P2P_DISABLE-}\"; printf '[%s]\\n' \"$@\"; }\n";
    // Each call writes its own file: the replicas run concurrently.
    shim += "vllm() { show vllm \"$@\" > \"$(mktemp \"$out.XXXXXX\")\"; }\n";
    shim += "trtllm-serve() { show trtllm-serve \"$@\" > \"$(mktemp \"$out.XXXXXX\")\"; }\n";
    std::string text = render_script(x);
    std::ofstream(script) << text.substr(0, text.find("set -euo")) << shim << text.substr(text.find("set -euo"));
    for (const auto& f : std::filesystem::directory_iterator(dir))
      if (f.path().filename().string().rfind("out.txt", 0) == 0) std::filesystem::remove(f.path());
    ASSERT_EQ(std::system(("cd " + shell_quote(dir.string()) + " && bash " + shell_quote(script)).c_str()), 0) << text;
    std::stringstream got;
    for (const auto& f : std::filesystem::directory_iterator(dir))
      if (f.path().filename().string().rfind("out.txt.", 0) == 0) got << std::ifstream(f.path()).rdbuf();
    std::string want;
    std::vector<Launch> ls = x.launches;  // replicas run in the background: compare as a set of blocks
    for (const Launch& l : ls) {
      std::string block = "CVD=" + env_of(l, "CUDA_VISIBLE_DEVICES") + " P2P=1\n";
      for (const auto& w : l.argv) block += "[" + w + "]\n";
      EXPECT_NE(got.str().find(block), std::string::npos) << "missing launch:\n" << block << "in:\n" << got.str();
    }
    if (e == Engine::Trtllm) {
      std::ifstream yaml(dir / "peerplan-trtllm-1.yaml");
      std::stringstream y;
      y << yaml.rdbuf();
      EXPECT_EQ(y.str(), x.launches[1].files[0].second);
    }
    EXPECT_EQ(text.find("\nrm -rf"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace peerplan

namespace peerplan {
TEST(Export, AReplicatedPlanIsOneLaunchPerCopy) {
  // A plan with `replicas` (data_parallel) exports as its copies, each on its GPUs in plan order.
  ModelConfig cfg = load_model_config(resolve_model_path("llama-3.1-8b"));
  Plan base = test_plans::tp({0, 1}, int(cfg.layers), "tp2[0,1]");
  Plan dp = with_replicas(base, {{0, 1}, {3, 2}}, "least_outstanding");
  Workload w;
  ExportSources src;
  src.model_arg = "llama-3.1-8b";
  ExportRequest r = make_export_request(plan_to_json(dp), "plan.json", cfg, w, src, nullptr);
  EngineExport x = export_plan(Engine::Vllm, r);
  ASSERT_EQ(x.launches.size(), 2u);
  EXPECT_EQ(env_of(x.launches[1], "CUDA_VISIBLE_DEVICES"), "3,2");
  bool said = false;
  for (const auto& n : x.notes) said |= n.find("least_outstanding router") != std::string::npos;
  EXPECT_TRUE(said) << "the notes say which router the plan was priced with";
}

}  // namespace peerplan
