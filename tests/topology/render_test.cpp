// Rendering (matrix, JSON, DOT) and the `peerplan topo` command on every shipped machine.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "planner/core/files.hpp"
#include "planner/topology/render.hpp"
#include "planner/topology/transfer_curves.hpp"
#include "tests/cost/cost_test_util.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

struct CmdResult {
  int code = -1;
  std::string out;
};

CmdResult run(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool contains(const std::string& s, const std::string& w) { return s.find(w) != std::string::npos; }

// A profile of the small machine: measured peer copy 0 -> 1 (1 GiB in 2725 us = 394 GB/s),
// host-staged 0 -> 2 and an SM ping-pong latency 0 -> 1.
Machine measured_small() {
  auto j = test::small_machine();
  j["origin"] = "measured";
  j["host"] = "testbox";
  j["measurements"] = nlohmann::json::parse(R"({
    "transfers": [
      {"src": 0, "dst": 1, "mode": "p2p_ce", "points": [
        {"bytes": 4096, "n": 20, "min_us": 5, "p10_us": 5, "median_us": 6, "p90_us": 7, "p99_us": 7, "max_us": 8},
        {"bytes": 1073741824, "n": 20, "min_us": 2700, "p10_us": 2710, "median_us": 2725, "p90_us": 2740, "p99_us": 2750, "max_us": 2760}]},
      {"src": 0, "dst": 2, "mode": "host_staged", "variant": "numa_local", "points": [
        {"bytes": 1073741824, "n": 20, "min_us": 60000, "p10_us": 60000, "median_us": 61000, "p90_us": 62000, "p99_us": 62000, "max_us": 63000}]}],
    "latencies": [{"src": 0, "dst": 1, "kind": "sm_pingpong", "n": 20, "min_us": 1.2, "p10_us": 1.3, "median_us": 1.5,
                   "p90_us": 1.6, "p99_us": 1.7, "max_us": 1.9}]
  })");
  return test::parse(j, "small-profile.json");
}

TEST(Render, MatrixLooksLikeNvidiaSmiAndMarksNominalFigures) {
  Topology t(load_machine(test::shipped("hgx-h100x8")));
  std::string s = render_matrix(t);
  EXPECT_TRUE(contains(s, "GPU0   X      NV18")) << s;
  EXPECT_TRUE(contains(s, "NUMA Affinity"));
  EXPECT_TRUE(contains(s, "NV#  = Connection traversing a bonded set of # NVLinks"));
  EXPECT_TRUE(contains(s, "450n")) << "peer bandwidth, nominal";
  EXPECT_TRUE(contains(s, "63.0n")) << "host-staged bandwidth, nominal Gen5 x16";
  EXPECT_FALSE(contains(s, "450m"));
  EXPECT_TRUE(contains(s, "symmetry classes: {0,1,2,3,4,5,6,7}")) << s;
  EXPECT_TRUE(contains(s, "sockets:          {0,1,2,3} {4,5,6,7}")) << s;
}

TEST(Render, ProfileShowsMeasuredFiguresMarkedMeasured) {
  Machine m = measured_small();
  Topology t(m);
  Figure peer = peer_bandwidth(t, 0, 1);
  EXPECT_TRUE(peer.measured);
  EXPECT_NEAR(peer.value, 1073741824.0 / 2725e-6 / 1e9, 1e-9);  // the largest point, not the 4 KiB one
  Figure other = peer_bandwidth(t, 1, 0);
  EXPECT_FALSE(other.measured);  // no curve for 1 -> 0: nominal
  EXPECT_NEAR(other.value, 31.51, 0.01);
  Figure hs = host_staged_bandwidth(t, 0, 2);
  EXPECT_TRUE(hs.measured);
  EXPECT_NEAR(hs.value, 1073741824.0 / 61000e-6 / 1e9, 1e-9);
  Figure lat = pair_latency(t, 0, 1);
  EXPECT_TRUE(lat.measured);
  EXPECT_DOUBLE_EQ(lat.value, 1.5e-6);
  std::string s = render_matrix(t);
  EXPECT_TRUE(contains(s, "394m")) << s;
  EXPECT_TRUE(contains(s, "17.6m")) << s;
  EXPECT_TRUE(contains(s, "1.50m")) << s;
  EXPECT_TRUE(contains(s, "31.5n")) << s;
  EXPECT_TRUE(contains(s, "measured profile, host testbox")) << s;
}

