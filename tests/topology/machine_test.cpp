// Machine schema: parsing, policies, round trips and every kind of bad input.
#include <filesystem>
#include <fstream>

#include "planner/core/json_in.hpp"
#include "planner/topology/topology.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

using test::expect_rejected;
using test::parse;
using test::small_machine;

TEST(MachineSchema, ParsesSmallMachineAndDerivesNuma) {
  Machine m = parse(small_machine());
  EXPECT_EQ(m.gpu_count(), 4);
  EXPECT_EQ(m.origin, "nominal");
  EXPECT_EQ(m.links.size(), 7u);
  // numa left out: taken from the socket the GPU's PCIe path reaches.
  for (const auto& g : m.gpus) EXPECT_EQ(g.numa, 0);
  // p2p left out means the "all" policy: every off-diagonal pair has access.
  EXPECT_EQ(m.p2p_policy, "all");
  ASSERT_EQ(m.p2p.size(), 4u);
  EXPECT_TRUE(m.p2p[0][3].access);
}

TEST(MachineSchema, PcieCapacityFollowsGenerationWidthAndEncoding) {
  LinkSpec l;
  l.kind = LinkKind::Pcie;
  l.pcie_gen = 5;
  l.pcie_width = 16;
  EXPECT_NEAR(link_capacity_gbps(l), 63.015, 0.01);  // 32 GT/s x 16 x 128/130 / 8
  l.pcie_gen = 4;
  EXPECT_NEAR(link_capacity_gbps(l), 31.51, 0.01);
  l.pcie_gen = 2;
  l.pcie_width = 8;
  EXPECT_NEAR(link_capacity_gbps(l), 4.0, 1e-9);  // 5 GT/s x 8 x 8b/10b / 8
  LinkSpec nv;
  nv.kind = LinkKind::NvLink;
  nv.nvlinks = 18;
  nv.gbps_per_link = 25;
  EXPECT_DOUBLE_EQ(link_capacity_gbps(nv), 450);
  nv.gbps = 400;  // explicit figure wins
  EXPECT_DOUBLE_EQ(link_capacity_gbps(nv), 400);
}

TEST(MachineSchema, PolicySameSwitchGivesPeerAccessUnderOneSwitchOnly) {
  auto j = small_machine();
  j["p2p"] = "same_switch";
  Machine m = parse(j);
  EXPECT_TRUE(m.p2p[0][1].access);   // PIX
  EXPECT_FALSE(m.p2p[0][2].access);  // PHB: through the host bridge
  EXPECT_NE(m.p2p[0][2].note.find("same_switch"), std::string::npos);
  j["p2p"] = "none";
  EXPECT_FALSE(parse(j).p2p[0][1].access);
  j["p2p"] = "nvlink_only";
  EXPECT_FALSE(parse(j).p2p[0][1].access);  // no NVLink in this machine
}

TEST(MachineSchema, ExplicitMatrixIsDirectedAndKeepsFunctionalCheck) {
  auto j = small_machine();
  nlohmann::json rows = nlohmann::json::array();
  for (int a = 0; a < 4; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < 4; ++b) row.push_back(a == b ? nlohmann::json(nullptr) : nlohmann::json(true));
    rows.push_back(row);
  }
  rows[1][0] = {{"access", true}, {"functional", false}, {"note", "IOMMU dropped writes"}};
  rows[2][3] = false;
  j["p2p"] = rows;
  Machine m = parse(j);
  EXPECT_TRUE(m.p2p[0][1].usable());
  EXPECT_FALSE(m.p2p[1][0].usable());  // capable but broken: never planned on
  EXPECT_TRUE(m.p2p[3][2].usable());
  EXPECT_FALSE(m.p2p[2][3].usable());  // capability is directed
  EXPECT_TRUE(m.p2p_policy.empty());
}

