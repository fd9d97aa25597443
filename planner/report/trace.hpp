#pragma once
// Chrome trace-event JSON (opens in Perfetto / chrome://tracing): the first stage executions of a
// serving simulation, expanded op by op. One track per GPU compute stream and copy engine, one per
// link carrying point-to-point traffic (merged busy spans: concurrent flows share a link, so the
// track shows when it was busy and how many bytes crossed), and one per pipeline stage with the
// iteration spans. Events on one track never overlap; op events nest inside their stage span.
#include <nlohmann/json.hpp>

#include "planner/cost/cost_model.hpp"
#include "planner/sim/iteration_cost.hpp"
#include "planner/sim/serving.hpp"

namespace peerplan {

nlohmann::json chrome_trace(const Plan& plan, const ModelConfig& cfg, const ModelFigures& fig, const CostModel& cost,
                            const ServingRun& run, const PricerOptions& popt, const nlohmann::json& provenance);

}  // namespace peerplan
