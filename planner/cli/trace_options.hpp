#pragma once
// --trace-window and --trace-speedup, the same on plan, plans, simulate and validate (issue 19):
// replay a slice of a workload's arrival trace, at another load. Together with --rate and
// --requests they make the workload overrides (planner/model/workload.hpp, apply_overrides).
#include <cstdint>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "planner/cli/option_checks.hpp"
#include "planner/model/workload.hpp"

namespace peerplan::cli {

struct TraceSliceOptions {
  std::string window;  // "START:END", "" for the whole trace
  double speedup = 0;  // 0: as recorded
};

inline void add_trace_slice_options(CLI::App* sub, TraceSliceOptions& o) {
  sub->add_option("--trace-window", o.window,
                  "Replay only the requests of the workload's arrival trace that arrive in [START, END) seconds "
                  "from its first request (START: to the end, :END from the start); the first of them at 0")
      ->type_name("START:END");
  sub->add_option("--trace-speedup", o.speedup,
                  "Replay the workload's arrival trace X times faster (X < 1: slower): the same requests at X "
                  "times the load")
      ->type_name("X")
      ->check(finite_in(1e-3, 1e3, "a factor"));
}

// The overrides of one command line; a malformed --trace-window is refused here (InputError).
inline WorkloadOverrides workload_overrides(double rate, int64_t requests, const TraceSliceOptions& t) {
  WorkloadOverrides o;
  o.rate_rps = rate;
  o.num_requests = requests;
  if (!t.window.empty()) o.trace_window = parse_trace_window(t.window);
  o.trace_speedup = t.speedup;
  return o;
}

// What loading and slicing the workload has to tell (rows skipped, the slice replayed), on stderr.
inline void print_workload_notes(const Workload& w) {
  for (const std::string& note : w.notes) std::cerr << "peerplan: note: " << note << "\n";
}

}  // namespace peerplan::cli
