#pragma once
// The serving scheduler: vLLM-like continuous batching with NO notion of time. The simulator drives
// it with simulated time and the executor with real GPU iterations, so predicted and measured
// metrics come from the very same batching decisions.
//
// Driver loop (either clock):
//   sched.add_request(r)                       when r arrives (by the driver's clock)
//   while (auto it = sched.next_iteration())   form up to `micro_batches` iterations in flight
//     run it (simulate or execute)
//   events = sched.complete_iteration(*it)     when an iteration finishes: first tokens, finishes
//
// Policy (vLLM's defaults):
//  - chunked_prefill == false: if a waiting request can be admitted, the iteration is a
//    prefill-only batch (FCFS, limited by max_num_seqs, max_batched_tokens and KV capacity);
//    otherwise it decodes every running sequence that is not already in flight.
//  - chunked_prefill == true: decodes go first (one token each), then the remaining token budget
//    continues partially prefilled prompts, then admits new ones, chunking the last to fit.
//  - A prompt longer than max_batched_tokens without chunked prefill is admitted alone (vLLM
//    rejects it; we would rather serve it and let the op graph show the large batch).
//  - KV capacity (kv_capacity_tokens > 0) is reserved at admission for prompt + output tokens,
//    so no sequence is ever preempted (vLLM allocates lazily and preempts; reserving keeps the
//    schedule deterministic and identical between simulator and executor).
//  - Pipelines: up to `micro_batches` iterations may be in flight at once; a sequence is in at
//    most one of them, so the next micro-batch takes sequences the previous ones did not.
// The first output token of a request is produced by the iteration that completes its prefill;
// each later decode iteration produces one more token.
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "planner/compile/op_graph.hpp"
#include "planner/model/workload.hpp"

namespace peerplan {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;         // sequences admitted (running) at once
  int64_t max_batched_tokens = 8192;  // new tokens in one iteration
  bool chunked_prefill = false;
  int micro_batches = 1;              // iterations in flight at once (pipeline depth)
  int64_t kv_capacity_tokens = 0;     // KV cache capacity in tokens; 0 = limited by max_num_seqs only

  static SchedulerConfig from_workload(const Workload& w, int micro_batches = 1);
};

// One sequence's part in one iteration.
struct SeqWork {
  int64_t request_id = 0;
  int64_t new_tokens = 0;   // prefill: chunk length; decode: 1
  int64_t context = 0;      // tokens it attends to after this iteration's tokens are added
  bool prefill = false;
  bool completes_prefill = false;  // prefill chunk that ends the prompt: emits the first token
};

struct Iteration {
  int64_t index = 0;        // 0, 1, 2, ... in the order they were formed
  int slot = 0;             // micro-batch slot among those in flight (0 .. micro_batches-1)
  std::vector<SeqWork> seqs;
  BatchShape shape;         // what the plan compiler needs to build the op graph
  bool empty() const { return seqs.empty(); }
};

struct SchedulerEvent {
  enum class Kind { FirstToken, Token, Finished } kind = Kind::Token;
  int64_t request_id = 0;
  int64_t tokens_generated = 0;  // output tokens of this request so far (after this event)
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig cfg);

  const SchedulerConfig& config() const { return cfg_; }

  // Queues a request (it is "waiting" until admitted). Throws InputError for a request with
  // prompt_tokens < 1, output_tokens < 1, a duplicate id, or one that can never fit the KV cache.
  void add_request(const Request& r);

  // Forms the next iteration from sequences that are not already in flight, or nullopt if none
  // can be formed now (nothing to do, or `micro_batches` iterations already in flight).
  std::optional<Iteration> next_iteration();

  // Marks an in-flight iteration done; returns what happened, in sequence order. Throws
  // RuntimeError for an iteration that is not in flight.
  std::vector<SchedulerEvent> complete_iteration(const Iteration& it);

  size_t waiting() const { return waiting_.size(); }
  size_t running() const { return running_.size(); }
  size_t in_flight() const { return in_flight_.size(); }
  int64_t finished() const { return finished_; }
  int64_t kv_tokens_reserved() const { return kv_reserved_; }
  bool idle() const { return waiting_.empty() && running_.empty(); }

 private:
  struct Seq {
    Request req;
    int64_t prefilled = 0;   // prompt tokens already in the KV cache
    int64_t generated = 0;   // output tokens produced
    bool busy = false;       // part of an in-flight iteration
    int64_t admit_order = 0;
  };
  bool can_admit(const Seq& s, int64_t admitted_now) const;
  void admit(int64_t id);
  void finalize_shape(Iteration& it) const;

  SchedulerConfig cfg_;
  std::unordered_map<int64_t, Seq> seqs_;  // waiting + running
  std::deque<int64_t> waiting_;            // FCFS
  std::vector<int64_t> running_;           // admission order
  std::unordered_map<int64_t, int> in_flight_;   // iteration index -> slot
  int64_t next_index_ = 0;
  int64_t admit_counter_ = 0;
  int64_t kv_reserved_ = 0;
  int64_t finished_ = 0;
};

}  // namespace peerplan
