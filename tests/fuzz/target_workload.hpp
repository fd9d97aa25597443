#pragma once
// Fuzz target "workload": a workload JSON through the loader, the length distributions and (for
// small request counts) request generation. Invariants: rates, limits and SLOs of an accepted
// workload are positive and finite; every generated request has >= 1 prompt and output token and
// arrivals never go back in time.
#include <cmath>
#include <random>
#include <string>

#include "planner/model/workload.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace peerplan::fuzz {

inline bool fuzz_workload(const std::string& data) {
  const std::string origin = "fuzz/workload.json";
  return accepts(origin, [&] {
    Workload w = parse_workload(data, origin);
    if (w.arrival == Workload::Arrival::Poisson)
      FUZZ_CHECK(std::isfinite(w.rate_rps) && w.rate_rps > 0, "Poisson rate " + std::to_string(w.rate_rps));
    FUZZ_CHECK(w.max_num_seqs > 0 && w.max_batched_tokens > 0, "batching limits must be positive");
    FUZZ_CHECK(w.slo_ttft_s > 0 && w.slo_tpot_s > 0 && w.slo_e2e_p99_s > 0, "SLOs must be positive");
    std::mt19937_64 rng(7);
    for (const LengthDist* d : {&w.prompt, &w.output}) {
      FUZZ_CHECK(std::isfinite(d->mean()), "a length distribution with a non-finite mean");
      for (int i = 0; i < 16; ++i) FUZZ_CHECK(d->sample(rng) >= 1, "a sampled length below 1");
    }
    FUZZ_CHECK(w.max_context() >= 2, "max_context below prompt 1 + output 1");
    if (w.num_requests <= 200) {  // enough to cover every branch; larger counts only cost time
      auto reqs = w.generate();
      double last = -1;
      for (const auto& r : reqs) {
        FUZZ_CHECK(r.prompt_tokens >= 1 && r.output_tokens >= 1, "a request with no tokens");
        FUZZ_CHECK(std::isfinite(r.arrival_s) && r.arrival_s >= last, "arrivals must be finite and ordered");
        FUZZ_CHECK(r.prompt_tokens + r.output_tokens <= w.max_context(), "a request longer than max_context()");
        last = r.arrival_s;
      }
    }
  });
}

}  // namespace peerplan::fuzz
