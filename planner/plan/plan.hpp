#pragma once
// A partitioning plan (versioned JSON, docs/schema.md): what a Lua strategy returns and what the
// plan compiler, the simulator and the executor consume.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/plan/allreduce_rule.hpp"

namespace peerplan {

inline constexpr int kPlanSchemaVersion = 1;

struct PlanStage {
  std::vector<int> gpus;      // ordered; the stage's TP group is gpus[0..tp), tp == gpus.size()
  int64_t layer_begin = 0;    // [layer_begin, layer_end) of the model's decoder layers
  int64_t layer_end = 0;
  int tp = 1;
  bool embeddings = false;    // this stage holds the token embedding (the first stage)
  bool lm_head = false;       // this stage holds the final norm + LM head (the last stage)
};

struct Plan {
  int version = kPlanSchemaVersion;
  std::string name;           // unique, human readable: "tp2[0,1]", "pp2[0|1]"
  std::string strategy;       // the strategy that produced it
  std::vector<PlanStage> stages;
  // Expert parallelism for MoE layers: experts are spread over `ep` GPUs; expert_gpu[e] is the
  // GPU holding routed expert e (empty for dense models or ep == 1).
  int ep = 1;
  std::vector<int> expert_gpu;
  std::string ep_attention = "tp";  // "tp": attention sharded over the EP GPUs; "replicated": each holds it
  // Transfer mode at each stage boundary i -> i+1: "peer" or "host_staged". size == stages - 1.
  std::vector<std::string> boundary_modes;
  bool p2p = true;            // collectives may use P2P (false: as NCCL_P2P_DISABLE=1)
  // Which all-reduce the TP groups run (allreduce_rule.hpp): NCCL, peer-memory kernels, or an
  // engine's rule. JSON "allreduce", written only when not "nccl" (plans before it read as nccl).
  ArSetting allreduce = ArSetting::Nccl;
  int micro_batches = 1;      // pipeline micro-batches in flight
  std::vector<std::string> notes;  // why the script proposed it
  nlohmann::json extra = nlohmann::json::object();  // free-form script data, kept verbatim
  // Data-parallel replicas: R copies of this plan's shape, each on its own GPUs, behind a router
  // that sends each request to one of them. replicas[r] lists replica r's GPUs position for
  // position with gpu_order() (stage 0's GPUs, then stage 1's, ...), so replicas[0] is the
  // plan's own order. Empty: one replica (the plan as written).
  std::vector<std::vector<int>> replicas;
  std::string router = "round_robin";  // see kRouters

  int replica_count() const { return replicas.empty() ? 1 : int(replicas.size()); }
  std::vector<int> gpu_order() const;  // replica 0's GPUs: stage 0's, then stage 1's, ...
  std::vector<int> all_gpus() const;   // every replica's GPUs, sorted, unique
  int num_gpus() const { return int(all_gpus().size()); }
};

// How a replicated plan's router picks a replica for each arriving request:
//   round_robin        the i-th arrival goes to replica i mod R (vLLM/SGLang's DP default)
//   least_outstanding  the replica with the fewest requests arrived and not finished (ties: lowest index)
//   session_affinity   by a hash of the request's session (every request of a session on one replica)
inline const std::vector<std::string> kRouters = {"round_robin", "least_outstanding", "session_affinity"};

// The plan replica r runs: GPU ids mapped from replicas[0] to replicas[r] (stages and expert_gpu),
// no replicas of its own; the name gains "@r<r>". replica_plan(p, 0) is p without its replicas.
Plan replica_plan(const Plan& p, int r);
// `base` (one replica) repeated on `groups`, each listing GPUs position for position with
// base.gpu_order(); groups[0] must be base.gpu_order(). Throws InputError when sizes differ.
Plan with_replicas(const Plan& base, const std::vector<std::vector<int>>& groups, const std::string& router);

// Validates structure against the model and machine: layers covered exactly once and in order,
// tp == gpus.size(), GPU ids exist, no GPU twice in one stage, expert map sized to the experts,
// boundary modes valid. Throws InputError naming `origin` and the field.
void validate_plan(const Plan& p, int64_t model_layers, int64_t model_experts, int machine_gpus,
                   const std::string& origin);

// validate_plan plus what only the model config can tell: attention heads divisible by each
// stage's TP degree, KV heads dividing it or replicated (tp a multiple of them). A plan that passes
// compiles (compile_iteration, check_memory) without InputError.
struct ModelConfig;
void validate_plan_for_model(const Plan& p, const ModelConfig& cfg, int machine_gpus, const std::string& origin);

Plan load_plan(const std::string& path);  // the object itself, or {"plans":[...]} with exactly one
Plan parse_plan_json(const nlohmann::json& j, const std::string& origin);
nlohmann::json plan_to_json(const Plan& p);

}  // namespace peerplan