TEST(MachineSchema, RoundTripsThroughJsonIncludingMeasurements) {
  auto j = small_machine();
  j["p2p"] = nlohmann::json::array();
  for (int a = 0; a < 4; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < 4; ++b)
      row.push_back(a == b ? nlohmann::json(nullptr)
                           : nlohmann::json{{"access", a / 2 == b / 2}, {"perf_rank", 0}, {"atomics", true},
                                            {"functional", true}});
    j["p2p"].push_back(row);
  }
  j["origin"] = "measured";
  j["host"] = "box";
  j["meta"] = {{"driver", "580.65"}};
  j["measurements"] = nlohmann::json::parse(R"({
    "transfers": [{"src": 0, "dst": 1, "mode": "p2p_ce", "points": [
       {"bytes": 1048576, "n": 20, "min_us": 50, "p10_us": 51, "median_us": 52, "p90_us": 53, "p99_us": 54, "max_us": 55}]}],
    "latencies": [{"src": 0, "dst": 1, "kind": "sm_pingpong", "n": 20, "min_us": 1, "p10_us": 1, "median_us": 1.5,
                   "p90_us": 2, "p99_us": 2, "max_us": 3}],
    "hbm_gbps": [900, 901, 902, 903],
    "gemms": [{"gpu": 0, "m": 4096, "n": 6144, "k": 4096, "min_us": 280, "p10_us": 281, "median_us": 282,
               "p90_us": 283, "p99_us": 284, "max_us": 285, "sm_mhz": 1830}]
  })");
  Machine m = parse(j);
  nlohmann::json once = machine_to_json(m);
  Machine again = parse_machine_json(once.dump(), "again.json");
  EXPECT_EQ(machine_to_json(again), once);
  ASSERT_TRUE(again.measured());
  EXPECT_EQ(again.measurements->transfers.size(), 1u);
  EXPECT_NEAR(again.measurements->transfers[0].points[0].time.median, 52e-6, 1e-12);
  ASSERT_EQ(again.measurements->gemms.size(), 1u);
  EXPECT_DOUBLE_EQ(again.measurements->gemms[0].time.sm_mhz, 1830) << "the clock a compute row was timed at";
  EXPECT_DOUBLE_EQ(again.measurements->transfers[0].points[0].time.sm_mhz, 0) << "none recorded: unknown";
  EXPECT_FALSE(once["measurements"]["transfers"][0]["points"][0].contains("sm_mhz")) << "0 is not written";
  EXPECT_EQ(again.host, "box");
  EXPECT_FALSE(again.p2p[0][2].access);
  EXPECT_TRUE(again.p2p[0][1].functional.value_or(false));
}

TEST(MachineSchema, ShippedMachinesLoadAndRoundTrip) {
  for (const char* name : {"hgx-h100x8", "pcie-gen5x8-2socket", "pcie-gen4x4-nop2p"}) {
    SCOPED_TRACE(name);
    Machine m = load_machine(resolve_machine_path(name));
    EXPECT_EQ(m.name, name);
    EXPECT_FALSE(m.description.empty()) << "hypothetical machines cite their sources";
    nlohmann::json once = machine_to_json(m);
    EXPECT_EQ(machine_to_json(parse_machine_json(once.dump(), "rt.json")), once);
  }
}

