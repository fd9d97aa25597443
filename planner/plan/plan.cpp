#include "planner/plan/plan.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"
#include "planner/plan/sharding.hpp"
#include "planner/core/json_in.hpp"
#include "planner/core/suggest.hpp"
#include "planner/model/model_config.hpp"

namespace peerplan {

std::vector<int> Plan::gpu_order() const {
  std::vector<int> order;
  for (const auto& st : stages)
    for (int g : st.gpus)
      if (std::find(order.begin(), order.end(), g) == order.end()) order.push_back(g);
  return order;
}

std::vector<int> Plan::all_gpus() const {
  std::set<int> s;
  for (const auto& st : stages) s.insert(st.gpus.begin(), st.gpus.end());
  for (const auto& rep : replicas) s.insert(rep.begin(), rep.end());
  return {s.begin(), s.end()};
}

Plan replica_plan(const Plan& p, int r) {
  Plan out = p;
  out.replicas.clear();
  out.router = "round_robin";
  if (p.replicas.empty() || r == 0) return out;
  const std::vector<int>& from = p.replicas.at(0);
  const std::vector<int>& to = p.replicas.at(size_t(r));
  auto map = [&](int g) {
    auto it = std::find(from.begin(), from.end(), g);
    if (it == from.end() || to.size() != from.size())
      throw InputError(p.name, fmt::format("replicas/{}", r), "as many GPUs as replicas/0, position for position");
    return to[size_t(it - from.begin())];
  };
  for (auto& st : out.stages)
    for (int& g : st.gpus) g = map(g);
  for (int& g : out.expert_gpu) g = map(g);
  out.name = fmt::format("{}@r{}", p.name, r);
  return out;
}

Plan with_replicas(const Plan& base, const std::vector<std::vector<int>>& groups, const std::string& router) {
  Plan p = base;
  const std::vector<int> order = base.gpu_order();
  if (groups.empty() || groups[0] != order)
    throw InputError(base.name, "replicas/0", fmt::format("the plan's own GPUs in order [{}]", fmt::join(order, ",")));
  for (size_t r = 0; r < groups.size(); ++r)
    if (groups[r].size() != order.size())
      throw InputError(base.name, fmt::format("replicas/{}", r), fmt::format("{} GPUs (as the plan's own)", order.size()));
  p.replicas = groups.size() > 1 ? groups : std::vector<std::vector<int>>{};
  p.router = router;
  return p;
}

namespace {
void validate_replicas(const Plan& p, int machine_gpus, const std::string& origin) {
  auto fail = [&](const std::string& field, const std::string& expected) { throw InputError(origin, field, expected); };
  if (std::find(kRouters.begin(), kRouters.end(), p.router) == kRouters.end())
    fail("router", one_of_with_suggestion(p.router, kRouters));
  if (p.replicas.empty()) return;
  const std::vector<int> order = p.gpu_order();
  if (p.replicas.size() < 2) fail("replicas", "at least 2 GPU lists (or no replicas key: one replica)");
  if (p.replicas[0] != order)
    fail("replicas/0", fmt::format("the plan's own GPUs in stage order [{}] (replica 0 is the plan as written), got [{}]",
                                   fmt::join(order, ","), fmt::join(p.replicas[0], ",")));
  std::set<int> used;
  for (size_t r = 0; r < p.replicas.size(); ++r) {
    const auto& rep = p.replicas[r];
    if (rep.size() != order.size())
      fail(fmt::format("replicas/{}", r), fmt::format("{} GPUs, position for position with replica 0, got {}",
                                                     order.size(), rep.size()));
    for (size_t g = 0; g < rep.size(); ++g) {
      const int id = rep[g];
      if (id < 0 || id >= machine_gpus)
        fail(fmt::format("replicas/{}/{}", r, g), fmt::format("a GPU id in 0..{} (the machine has {} GPUs), got {}",
                                                             machine_gpus - 1, machine_gpus, id));
      if (!used.insert(id).second)
        fail(fmt::format("replicas/{}/{}", r, g), fmt::format("GPU {} in one replica only (replicas share no GPU)", id));
    }
  }
}
}  // namespace

void validate_plan(const Plan& p, int64_t model_layers, int64_t model_experts, int machine_gpus,
                   const std::string& origin) {
  auto fail = [&](const std::string& field, const std::string& expected) {
    throw InputError(origin, field, expected);
  };
  if (p.version != kPlanSchemaVersion)
    fail("version", fmt::format("plan schema version {} (this peerplan reads version {})", p.version, kPlanSchemaVersion));
  if (p.name.empty()) fail("name", "a non-empty plan name, e.g. \"tp2[0,1]\"");
  if (p.stages.empty()) fail("stages", "at least one stage");
  std::set<int> seen_any;
  int64_t next_layer = 0;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    std::string f = fmt::format("stages/{}", i);
    if (st.gpus.empty()) fail(f + "/gpus", "a non-empty list of GPU ids");
    if (st.tp != int(st.gpus.size()))
      fail(f + "/tp", fmt::format("tp equal to the number of GPUs in the stage ({}), got {}", st.gpus.size(), st.tp));
    std::set<int> seen;
    for (size_t g = 0; g < st.gpus.size(); ++g) {
      int id = st.gpus[g];
      if (id < 0 || id >= machine_gpus)
        fail(fmt::format("{}/gpus/{}", f, g), fmt::format("a GPU id in 0..{} (the machine has {} GPUs), got {}",
                                                          machine_gpus - 1, machine_gpus, id));
      if (!seen.insert(id).second) fail(fmt::format("{}/gpus/{}", f, g), fmt::format("GPU {} only once per stage", id));
      if (!seen_any.insert(id).second)
        fail(fmt::format("{}/gpus/{}", f, g), fmt::format("GPU {} in one stage only (it already holds an earlier stage)", id));
    }
    if (st.layer_begin != next_layer)
      fail(f + "/layer_begin", fmt::format("{} (stages must cover the layers contiguously, in order, from 0)", next_layer));
    if (st.layer_end <= st.layer_begin)
      fail(f + "/layer_end", fmt::format("greater than layer_begin ({}), got {}", st.layer_begin, st.layer_end));
    next_layer = st.layer_end;
    if (st.embeddings != (i == 0)) fail(f + "/embeddings", i == 0 ? "true on the first stage" : "false except on the first stage");
    if (st.lm_head != (i + 1 == p.stages.size()))
      fail(f + "/lm_head", i + 1 == p.stages.size() ? "true on the last stage" : "false except on the last stage");
  }
  if (next_layer != model_layers)
    fail(fmt::format("stages/{}/layer_end", p.stages.size() - 1),
         fmt::format("{} (the model has {} layers; every layer must belong to one stage), got {}", model_layers,
                     model_layers, next_layer));
  if (p.boundary_modes.size() != p.stages.size() - 1)
    fail("boundary_modes", fmt::format("{} entries (one per stage boundary), got {}", p.stages.size() - 1,
                                        p.boundary_modes.size()));
  for (size_t i = 0; i < p.boundary_modes.size(); ++i)
    if (p.boundary_modes[i] != "peer" && p.boundary_modes[i] != "host_staged")
      fail(fmt::format("boundary_modes/{}", i), "\"peer\" or \"host_staged\", got \"" + p.boundary_modes[i] + "\"");
  if (p.micro_batches < 1) fail("micro_batches", "an integer >= 1");
  if (!p.p2p && p.allreduce == ArSetting::Custom)
    fail("allreduce", "not \"custom\" with p2p false: peer-memory kernels need P2P (use \"nccl\" or an engine's auto)");
  validate_replicas(p, machine_gpus, origin);
  if (p.ep_attention != "tp" && p.ep_attention != "replicated")
    fail("ep_attention", "\"tp\" or \"replicated\", got \"" + p.ep_attention + "\"");
  if (p.ep < 1) fail("ep", "an integer >= 1");
  if (p.ep == 1) {
    if (!p.expert_gpu.empty()) fail("expert_gpu", "empty when ep is 1 (every GPU of a stage holds all experts)");
    return;
  }
  if (model_experts <= 0) fail("ep", "1: the model has no routed experts");
  if (p.ep > model_experts) fail("ep", fmt::format("at most the number of experts ({}), got {}", model_experts, p.ep));
  // EP spans each stage's GPUs (docs in plugins/README.md): expert e sits at the same rank position
  // in every stage; expert_gpu names the GPUs of the first stage.
  for (size_t i = 0; i < p.stages.size(); ++i)
    if (int(p.stages[i].gpus.size()) != p.ep)
      fail(fmt::format("stages/{}/gpus", i), fmt::format("{} GPUs (ep = {}: every stage is one EP group)", p.ep, p.ep));
  if (int64_t(p.expert_gpu.size()) != model_experts)
    fail("expert_gpu", fmt::format("{} entries (one GPU per routed expert), got {}", model_experts, p.expert_gpu.size()));
  std::set<int> used;
  const auto& first = p.stages[0].gpus;
  for (size_t e = 0; e < p.expert_gpu.size(); ++e) {
    if (std::find(first.begin(), first.end(), p.expert_gpu[e]) == first.end())
      fail(fmt::format("expert_gpu/{}", e),
           fmt::format("a GPU of the first stage {}, got {}", fmt::join(first, ","), p.expert_gpu[e]));
    // Each GPU's experts one block of consecutive ids: the executor routes and runs [first, first + count)
    // (sharding.cpp expert_block); caught here so a validated plan always compiles (fuzz, plan target).
    if (e > 0 && p.expert_gpu[e] != p.expert_gpu[e - 1] && used.count(p.expert_gpu[e]))
      fail("expert_gpu",
           fmt::format("each GPU's experts as one contiguous block of expert ids (the executor routes and runs "
                       "[first, first + count)); GPU {} holds experts before {} and expert {} again",
                       p.expert_gpu[e], e - 1, e));
    used.insert(p.expert_gpu[e]);
  }
  if (int(used.size()) != p.ep)
    fail("expert_gpu", fmt::format("experts spread over all {} EP GPUs, but only {} hold any", p.ep, used.size()));
}

