#include "profiler/common/env_switch.hpp"

#include <string>

#include "planner/compile/act_fusion.hpp"
#include "planner/core/error.hpp"

namespace peerplan::exec {

int env_tristate(const char* var, const char* value, const char* meaning) {
  if (!value || !*value) return -1;
  const std::string v = value;
  if (v == "0") return 0;
  if (v == "1") return 1;
  throw RuntimeError(std::string(var) + "=" + v + ": expected 0 or 1 (" + meaning +
                     "; unset: as the profile's executor ran)");
}

int fused_act_from_env(const char* value) {
  if (value && std::string(value) == "all") return kActEverywhere;
  return env_tristate("PEERPLAN_FUSED_ACT", value,
                      "1: a gated MLP's SiLU(gate) * up in the gate_up GEMV's epilogue at decode where that is "
                      "faster (bf16 GEMV, W4A16), all: wherever a kernel can (the int8 GEMV and routed experts too), "
                      "0: always a separate activation kernel");
}

std::vector<std::string> skip_ops_from_env(const char* value) {
  std::vector<std::string> pieces;
  if (!value || !*value) return pieces;
  const std::string v = value;
  for (size_t b = 0;;) {
    const size_t e = v.find(',', b);
    std::string piece = v.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (piece.empty())
      throw RuntimeError("PEERPLAN_SKIP_OPS=" + v + ": an empty piece; expected comma-separated pieces of op names "
                         "(\"shared.,shared_gate\": the ops whose names contain one are not launched)");
    pieces.push_back(std::move(piece));
    if (e == std::string::npos) return pieces;
    b = e + 1;
  }
}

bool op_skipped(const std::string& name, const std::vector<std::string>& pieces) {
  for (const std::string& p : pieces)
    if (name.find(p) != std::string::npos) return true;
  return false;
}

}  // namespace peerplan::exec
