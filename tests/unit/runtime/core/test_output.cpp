// Output files that never lose data: an output that is an input is refused whatever spells it,
// symlinks, FIFOs and devices are written through, and a signal removes pending temporary files.
#include "error_of.h"
#include "text_file.h"

#include "core/output.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using Catch::Contains;
using ssm::test::error_of;
namespace fs = std::filesystem;

using unit_test_files::read_file;

namespace {

struct ScratchDir {
  std::string path;
  ScratchDir() {
    char dir[] = "/tmp/ssm_output_XXXXXX";
    REQUIRE(mkdtemp(dir));
    path = dir;
  }
  ~ScratchDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void write_output(const std::string& path, const std::string& text) {
  ssm::OutputFile f(path);
  f.write(text);
  f.commit();
}

} // namespace

TEST_CASE("an output that is an input is refused, however it is spelt", "[runtime][output]") {
  ScratchDir dir;
  const std::string input = dir / "data.csv";
  spit(input, "y\n1\n");
  fs::create_symlink(input, dir / "link.csv");
  fs::create_hard_link(input, dir / "hard.csv");
  const std::string relative = fs::relative(input).string();
  for (const std::string& out :
       {input, relative, dir.path + "/./data.csv", dir / "link.csv", dir / "hard.csv"}) {
    INFO(out);
    const std::string e = error_of([&] { ssm::check_output_path(out, {"", input}); });
    CHECK_THAT(e, Contains("'" + out + "'") && Contains("'" + input + "'"));
    CHECK(ssm::same_file(out, input));
  }
  CHECK(read_file(input) == "y\n1\n");
  CHECK(!ssm::same_file(dir / "other.csv", input));
  CHECK(error_of([&] { ssm::check_output_path(dir / "other.csv", {input}); }) == "(no error)");
  CHECK(error_of([&] { ssm::check_output_path("-", {"-"}); }) == "(no error)");
  CHECK_THAT(error_of([&] { ssm::check_output_path(dir.path, {}); }), Contains("directory"));
  CHECK_THAT(error_of([&] { ssm::OutputFile f(dir.path); }), Contains("directory"));
}

TEST_CASE("a symlink, a FIFO and a device are written through", "[runtime][output]") {
  ScratchDir dir;
  const std::string target = dir / "target.csv", link = dir / "link.csv";
  spit(target, "old\n");
  fs::create_symlink("target.csv", link);
  write_output(link, "new\n");
  CHECK(fs::is_symlink(link));
  CHECK(read_file(target) == "new\n");
  CHECK(fs::directory_iterator(dir.path) != fs::directory_iterator());
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path))
    ++files;
  CHECK(files == 2); // no temporary file left

  const std::string fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::string read;
  std::thread reader([&] { read = read_file(fifo); });
  ssm::check_output_path(fifo);
  write_output(fifo, "through the pipe\n");
  reader.join();
  CHECK(read == "through the pipe\n");
  struct stat st {};
  REQUIRE(stat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));

  // Only where /dev/null is the device (in some containers it has become a regular file).
  if (stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode)) {
    ssm::check_output_path("/dev/null");
    write_output("/dev/null", "discarded\n");
    REQUIRE(stat("/dev/null", &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
  }
}

TEST_CASE("SIGINT and SIGTERM remove pending temporary files", "[runtime][output]") {
  for (int sig : {SIGINT, SIGTERM}) {
    ScratchDir dir;
    const std::string out = dir / "out.csv";
    int ready[2];
    REQUIRE(pipe(ready) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::signal(sig, SIG_DFL); // as in a foreground program (a background job ignores SIGINT)
      ssm::install_cleanup_handlers();
      ssm::OutputFile f(out);
      f.write("partial");
      (void)!::write(ready[1], "x", 1);
      for (;;)
        pause();
    }
    char c;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    CHECK(!fs::is_empty(dir.path)); // the temporary file exists
    kill(pid, sig);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    close(ready[0]);
    close(ready[1]);
    INFO("signal " << sig);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig); // a shell reports 128 + sig
    CHECK(fs::is_empty(dir.path));
  }
}