void validate_plan_for_model(const Plan& p, const ModelConfig& cfg, int machine_gpus, const std::string& origin) {
  validate_plan(p, cfg.layers, cfg.experts, machine_gpus, origin);
  try {
    check_shardable(p, cfg);
  } catch (const InputError& e) {
    throw InputError(origin, e.field(), e.expected());  // name where the plan came from, not just its name
  }
}

namespace {
// Integer fields are C++ ints: refuse values that would wrap (4294967296 must not become GPU 0).
int small_int(const JsonIn& node, int64_t v, const std::string& key) {
  if (v < -1000000 || v > 1000000) node.fail(key, "an integer between -1000000 and 1000000, got " + std::to_string(v));
  return int(v);
}
// A key the plan schema does not have is an error naming the nearest valid key: a misspelt
// "micro_batch" or "boundary_mode" must not silently take its default.
void check_keys(const JsonIn& node, const std::vector<std::string>& valid, const std::vector<std::string>& ignored = {}) {
  for (auto it = node.raw().begin(); it != node.raw().end(); ++it) {
    const std::string& k = it.key();
    if (std::find(valid.begin(), valid.end(), k) != valid.end()) continue;
    if (std::find(ignored.begin(), ignored.end(), k) != ignored.end()) continue;
    node.fail(k, "a known key: " + one_of_with_suggestion(k, valid) + "; this key is not part of the plan schema");
  }
}

const std::vector<std::string> kPlanKeys = {"version", "name", "strategy", "stages", "ep", "expert_gpu", "ep_attention",
                                            "boundary_modes", "p2p", "allreduce", "micro_batches", "notes", "extra",
                                            "replicas", "router"};
// Written next to a plan by `peerplan plans --json` / `--out`: read back without complaint, not used.
const std::vector<std::string> kPlanReportKeys = {"memory", "strategy_file"};
const std::vector<std::string> kStageKeys = {"gpus", "layer_begin", "layer_end", "tp", "embeddings", "lm_head"};

}  // namespace