TEST(Render, FiguresComeFromTheCurveTheCostModelPricesFrom) {
  // One rule picks a pair's curve (pair_transfer_curve) for the pricer and for `topo`: across
  // hosts the host pair's network curve (measured on 0 -> 2 only: 30 us + bytes / 10 GB/s), so
  // GPUs 1 -> 3 show that curve's throughput, measured, not the network route's nominal 25 GB/s.
  Topology t(simtest::two_host_machine());
  const TransferCurve* c = pair_transfer_curve(t, 1, 3, TransferMode::HostStaged);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->mode, "net_nccl");
  Figure hs = host_staged_bandwidth(t, 1, 3);
  EXPECT_TRUE(hs.measured);
  const CurvePoint& last = c->points.back();
  EXPECT_DOUBLE_EQ(hs.value, double(last.bytes) / last.time.median / 1e9);
  EXPECT_FALSE(peer_bandwidth(t, 1, 3).available) << "no peer access between hosts";
  EXPECT_TRUE(peer_bandwidth(t, 0, 1).measured) << "the pair's p2p_ce curve";
  EXPECT_FALSE(peer_bandwidth(t, 1, 0).measured) << "no curve for 1 -> 0: nominal";
}

TEST(Render, ShippedH200ProfileShowsMeasuredFigures) {
  // issue 3: `peerplan topo --machine PROFILE` shows the measured figures, marked as measured.
  Topology t(load_machine(resolve_machine_path("h200x2-nvlink")));
  ASSERT_TRUE(t.machine().measured());
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    Figure peer = peer_bandwidth(t, a, b);
    EXPECT_TRUE(peer.measured);
    EXPECT_GT(peer.value, 0);
    EXPECT_LT(peer.value, 450.0 * 1.001) << "cannot beat NV18's nominal 450 GB/s per direction";
    EXPECT_TRUE(host_staged_bandwidth(t, a, b).measured);
    EXPECT_TRUE(pair_latency(t, a, b).measured);
  }
  std::string s = render_matrix(t);
  EXPECT_TRUE(contains(s, "measured profile")) << s;
  EXPECT_TRUE(contains(s, fmt_gbps(peer_bandwidth(t, 0, 1)))) << s;
  EXPECT_TRUE(contains(s, "m = measured (this profile")) << s;
}

TEST(Render, NoPeerAccessShowsDashAndReason) {
  Topology t(load_machine(test::shipped("pcie-gen4x4-nop2p")));
  EXPECT_FALSE(peer_bandwidth(t, 0, 1).available);
  std::string s = render_matrix(t);
  EXPECT_TRUE(contains(s, "does not support peer access")) << s;
  EXPECT_TRUE(contains(s, "GPU0    X       -       -       -")) << s;
}

TEST(Render, JsonHasEveryOrderedPairWithSources) {
  Topology t(measured_small());
  nlohmann::json j = render_json(t);
  ASSERT_EQ(j["pairs"].size(), 12u);
  EXPECT_EQ(j["pairs"][0]["path_type"], "PIX");
  EXPECT_EQ(j["pairs"][0]["peer"]["source"], "measured");
  EXPECT_EQ(j["pairs"][1]["peer"]["source"], "nominal");
  EXPECT_EQ(j["symmetry_classes"].size(), 4u);
  EXPECT_EQ(j["machine"]["schema"], "peerplan.machine");
}

// render_json_text writes each pair directly (1M pairs on 1024 GPUs: building a JSON value per
// pair was most of the time): it must stay render_json(t).dump(2) byte for byte, on every shipped
// machine (measured profiles, no-P2P reasons, infinite figures) and on a small measured profile.
TEST(Render, JsonTextIsRenderJsonDumpByteForByte) {
  std::vector<Machine> machines{measured_small()};
  for (const auto& e : std::filesystem::directory_iterator(std::string(PEERPLAN_SOURCE_DIR) + "/models/hardware"))
    if (e.path().extension() == ".json") machines.push_back(load_machine(e.path().string()));
  for (const Machine& m : machines) {
    Topology t(m);
    EXPECT_EQ(render_json_text(t), render_json(t).dump(2)) << m.name;
  }
}

