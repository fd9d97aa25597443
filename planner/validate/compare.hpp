#pragma once
// Predicted (simulator) vs measured (executor) metrics: relative errors per metric at p50/p90/p99,
// which targets are met, and where the error comes from (the op class whose per-iteration time
// differs most). CPU only; the executor fills `OpClassTime::measured_s` from CUDA events.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/sim/metrics.hpp"

namespace peerplan {

inline constexpr int kValidationSchemaVersion = 1;

struct MetricComparison {
  std::string metric;      // "tpot_p50", "ttft_p99", "e2e_p90", "output_tokens_per_s", ...
  double predicted = 0;    // seconds, or tokens/s for throughput rows
  double measured = 0;
  double target = 0;       // |rel_error| allowed, 0 = no target for this row
  double rel_error() const;  // (predicted - measured) / measured; 0 when both are 0
  bool has_target() const { return target > 0; }
  bool within_target() const;  // true for rows without a target
};

// Time of one op class (gemm, attention, elementwise, embedding, collective, send) summed over one
// representative iteration, predicted by the cost model and measured with CUDA events.
struct OpClassTime {
  std::string op_class;
  std::string iteration;   // which iteration shape ("decode b=16 ctx=600", "prefill 2048")
  double predicted_s = 0;
  double measured_s = 0;
  double diff_s() const { return predicted_s - measured_s; }
};

struct ErrorTargets {
  double tpot_p50 = 0.05, ttft_p50 = 0.05, e2e_p99 = 0.10;
};

struct Comparison {
  int version = kValidationSchemaVersion;
  std::string plan, model, workload, machine;
  std::vector<MetricComparison> rows;
  std::vector<OpClassTime> op_classes;
  // Attribution: the op class with the largest |predicted - measured| (ties: first listed), and
  // its share of the summed absolute difference over all classes.
  std::string worst_class;
  double worst_class_diff_s = 0;
  double worst_class_share = 0;
  bool targets_met = true;  // every row that has a target is within it
  nlohmann::json context = nlohmann::json::object();  // hardware, driver, versions, date, p2p
  // Reading aids printed under the table (not stored in validation.json): e.g. a median target missed
  // while the mean of the same latency is within it.
  std::vector<std::string> notes;
};

// Builds the rows (TTFT, TPOT, E2E at p50/p90/p99 and mean; output and total tokens/s), the attribution
// and the notes.
Comparison compare_metrics(const Metrics& predicted, const Metrics& measured,
                           const std::vector<OpClassTime>& op_classes, const ErrorTargets& targets = {});

// Two metrics files compared must describe one run: the same plan, model and workload (its name,
// number of requests and prompt tokens). Throws InputError naming both files and every field that
// differs; a field empty in either file (older files) is not compared.
void check_same_run(const Metrics& predicted, const std::string& predicted_file, const Metrics& measured,
                    const std::string& measured_file);
// Reads both metrics files (planner/core/files.hpp caps) and checks them with check_same_run.
std::pair<Metrics, Metrics> load_metrics_pair(const std::string& predicted_file, const std::string& measured_file);

// Which op class differs most; "" when the list is empty or all differences are zero.
std::string worst_op_class(const std::vector<OpClassTime>& classes, double* diff_s = nullptr,
                           double* share = nullptr);

// Terminal table, Markdown report section and versioned JSON ("peerplan.validation").
std::string comparison_table(const Comparison& c);
std::string comparison_markdown(const Comparison& c);
nlohmann::json comparison_to_json(const Comparison& c);
Comparison parse_comparison_json(const nlohmann::json& j, const std::string& origin);

}  // namespace peerplan
