#pragma once
// Fuzz target "plan": a plan JSON through parse_plan_json, validate_plan against a dense and an MoE
// model on an 8-GPU machine, the memory check and the plan compiler. Invariants: a validated plan
// compiles; plan_to_json round-trips to the same JSON.
#include <string>

#include "planner/compile/compiler.hpp"
#include "planner/core/json_in.hpp"
#include "planner/plan/plan.hpp"
#include "tests/fuzz/fixtures.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

inline bool fuzz_plan(const std::string& data) {
  const std::string origin = "fuzz/plan.json";
  const Topology& topo = eight_gpus();
  Plan p;
  if (!accepts(origin, [&] { p = parse_plan_json(parse_json_text(data, origin), origin); })) return false;
  const nlohmann::json out = plan_to_json(p);
  Plan again;
  FUZZ_CHECK(accepts(origin, [&] { again = parse_plan_json(out, origin); }), "plan_to_json output rejected: " + out.dump());
  FUZZ_CHECK(plan_to_json(again) == out, "plan JSON does not round-trip: " + out.dump());
  bool any = false;
  for (const ModelFixture* m : {&dense_model(), &moe_model()}) {
    bool valid = accepts(origin, [&] { validate_plan(p, m->cfg.layers, m->cfg.experts, topo.gpu_count(), origin); });
    if (!valid) continue;
    any = true;
    MemoryOptions mem;
    mem.max_seqs = 8;
    mem.context = 1024;
    mem.max_batched_tokens = 512;
    (void)check_memory(p, m->cfg, m->fig, topo.machine(), mem);
    BatchShape shape;
    shape.prefill_seqs = 1;
    shape.prefill_tokens = 64;
    shape.prefill_context = 64;
    shape.decode_seqs = 4;
    shape.decode_context = 256;
    OpGraph g = compile_iteration(p, m->cfg, m->fig, topo.machine(), shape);
    FUZZ_CHECK(!g.ops.empty(), "a valid plan compiled to no ops");
  }
  return any;
}

}  // namespace peerplan::fuzz
