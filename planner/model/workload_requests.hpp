#pragma once
// A workload's requests, produced lazily in arrival order from its seed, so a run of 10^7
// requests holds the ones in flight, not all of them (32 B each: 305 MiB at 10^7 when they were
// a vector). Every stream over one workload yields the identical sequence, so each candidate of a
// search gets its own stream and all of them see the same requests.
#include <cstdint>
#include <random>
#include <vector>

#include "planner/model/workload.hpp"

namespace peerplan {

// Requests in arrival order, read once from the front.
class RequestStream {
 public:
  virtual ~RequestStream() = default;
  virtual bool next(Request& r) = 0;  // the next request; false after the last
  virtual int64_t total() const = 0;  // how many next() yields in all
};

// Over a caller's vector, in its order (tests, hand-built requests).
class VectorStream final : public RequestStream {
 public:
  explicit VectorStream(const std::vector<Request>& r) : reqs_(r) {}
  bool next(Request& r) override {
    if (pos_ >= reqs_.size()) return false;
    r = reqs_[pos_++];
    return true;
  }
  int64_t total() const override { return int64_t(reqs_.size()); }

 private:
  const std::vector<Request>& reqs_;
  size_t pos_ = 0;
};

class RequestSource;

// One pass over a workload's requests: ids 0..total()-1 in arrival order. Drawn from three
// seeded streams (arrivals, prompts, outputs) exactly as the old vector was, request by request.
class WorkloadStream final : public RequestStream {
 public:
  bool next(Request& r) override;
  int64_t total() const override { return total_; }

 private:
  friend class RequestSource;
  WorkloadStream(const Workload& w, int64_t rows, int64_t total, bool drop);
  bool raw(Request& r);  // request i as drawn, before any drop

  const Workload* w_;
  std::mt19937_64 arrivals_, prompts_, outputs_, sessions_;
  int64_t rows_, total_, i_ = 0, emitted_ = 0;
  double t_ = 0;
  bool drop_;
};

// The requests of one workload: checked once (the count; prompts over the bound model context
// refused as InputError naming the workload and the model, or counted as dropped under
// drop_over_context), then any number of independent streams. Holds a pointer: `w` must outlive
// the source and its streams, unchanged.
class RequestSource {
 public:
  explicit RequestSource(const Workload& w);
  WorkloadStream stream() const { return WorkloadStream(*w_, rows_, total_, drop_); }
  int64_t size() const { return total_; }     // requests served
  int64_t dropped() const { return dropped_; }  // over the context, dropped (drop_over_context)
  std::vector<Request> all() const;           // every request, materialised (small runs, executors)

 private:
  const Workload* w_;
  int64_t rows_ = 0, total_ = 0, dropped_ = 0;
  bool drop_ = false;
};

}  // namespace peerplan
