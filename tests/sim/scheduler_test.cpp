#include "planner/sim/scheduler.hpp"

#include <gtest/gtest.h>

#include "planner/core/error.hpp"

using namespace peerplan;

namespace {

Request req(int64_t id, int64_t prompt, int64_t out) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = out;
  return r;
}

}  // namespace

TEST(Scheduler, PrefillFirstThenDecodeProducesEveryTokenOnce) {
  // Without chunked prefill, a waiting request that fits is prefilled before anyone decodes
  // (vLLM's default); its first token comes from the prefill iteration.
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_batched_tokens = 100;
  Scheduler s(c);
  s.add_request(req(1, 10, 3));
  auto it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_seqs, 1);
  EXPECT_EQ(it->shape.prefill_tokens, 10);
  EXPECT_EQ(it->shape.prefill_context, 10);
  EXPECT_EQ(it->shape.decode_seqs, 0);
  EXPECT_FALSE(s.next_iteration()) << "one micro-batch in flight at most";
  auto ev = s.complete_iteration(*it);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, SchedulerEvent::Kind::FirstToken);

  s.add_request(req(2, 20, 1));
  it = s.next_iteration();  // request 2 prefills first; request 1 waits for the decode batch
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_seqs, 1);
  EXPECT_EQ(it->shape.decode_seqs, 0);
  ev = s.complete_iteration(*it);
  ASSERT_EQ(ev.size(), 2u) << "one output token: first token and finish together";
  EXPECT_EQ(ev[1].kind, SchedulerEvent::Kind::Finished);
  EXPECT_EQ(ev[1].request_id, 2);

  it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.decode_seqs, 1);
  EXPECT_EQ(it->shape.decode_context, 11) << "prompt 10 + the first generated token";
  s.complete_iteration(*it);
  it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.decode_context, 12);
  ev = s.complete_iteration(*it);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].kind, SchedulerEvent::Kind::Finished);
  EXPECT_EQ(ev[1].tokens_generated, 3);
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(s.kv_tokens_reserved(), 0);
  EXPECT_FALSE(s.next_iteration());
}

TEST(Scheduler, TokenBudgetAndSeqLimitBoundAPrefillBatch) {
  SchedulerConfig c;
  c.max_num_seqs = 2;
  c.max_batched_tokens = 25;
  Scheduler s(c);
  for (int i = 0; i < 4; ++i) s.add_request(req(i, 10, 2));
  auto it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_seqs, 2) << "25-token budget holds two 10-token prompts";
  s.complete_iteration(*it);
  it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_seqs, 0) << "max_num_seqs=2 running: the rest wait";
  EXPECT_EQ(it->shape.decode_seqs, 2);
  EXPECT_EQ(s.waiting(), 2u);
}

TEST(Scheduler, ChunkedPrefillPutsDecodesFirstAndChunksLongPrompts) {
  SchedulerConfig c;
  c.max_batched_tokens = 16;
  c.chunked_prefill = true;
  Scheduler s(c);
  s.add_request(req(1, 4, 5));
  auto it = s.next_iteration();
  s.complete_iteration(*it);
  s.add_request(req(2, 40, 2));
  it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.decode_seqs, 1);
  EXPECT_EQ(it->shape.prefill_tokens, 15) << "16-token budget minus one decode";
  EXPECT_EQ(it->shape.prefill_context, 15);
  auto ev = s.complete_iteration(*it);
  EXPECT_EQ(ev.size(), 1u) << "a partial prefill produces no token";
  it = s.next_iteration();
  EXPECT_EQ(it->shape.prefill_tokens, 15);
  EXPECT_EQ(it->shape.prefill_context, 30) << "second chunk attends to the first";
  s.complete_iteration(*it);
  it = s.next_iteration();
  EXPECT_EQ(it->shape.prefill_tokens, 10);
  ev = s.complete_iteration(*it);
  bool first = false;
  for (auto& e : ev) first |= e.request_id == 2 && e.kind == SchedulerEvent::Kind::FirstToken;
  EXPECT_TRUE(first);
}

TEST(Scheduler, MicroBatchesInFlightTakeDisjointSequences) {
  SchedulerConfig c;
  c.micro_batches = 2;
  Scheduler s(c);
  s.add_request(req(1, 8, 4));
  s.add_request(req(2, 8, 4));
  auto a = s.next_iteration();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shape.prefill_seqs, 2);
  EXPECT_FALSE(s.next_iteration()) << "both sequences are in flight in micro-batch 0";
  s.add_request(req(3, 8, 4));
  auto b = s.next_iteration();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->slot, 1);
  EXPECT_EQ(b->shape.prefill_seqs, 1);
  EXPECT_FALSE(s.next_iteration()) << "two micro-batches in flight";
  s.complete_iteration(*a);
  auto c2 = s.next_iteration();
  ASSERT_TRUE(c2);
  EXPECT_EQ(c2->slot, 0);
  EXPECT_EQ(c2->shape.decode_seqs, 2) << "requests 1 and 2 decode; 3 is still in flight";
  EXPECT_THROW(s.complete_iteration(*a), RuntimeError) << "completing twice is a driver bug";
}

TEST(Scheduler, KvCapacityLimitsAdmissionAndRejectsImpossibleRequests) {
  SchedulerConfig c;
  c.kv_capacity_tokens = 30;
  Scheduler s(c);
  EXPECT_THROW(s.add_request(req(9, 30, 1)), InputError);
  s.add_request(req(1, 10, 10));
  s.add_request(req(2, 10, 10));
  auto it = s.next_iteration();
  EXPECT_EQ(it->shape.prefill_seqs, 1) << "20 of 30 tokens reserved: the second does not fit";
  EXPECT_EQ(s.kv_tokens_reserved(), 20);
}

TEST(Scheduler, OverlongPromptWithoutChunkingRunsAlone) {
  SchedulerConfig c;
  c.max_batched_tokens = 8;
  Scheduler s(c);
  s.add_request(req(1, 20, 1));
  s.add_request(req(2, 4, 1));
  auto it = s.next_iteration();
  ASSERT_TRUE(it);
  EXPECT_EQ(it->shape.prefill_tokens, 20);
  EXPECT_EQ(it->seqs.size(), 1u);
}