TEST(Render, DotRendersWithGraphviz) {
  for (const char* name : {"hgx-h100x8", "pcie-gen5x8-2socket", "pcie-gen4x4-nop2p"}) {
    SCOPED_TRACE(name);
    Topology t(load_machine(test::shipped(name)));
    std::string dot = render_dot(t);
    // Structure: one edge line per physical link, every vertex declared.
    size_t edges = 0;
    for (size_t p = dot.find(" -- "); p != std::string::npos; p = dot.find(" -- ", p + 1)) ++edges;
    EXPECT_EQ(edges, t.machine().links.size());
    for (const auto& n : t.machine().nodes) EXPECT_TRUE(contains(dot, "\"" + n.id + "\" [shape="));
    if (std::filesystem::exists("/usr/bin/dot")) {
      std::string path = (std::filesystem::temp_directory_path() / ("peerplan-" + std::string(name) + ".dot")).string();
      write_file_atomic(path, dot);
      CmdResult r = run("/usr/bin/dot -Tsvg " + path);
      EXPECT_EQ(r.code, 0) << r.out;
      EXPECT_TRUE(contains(r.out, "<svg")) << r.out.substr(0, 400);
      std::filesystem::remove(path);
    }
  }
}

// ---- the command ----

TEST(TopoCommand, EveryShippedMachineInEveryFormat) {
  // Every file in models/hardware (hypothetical machines and measured profiles alike).
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(PEERPLAN_SOURCE_DIR) + "/models/hardware"))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  for (const char* required : {"hgx-h100x8", "pcie-gen5x8-2socket", "pcie-gen4x4-nop2p"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  for (const auto& name : names)
    for (const char* fmt : {"matrix", "json", "dot"}) {
      SCOPED_TRACE(name + " " + fmt);
      CmdResult r = run(std::string(PEERPLAN_BINARY) + " topo --machine " + name + " --format " + fmt);
      EXPECT_EQ(r.code, 0) << r.out;
      EXPECT_FALSE(r.out.empty());
      if (std::string(fmt) == "json") {
        EXPECT_TRUE(nlohmann::json::accept(r.out)) << r.out.substr(0, 400);
      }
    }
  CmdResult r = run(std::string(PEERPLAN_BINARY) + " topo --machine " + test::shipped("pcie-gen5x8-2socket"));
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "GPU0   X      PIX    PIX    PIX    SYS")) << r.out;
}

TEST(TopoCommand, AcceptsNcclXml) {
  CmdResult r = run(std::string(PEERPLAN_BINARY) + " topo --machine " + test::data("nccl-nvswitch-8gpu.xml"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "NV18")) << r.out;
}

TEST(TopoCommand, BadInputExitsTwoNamingFileAndField) {
  std::string dir = std::filesystem::temp_directory_path().string();
  std::string bad = dir + "/peerplan-bad-machine.json";
  auto j = test::small_machine();
  j["links"][2]["a"] = "gpu7";
  write_file_atomic(bad, j.dump());
  CmdResult r = run(std::string(PEERPLAN_BINARY) + " topo --machine " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.out, bad + ": field 'links/2/a'")) << r.out;
  std::filesystem::remove(bad);
  CmdResult t = run(std::string(PEERPLAN_BINARY) + " topo --machine " + test::data("nccl-truncated.xml.broken"));
  EXPECT_EQ(t.code, 2);
  EXPECT_TRUE(contains(t.out, "malformed XML")) << t.out;
  CmdResult u = run(std::string(PEERPLAN_BINARY) + " topo --machine no-such-machine");
  EXPECT_EQ(u.code, 2);
  EXPECT_TRUE(contains(u.out, "hgx-h100x8")) << "lists the shipped machines: " << u.out;
  CmdResult f = run(std::string(PEERPLAN_BINARY) + " topo --machine hgx-h100x8 --format svg");
  EXPECT_EQ(f.code, 2);
}

TEST(TopoCommand, OutWritesTheFile) {
  std::string out = (std::filesystem::temp_directory_path() / "peerplan-topo-out.json").string();
  CmdResult r = run(std::string(PEERPLAN_BINARY) + " topo --machine pcie-gen4x4-nop2p --format json --out " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(read_text_file(out));
  EXPECT_EQ(j["machine"]["name"], "pcie-gen4x4-nop2p");
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace peerplan
