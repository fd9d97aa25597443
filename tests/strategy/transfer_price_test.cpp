// A strategy is shown the price the simulator charges: machine.transfer_time and a Send op of the
// op graph go through the one pricer (price_pair_transfer) with the same CostOptions and the same
// measured and network curves. Checked on a two-host machine for a measured pair, a nominal pair
// and a pair across hosts (priced from the hosts' network curve, not the pair's own).
#include <gtest/gtest.h>

#include <string>

#include "planner/cost/cost_model.hpp"
#include "planner/strategy/strategy_runner.hpp"
#include "tests/cost/cost_test_util.hpp"
#include "tests/strategy/test_fixtures.hpp"

using namespace peerplan;

TEST(TransferPrice, LuaTransferTimeIsTheSimulatorsPrice) {
  const Topology topo(simtest::two_host_machine());
  ASSERT_NE(topo.host_of(1), topo.host_of(3));
  CostOptions opt;  // not the defaults: the script must see these, as the simulator does
  opt.link_efficiency = 0.5;
  opt.copy_setup_s = 9e-6;
  opt.host_stage_setup_s = 20e-6;
  const CostModel cost(topo, opt);
  const double bytes = 3e6;

  auto script = peerplan::testing::write_script("probe_transfer.lua", R"(
return {name = 'probe', candidates = function(model, machine)
  local function t(a, b, mode)
    local s, src = machine.transfer_time(a, b, 3e6, mode)
    return {seconds = s, source = src}
  end
  return {{name = 'probe', stages = {{gpus = {0}, layer_begin = 0, layer_end = model.layers}},
           extra = {measured = t(0, 1, 'peer'), nominal = t(1, 0, 'peer'), cross = t(1, 3, 'host_staged')}}}
end}
)");
  auto m = peerplan::testing::model("llama-3.1-8b");
  auto plans = run_strategies({script}, m.cfg, m.fig, cost, {}, MemoryOptions{});
  ASSERT_EQ(plans.size(), 1u);
  const nlohmann::json& seen = plans[0].plan.extra;

  struct Case {
    const char* key;
    int src, dst;
    TransferMode mode;
    const char* source;  // what the pair must be priced from
  };
  for (const Case& c : {Case{"measured", 0, 1, TransferMode::PeerCopyEngine, "interpolated"},
                        Case{"nominal", 1, 0, TransferMode::PeerCopyEngine, "nominal"},
                        Case{"cross", 1, 3, TransferMode::HostStaged, "interpolated"}}) {
    SCOPED_TRACE(c.key);
    PairTransfer want = cost.transfer(c.src, c.dst, c.mode, bytes);
    ASSERT_TRUE(want.route.valid) << want.route.why_invalid;
    EXPECT_EQ(seen[c.key]["source"], c.source);
    EXPECT_EQ(seen[c.key]["source"], to_string(want.price.source));
    EXPECT_DOUBLE_EQ(seen[c.key]["seconds"].get<double>(), want.price.seconds) << "Lua shows the cost model's price";

    // The simulator's Send op between the same GPUs costs the same.
    Op send;
    send.kind = OpKind::Send;
    send.name = c.key;
    send.gpus = {c.src, c.dst};
    send.bytes = int64_t(bytes);
    send.mode = c.mode;
    EXPECT_DOUBLE_EQ(cost.price(send, false).seconds, want.price.seconds) << "a Send op uses the same pricer";
  }
  // The cross-host pair has no curve of its own: the hosts' network curve (sampled on 0 -> 2)
  // prices it, as the simulator does, rather than the network route's nominal 25 GB/s.
  EXPECT_TRUE(cost.transfer(1, 3, TransferMode::HostStaged, bytes).route.network);
  EXPECT_NEAR(seen["cross"]["seconds"].get<double>(), 30e-6 + bytes / 10e9, 0.05 * (30e-6 + bytes / 10e9));
  // The nominal pair depends on the options: with the defaults the script would have seen another figure.
  const CostModel defaults(topo);
  EXPECT_NE(seen["nominal"]["seconds"].get<double>(),
            defaults.transfer(1, 0, TransferMode::PeerCopyEngine, bytes).price.seconds);
  // Nominal closed form: hop latencies + copy set-up + bytes / (50 GB/s x 0.5).
  const PairTransfer nominal = cost.transfer(1, 0, TransferMode::PeerCopyEngine, bytes);
  EXPECT_NEAR(seen["nominal"]["seconds"].get<double>(), nominal.route.latency_s + 9e-6 + bytes / 25e9, 1e-12);
}