TEST(MachineSchema, ResolveMachinePathFindsShippedNamesAndListsThemOnTypos) {
  EXPECT_NE(resolve_machine_path("hgx-h100x8").find("models/hardware/hgx-h100x8.json"), std::string::npos);
  try {
    resolve_machine_path("hgx-h100x9");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "--machine");
    EXPECT_NE(std::string(e.what()).find("pcie-gen4x4-nop2p"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_machine(resolve_machine_path("no/such/file.json")), InputError);
}

// ---- bad input: each names the file and the field ----

TEST(MachineBadInput, MalformedAndTruncatedJsonNameTheFile) {
  try {
    load_machine(test::data("truncated.json.broken"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated.json.broken"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("malformed JSON at line"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_machine_json("{\"schema\": ", "x.json"), InputError);
  EXPECT_THROW(parse_machine_json("", "x.json"), InputError);
}

TEST(MachineBadInput, SchemaAndVersion) {
  auto j = small_machine();
  j["schema"] = "something.else";
  expect_rejected(j, "schema", "peerplan.machine");
  j = small_machine();
  j["version"] = 2;
  expect_rejected(j, "version", "version 1");
  j = small_machine();
  j.erase("version");
  expect_rejected(j, "version", "missing");
}

TEST(MachineBadInput, WrongTypes) {
  auto j = small_machine();
  j["gpus"][1]["memory_bytes"] = "80GB";
  expect_rejected(j, "gpus/1/memory_bytes", "expected a number");
  j = small_machine();
  j["links"] = "gpu0-gpu1";
  expect_rejected(j, "links", "expected an array");
  j = small_machine();
  j["links"][0]["pcie_gen"] = 4.5;
  expect_rejected(j, "links/0/pcie_gen", "integer");
  j = small_machine();
  j["p2p"] = 3;
  expect_rejected(j, "p2p", "policy");
}

TEST(MachineBadInput, ZeroOrNegativeSizesAndBandwidths) {
  auto j = small_machine();
  j["gpus"][2]["memory_bytes"] = 0;
  expect_rejected(j, "gpus/2/memory_bytes", "positive");
  j = small_machine();
  j["gpus"][2]["memory_bytes"] = -5;
  expect_rejected(j, "gpus/2/memory_bytes", "positive");
  j = small_machine();
  j["links"][4]["gbps"] = 0;
  expect_rejected(j, "links/4/gbps", "positive");
  j = small_machine();
  j["links"][4]["gbps"] = -20;
  expect_rejected(j, "links/4/gbps", "positive");
  j = small_machine();
  j["links"][1]["pcie_width"] = 0;
  expect_rejected(j, "links/1/pcie_width", "positive");
  j = small_machine();
  j["nodes"][0]["mem_gbps"] = -1;
  expect_rejected(j, "nodes/0/mem_gbps", ">= 0");
  j = small_machine();
  j["links"][0]["latency_us"] = 0;
  expect_rejected(j, "links/0/latency_us", "positive");
}

TEST(MachineBadInput, LinkToMissingGpuOrVertex) {
  auto j = small_machine();
  j["links"][2]["a"] = "gpu7";
  expect_rejected(j, "links/2/a", "\"gpu7\", which does not exist");
  j = small_machine();
  j["links"][4]["b"] = "hb9";
  expect_rejected(j, "links/4/b", "\"hb9\", which does not exist");
}

TEST(MachineBadInput, DuplicateIdsAndNonDenseGpus) {
  auto j = small_machine();
  j["gpus"][2]["id"] = 1;
  expect_rejected(j, "gpus/2/id", "duplicate GPU id 1");
  j = small_machine();
  j["gpus"][3]["id"] = 5;
  expect_rejected(j, "gpus/3/id", "dense");
  j = small_machine();
  j["nodes"][3]["id"] = "sw0";
  expect_rejected(j, "nodes/3/id", "duplicate vertex id \"sw0\"");
  j = small_machine();
  j["nodes"][3]["id"] = "gpu2";
  expect_rejected(j, "nodes/3/id", "reserved for GPU");
}

TEST(MachineBadInput, SelfLoopsAndDuplicateLinks) {
  auto j = small_machine();
  j["links"][0]["b"] = "gpu0";
  expect_rejected(j, "links/0/b", "self-loop");
  j = small_machine();
  j["links"].push_back({{"a", "sw0"}, {"b", "gpu0"}, {"kind", "pcie"}, {"pcie_gen", 4}, {"pcie_width", 16}});
  expect_rejected(j, "links/7/b", "duplicate link");
}

TEST(MachineBadInput, KindsAndKindRules) {
  auto j = small_machine();
  j["nodes"][2]["kind"] = "switch";
  expect_rejected(j, "nodes/2/kind", "pcie_switch");
  j = small_machine();
  j["links"][0]["kind"] = "usb";
  expect_rejected(j, "links/0/kind", "nvlink");
  j = small_machine();
  j["links"].push_back({{"a", "gpu0"}, {"b", "gpu1"}, {"kind", "nvlink"}, {"gbps_per_link", 25}});
  expect_rejected(j, "links/7/nvlinks", "missing");
  j = small_machine();
  j["links"].push_back({{"a", "gpu0"}, {"b", "sw1"}, {"kind", "smp"}, {"gbps", 10}});
  expect_rejected(j, "links/7/kind", "cpu_socket");
  j = small_machine();
  j["nodes"][0].erase("numa");
  expect_rejected(j, "nodes/0/numa", "missing");
}

TEST(MachineBadInput, P2pMatrixShape) {
  auto j = small_machine();
  j["p2p"] = nlohmann::json::array({nlohmann::json::array({nullptr, true})});
  expect_rejected(j, "p2p", "4 rows");
  j = small_machine();
  nlohmann::json r0 = {nullptr, true, true, true}, r1 = {true, nullptr, true, true}, r2 = {true, true, nullptr, true};
  j["p2p"] = {r0, r1, r2, nlohmann::json::array({true, true})};
  expect_rejected(j, "p2p/3", "square");
  j = small_machine();
  j["p2p"] = {r0, r1, r2, {true, true, "yes", nullptr}};
  expect_rejected(j, "p2p/3/2", "true/false");
  j = small_machine();
  j["p2p"] = "some";
  expect_rejected(j, "p2p", "unknown policy");
}

TEST(MachineBadInput, MeasurementsNameExistingGpus) {
  auto j = small_machine();
  j["measurements"] = nlohmann::json::parse(R"({"transfers": [{"src": 0, "dst": 9, "mode": "p2p_ce", "points": []}]})");
  expect_rejected(j, "measurements/transfers/0/dst", "GPU 9 does not exist");
  j["measurements"] = nlohmann::json::parse(R"({"collectives": [{"op": "all_reduce", "gpus": [0, 4], "points": []}]})");
  expect_rejected(j, "measurements/collectives/0/gpus/1", "GPU 4 does not exist");
}

TEST(MachineBadInput, GpuWithoutPathToASocket) {
  auto j = small_machine();
  j["gpus"].push_back({{"id", 4}, {"name", "G"}, {"memory_bytes", 1000}});
  expect_rejected(j, "links", "gpu4 has no PCIe path to a cpu_socket");
}

}  // namespace
}  // namespace peerplan
