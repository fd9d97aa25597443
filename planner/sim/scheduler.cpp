#include "planner/sim/scheduler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "planner/core/error.hpp"

namespace peerplan {

SchedulerConfig SchedulerConfig::from_workload(const Workload& w, int micro_batches) {
  SchedulerConfig c;
  c.max_num_seqs = w.max_num_seqs;
  c.max_batched_tokens = w.max_batched_tokens;
  c.chunked_prefill = w.chunked_prefill;
  c.micro_batches = std::max(1, micro_batches);
  return c;
}

Scheduler::Scheduler(SchedulerConfig cfg) : cfg_(cfg) {
  if (cfg_.max_num_seqs < 1) throw InputError("", "max_num_seqs", "at least 1 sequence");
  if (cfg_.max_batched_tokens < 1) throw InputError("", "max_batched_tokens", "at least 1 token");
  if (cfg_.micro_batches < 1) throw InputError("", "micro_batches", "at least 1 micro-batch in flight");
  if (cfg_.kv_capacity_tokens < 0) throw InputError("", "kv_capacity_tokens", "0 (unlimited) or a positive token count");
}

void Scheduler::add_request(const Request& r) {
  const std::string field = "request " + std::to_string(r.id);
  if (r.prompt_tokens < 1) throw InputError("", field + "/prompt_tokens", "at least 1 prompt token");
  if (r.output_tokens < 1) throw InputError("", field + "/output_tokens", "at least 1 output token");
  if (seqs_.count(r.id)) throw InputError("", field + "/id", "a request id not already queued or running");
  if (cfg_.kv_capacity_tokens > 0 && r.prompt_tokens + r.output_tokens > cfg_.kv_capacity_tokens)
    throw InputError("", field,
                     "prompt + output tokens (" + std::to_string(r.prompt_tokens + r.output_tokens) +
                         ") within the KV cache capacity of " + std::to_string(cfg_.kv_capacity_tokens) +
                         " tokens; shorten the request or use a plan with more KV memory");
  Seq s;
  s.req = r;
  seqs_.emplace(r.id, s);
  waiting_.push_back(r.id);
}

bool Scheduler::can_admit(const Seq& s, int64_t) const {
  if (int64_t(running_.size()) >= cfg_.max_num_seqs) return false;
  if (cfg_.kv_capacity_tokens > 0 &&
      kv_reserved_ + s.req.prompt_tokens + s.req.output_tokens > cfg_.kv_capacity_tokens)
    return false;
  return true;
}

void Scheduler::admit(int64_t id) {
  Seq& s = seqs_.at(id);
  s.admit_order = admit_counter_++;
  kv_reserved_ += s.req.prompt_tokens + s.req.output_tokens;
  running_.push_back(id);
}

void Scheduler::finalize_shape(Iteration& it) const {
  BatchShapeSum b;  // the op graph prices equal chunks at the work-equivalent context (op_graph.hpp)
  for (const SeqWork& w : it.seqs) {
    if (w.prefill) b.add_prefill(w.new_tokens, w.context);
    else b.add_decode(w.context);
  }
  it.shape = b.shape();
}

std::optional<Iteration> Scheduler::next_iteration() {
  if (int64_t(in_flight_.size()) >= cfg_.micro_batches) return std::nullopt;
  Iteration it;
  int64_t budget = cfg_.max_batched_tokens;

  auto add_prefill = [&](Seq& s, int64_t chunk) {
    SeqWork w;
    w.request_id = s.req.id;
    w.new_tokens = chunk;
    w.context = s.prefilled + chunk;
    w.prefill = true;
    w.completes_prefill = s.prefilled + chunk == s.req.prompt_tokens;
    s.busy = true;
    budget -= chunk;
    it.seqs.push_back(w);
  };
  auto add_decodes = [&] {
    for (int64_t id : running_) {
      if (budget <= 0) break;
      Seq& s = seqs_.at(id);
      if (s.busy || s.prefilled < s.req.prompt_tokens) continue;
      SeqWork w;
      w.request_id = id;
      w.new_tokens = 1;
      w.context = s.req.prompt_tokens + s.generated;
      s.busy = true;
      --budget;
      it.seqs.push_back(w);
    }
  };
  auto admit_waiting = [&](bool allow_chunk) {
    while (!waiting_.empty() && budget > 0) {
      Seq& s = seqs_.at(waiting_.front());
      if (!can_admit(s, 0)) break;  // FCFS: never skip the head of the queue
      int64_t chunk = s.req.prompt_tokens;
      if (chunk > budget) {
        if (allow_chunk) {
          chunk = budget;
        } else if (!it.seqs.empty()) {
          break;  // does not fit beside the others; next iteration
        }
        // else: an over-long prompt alone (see header)
      }
      admit(s.req.id);
      waiting_.pop_front();
      add_prefill(s, chunk);
    }
  };

  if (!cfg_.chunked_prefill) {
    admit_waiting(false);
    if (it.seqs.empty()) add_decodes();
  } else {
    add_decodes();
    for (int64_t id : running_) {  // continue partially prefilled prompts, oldest first
      if (budget <= 0) break;
      Seq& s = seqs_.at(id);
      if (s.busy || s.prefilled >= s.req.prompt_tokens) continue;
      add_prefill(s, std::min(budget, s.req.prompt_tokens - s.prefilled));
    }
    admit_waiting(true);
  }
  if (it.seqs.empty()) return std::nullopt;

  it.index = next_index_++;
  std::vector<bool> used(size_t(cfg_.micro_batches), false);
  for (const auto& [idx, slot] : in_flight_) used[size_t(slot)] = true;
  it.slot = int(std::find(used.begin(), used.end(), false) - used.begin());
  in_flight_.emplace(it.index, it.slot);
  finalize_shape(it);
  return it;
}

std::vector<SchedulerEvent> Scheduler::complete_iteration(const Iteration& it) {
  auto f = in_flight_.find(it.index);
  if (f == in_flight_.end())
    throw RuntimeError("scheduler: iteration " + std::to_string(it.index) +
                       " completed but it is not in flight (completed twice, or never formed here)");
  in_flight_.erase(f);
  std::vector<SchedulerEvent> ev;
  ev.reserve(it.seqs.size());
  for (const SeqWork& w : it.seqs) {
    Seq& s = seqs_.at(w.request_id);
    s.busy = false;
    if (w.prefill) {
      s.prefilled += w.new_tokens;
      if (!w.completes_prefill) continue;
      s.generated = 1;
      ev.push_back({SchedulerEvent::Kind::FirstToken, w.request_id, 1});
    } else {
      ++s.generated;
      ev.push_back({SchedulerEvent::Kind::Token, w.request_id, s.generated});
    }
    if (s.generated >= s.req.output_tokens) {
      ev.push_back({SchedulerEvent::Kind::Finished, w.request_id, s.generated});
      kv_reserved_ -= s.req.prompt_tokens + s.req.output_tokens;
      running_.erase(std::find(running_.begin(), running_.end(), w.request_id));
      seqs_.erase(w.request_id);
      ++finished_;
    }
  }
  return ev;
}

}  // namespace peerplan
