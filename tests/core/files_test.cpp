// Reading and writing files (planner/core/files.hpp): caps and kinds checked before reading;
// outputs replaced atomically, all or none, never two on one path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "planner/core/error.hpp"
#include "planner/core/files.hpp"

namespace peerplan {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path p = fs::temp_directory_path() / ("peerplan-core-" + std::to_string(getpid()) + "-" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  Dir() { fs::create_directories(p); }
  ~Dir() { fs::remove_all(p); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(p / name, std::ios::binary) << text;
    return (p / name).string();
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(ReadInputFile, ReadsARegularFileWithinItsCap) {
  Dir d;
  EXPECT_EQ(read_input_file(d.write("a.json", "{\"a\": 1}"), file_kind::kPlan), "{\"a\": 1}");
}

TEST(ReadInputFile, RefusesOverTheCapBeforeReading) {
  Dir d;
  const std::string f = d.write("big.json", "{");
  ASSERT_EQ(truncate(f.c_str(), 17LL << 20), 0);  // sparse: 17 MiB over the 16 MiB plan cap
  const std::string e = error_of([&] { read_input_file(f, file_kind::kPlan); });
  EXPECT_NE(e.find("17.0 MiB (17825792 bytes), over the 16.0 MiB cap for a plan file"), std::string::npos) << e;
}

TEST(ReadInputFile, NamesWhatThePathIs) {
  Dir d;
  EXPECT_NE(error_of([&] { read_text_file("/dev/null"); }).find("character device"), std::string::npos);
  EXPECT_NE(error_of([&] { read_text_file(d.p.string()); }).find("is a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { read_text_file((d.p / "none").string()); }).find("no such file"), std::string::npos);
  ASSERT_EQ(symlink("nowhere", (d.p / "dangling").c_str()), 0);
  EXPECT_NE(error_of([&] { read_text_file((d.p / "dangling").string()); }).find("dangling"), std::string::npos);
}

TEST(OutputSet, NothingIsReplacedWhenOneOutputCannotBeStaged) {
  Dir d;
  const std::string a = d.write("a.txt", "old a");
  fs::create_directories(d.p / "gone");
  const std::string b = (d.p / "gone" / "b.txt").string();
  OutputSet s;
  s.add("--a", a, "new a");
  s.add("--b", b, "new b");
  fs::remove_all(d.p / "gone");  // after the claim: staging b now fails (as root too)
  EXPECT_THROW(s.commit(), RuntimeError);
  EXPECT_EQ(read_input_file(a, file_kind::kAny), "old a") << "a was staged, but not renamed: all or none";
  for (const auto& e : fs::directory_iterator(d.p))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "temporary left: " << e.path();
}

TEST(OutputSet, TwoOptionsOnOneFileAreRefused) {
  Dir d;
  const std::string a = d.write("a.txt", "x");
  OutputSet s;
  s.claim("--json-out", a);
  const std::string e = error_of([&] { s.claim("--csv", (d.p / "." / "a.txt").string()); });
  EXPECT_NE(e.find("the same file as --json-out"), std::string::npos) << e;
}

}  // namespace
}  // namespace peerplan

namespace peerplan {
namespace {

TEST(OutputSet, ACharacterDeviceIsWrittenInPlace) {
  // /dev/null as --out: on 9259f41 a temporary was renamed over it (as root, the node was gone).
  write_file_atomic("/dev/null", "discarded\n");
  struct stat st {};
  ASSERT_EQ(lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null is still a character device";
}

TEST(OutputSet, ASocketIsRefusedWithTheReason) {
  Dir d;
  const std::string sock = (d.p / "s.sock").string();
  ASSERT_EQ(mknod(sock.c_str(), S_IFSOCK | 0600, 0), 0);
  const std::string e = error_of([&] { write_file_atomic(sock, "x"); });
  EXPECT_NE(e.find("is a socket"), std::string::npos) << e;
}

}  // namespace
}  // namespace peerplan