Plan parse_plan_json(const nlohmann::json& j, const std::string& origin) {
  JsonIn in(j, origin);
  if (!in.is_object()) in.fail("", "a plan object");
  check_keys(in, kPlanKeys, kPlanReportKeys);
  Plan p;
  p.version = int(in.integer_or("version", kPlanSchemaVersion));
  if (p.version != kPlanSchemaVersion)
    in.fail("version", fmt::format("{} (this peerplan reads plan schema version {}; regenerate the plan)",
                                   kPlanSchemaVersion, kPlanSchemaVersion));
  p.name = in.str("name");
  p.strategy = in.str_or("strategy", "");
  auto stages = in.array("stages");
  for (size_t i = 0; i < stages.size(); ++i) {
    JsonIn s = stages[i];
    if (!s.is_object()) s.fail("", "a stage object {gpus, layer_begin, layer_end, tp}");
    check_keys(s, kStageKeys);
    PlanStage st;
    auto gpus = s.array("gpus");
    for (size_t g = 0; g < gpus.size(); ++g) st.gpus.push_back(small_int(gpus, gpus[g].as_integer(), std::to_string(g)));
    st.layer_begin = s.nonnegative_int("layer_begin");
    st.layer_end = s.nonnegative_int("layer_end");
    st.tp = small_int(s, s.integer_or("tp", int64_t(st.gpus.size())), "tp");
    st.embeddings = s.boolean_or("embeddings", i == 0);
    st.lm_head = s.boolean_or("lm_head", i + 1 == stages.size());
    p.stages.push_back(std::move(st));
  }
  p.ep = small_int(in, in.integer_or("ep", 1), "ep");
  if (auto eg = in.opt("expert_gpu")) {
    if (!eg->is_array()) in.fail("expert_gpu", "an array of GPU ids, one per routed expert");
    for (size_t e = 0; e < eg->size(); ++e) p.expert_gpu.push_back(small_int(*eg, (*eg)[e].as_integer(), std::to_string(e)));
  }
  p.ep_attention = in.str_or("ep_attention", "tp");
  if (auto bm = in.opt("boundary_modes")) {
    if (!bm->is_array()) in.fail("boundary_modes", "an array of \"peer\" / \"host_staged\"");
    for (size_t b = 0; b < bm->size(); ++b) p.boundary_modes.push_back((*bm)[b].as_str());
  } else {
    p.boundary_modes.assign(p.stages.empty() ? 0 : p.stages.size() - 1, "peer");
  }
  p.p2p = in.boolean_or("p2p", true);
  const std::string ar = in.str_or("allreduce", "nccl");
  try {
    p.allreduce = allreduce_setting_from_string(ar);
  } catch (const std::invalid_argument&) {
    in.fail("allreduce", one_of_with_suggestion(ar, allreduce_setting_names()));
  }
  p.micro_batches = small_int(in, in.integer_or("micro_batches", 1), "micro_batches");
  if (auto notes = in.opt("notes")) {
    if (notes->is_array()) {
      for (size_t n = 0; n < notes->size(); ++n) p.notes.push_back((*notes)[n].as_str());
    } else {
      p.notes.push_back(in.str("notes"));
    }
  }
  if (auto ex = in.opt("extra")) p.extra = ex->raw();
  if (auto reps = in.opt("replicas")) {
    if (!reps->is_array()) in.fail("replicas", "an array of GPU-id arrays, one per replica, each in the plan's GPU order");
    for (size_t r = 0; r < reps->size(); ++r) {
      JsonIn rep = (*reps)[r];
      if (!rep.is_array()) reps->fail(std::to_string(r), "an array of GPU ids");
      std::vector<int> ids;
      for (size_t g = 0; g < rep.size(); ++g) ids.push_back(small_int(rep, rep[g].as_integer(), std::to_string(g)));
      p.replicas.push_back(std::move(ids));
    }
  }
  p.router = in.str_or("router", "round_robin");
  return p;
}

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json j;
  j["version"] = p.version;
  j["name"] = p.name;
  j["strategy"] = p.strategy;
  j["stages"] = nlohmann::json::array();
  for (const auto& st : p.stages)
    j["stages"].push_back({{"gpus", st.gpus}, {"layer_begin", st.layer_begin}, {"layer_end", st.layer_end},
                           {"tp", st.tp}, {"embeddings", st.embeddings}, {"lm_head", st.lm_head}});
  j["ep"] = p.ep;
  j["expert_gpu"] = p.expert_gpu;
  j["ep_attention"] = p.ep_attention;
  j["boundary_modes"] = p.boundary_modes;
  j["p2p"] = p.p2p;
  if (p.allreduce != ArSetting::Nccl) j["allreduce"] = to_string(p.allreduce);
  j["micro_batches"] = p.micro_batches;
  j["notes"] = p.notes;
  j["extra"] = p.extra;
  if (!p.replicas.empty()) {  // only when replicated: one-replica plans read and write as before
    j["replicas"] = p.replicas;
    j["router"] = p.router;
  }
  return j;
}

Plan load_plan(const std::string& path) {
  nlohmann::json j = load_json_file(path, file_kind::kPlan);
  if (j.is_object() && j.contains("plans") && !j.contains("stages")) {
    const auto& plans = j["plans"];
    if (!plans.is_array() || plans.size() != 1)
      throw InputError(path, "/plans", "exactly one plan (write the chosen plan alone, or pick one from this list)");
    // Errors inside name the plan's position so the user can find it.
    return parse_plan_json(plans[0], path + " (plans[0])");
  }
  return parse_plan_json(j, path);
}

}  // namespace peerplan
