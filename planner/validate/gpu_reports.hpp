#pragma once
// Reports of GPU runs, from what the backend returns (CPU only): the iteration report of a
// validation, the step table of --bench-steps and the kernel table of --self-test.
#include <string>

#include <nlohmann/json.hpp>

#include "planner/sim/iteration_cost.hpp"
#include "planner/validate/gpu_backend.hpp"

namespace peerplan {

// Where measured time goes, iteration by iteration: each executed iteration's GPU span (CUDA
// events) next to the simulator's price of the same shape, host enqueue / scheduling gap /
// wake-up times per kind of iteration, and each request's queue wait before its first iteration.
// The "peerplan.iterations" JSON (version 1); *table (if given) gets the terminal summary.
nlohmann::json iteration_report(const ServeResult& res, PlanPricer& pricer, std::string* table);

// `validate --bench-steps`: the terminal table and the steps.json document.
std::string bench_table(const std::vector<StepBench>& rows, const std::string& title);
nlohmann::json bench_json(const std::vector<StepBench>& rows, const std::string& plan, const std::string& model,
                          const nlohmann::json& host_context);
// The rows of a steps.json that bench_json wrote (`validate --reprice`); errors name the file and the field.
// *plan and *model (if given) get the names it records. Files before "tokens" was written: a prefill row's
// tokens are its context (what --bench-steps times), a decode row's its batch.
std::vector<StepBench> bench_rows_from_json(const std::string& path, std::string* plan = nullptr,
                                            std::string* model = nullptr);

// `validate --self-test`: one row per kernel; *all_pass says whether every row passed.
std::string self_test_table(const std::vector<SelfTestResult>& rows, int device, bool* all_pass);

}  // namespace peerplan
