// `peerplan topo --format dot` on every shipped machine: golden DOT files, and Graphviz draws each
// label as separate lines with no backslash left in any text (issue 19: labels carried a literal
// "\\n" that Graphviz drew). Re-record the golden files after an intended change with
// PEERPLAN_RECORD_DOT=1 ctest -R RenderDot (and commit them saying why).
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "planner/core/files.hpp"
#include "planner/topology/render.hpp"
#include "test_helpers.hpp"

namespace peerplan {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> shipped_machines() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(std::string(PEERPLAN_SOURCE_DIR) + "/models/hardware"))
    // Clusters (a "cluster" key) repeat a shipped host N times plus a NIC mesh: their host's
    // golden covers the drawing, and graphviz takes minutes over a 1792-link mesh.
    if (e.path().extension() == ".json" && read_text_file(e.path().string()).find("\"cluster\"") == std::string::npos)
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string golden_path(const std::string& name) { return test::data("dot/" + name + ".dot"); }

struct Cmd {
  int code = -1;
  std::string out;
};

Cmd run(const std::string& cmd) {
  Cmd r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The text of every <text> element Graphviz wrote (one per drawn label line).
std::vector<std::string> svg_texts(const std::string& svg) {
  std::vector<std::string> out;
  static const std::regex text("<text[^>]*>([^<]*)</text>");
  for (std::sregex_iterator it(svg.begin(), svg.end(), text), end; it != end; ++it) out.push_back((*it)[1]);
  return out;
}

std::string svg_of(const std::string& dot, const std::string& tag) {
  std::string path = (fs::temp_directory_path() / ("peerplan-dot-" + tag + ".dot")).string();
  write_file_atomic(path, dot);
  // Graphviz is a build dependency (scripts/setup.sh installs it): missing is a failure, not a skip.
  Cmd r = run("dot -Tsvg " + path);
  fs::remove(path);
  EXPECT_EQ(r.code, 0) << "dot -Tsvg failed (is graphviz installed? scripts/setup.sh installs it):\n" << r.out;
  return r.out;
}

TEST(RenderDot, EveryShippedMachineMatchesItsGoldenFile) {
  const bool record = std::getenv("PEERPLAN_RECORD_DOT") != nullptr;
  auto names = shipped_machines();
  ASSERT_GE(names.size(), 4u);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    std::string dot = render_dot(Topology(load_machine(test::shipped(name))));
    if (record) {
      fs::create_directories(fs::path(golden_path(name)).parent_path());
      write_file_atomic(golden_path(name), dot);
      continue;
    }
    ASSERT_TRUE(fs::exists(golden_path(name)))
        << "no golden DOT for " << name << "; record it with PEERPLAN_RECORD_DOT=1 ctest -R RenderDot";
    EXPECT_EQ(dot, read_text_file(golden_path(name)));
  }
}

TEST(RenderDot, GraphvizDrawsEveryLabelLineWithoutBackslashes) {
  for (const auto& name : shipped_machines()) {
    SCOPED_TRACE(name);
    Topology t(load_machine(test::shipped(name)));
    std::string svg = svg_of(render_dot(t), name);
    ASSERT_NE(svg.find("<svg"), std::string::npos) << svg.substr(0, 400);
    auto texts = svg_texts(svg);
    ASSERT_FALSE(texts.empty());
    for (const auto& s : texts) EXPECT_EQ(s.find('\\'), std::string::npos) << "label text with a backslash: " << s;
    // Each vertex id is a line of its own (the name follows on the next line), for switches, root
    // ports, sockets and NVSwitches as for GPUs.
    for (const auto& n : t.machine().nodes)
      EXPECT_NE(std::find(texts.begin(), texts.end(), n.id), texts.end()) << n.id;
    for (const auto& g : t.machine().gpus)
      EXPECT_NE(std::find(texts.begin(), texts.end(), "GPU" + std::to_string(g.id)), texts.end());
  }
}

TEST(RenderDot, LinkLabelsAreTwoLines) {
  Topology t(load_machine(test::shipped("hgx-h100x8")));
  auto texts = svg_texts(svg_of(render_dot(t), "links"));
  EXPECT_NE(std::find(texts.begin(), texts.end(), "NV18"), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "450 GB/s"), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "Gen5 x16"), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "NUMA 0"), texts.end());
}

TEST(RenderDot, QuotesAndBackslashesInNamesAreEscaped) {
  auto j = test::small_machine();
  j["name"] = "rack \"A\\B\"";
  j["nodes"][2]["name"] = "PEX \"88096\" \\ lane 0";
  j["gpus"][0]["name"] = "G \"x\"";
  Topology t(test::parse(j));
  std::string dot = render_dot(t);
  EXPECT_NE(dot.find("PEX \\\"88096\\\" \\\\ lane 0"), std::string::npos) << dot;
  auto texts = svg_texts(svg_of(dot, "escape"));
  // Graphviz writes the quote as an entity and keeps the one backslash the name has.
  EXPECT_NE(std::find(texts.begin(), texts.end(), "PEX &quot;88096&quot; \\ lane 0"), texts.end());
  EXPECT_NE(std::find(texts.begin(), texts.end(), "G &quot;x&quot;"), texts.end());
}

}  // namespace
}  // namespace peerplan
