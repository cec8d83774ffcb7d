// Data is never lost: an output that is one of the run's inputs is refused (exit 1, the input
// byte-identical), whatever path spells it; symlinks, FIFOs, devices and `-` are written through;
// a directory as an output is an error.
#include "support.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <functional>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace e2e;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// The command fails with exit status 1, naming `output` and `input`, and `input` is unchanged.
void expect_refused(const std::vector<std::string>& argv, const std::string& output,
                    const std::string& input) {
  const std::string before = read_file(input);
  ProcessResult r = run_process(argv);
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("'" + output + "'") && Contains("'" + input + "'"));
  CHECK(read_file(input) == before);
}

// The other spellings of `path`: relative, through a symlink, a hard link (created in `dir`).
std::vector<std::string> spellings(const std::string& path, const std::string& dir) {
  const std::string link = dir + "/link", hard = dir + "/hard";
  fs::remove(link);
  fs::remove(hard);
  fs::create_symlink(fs::absolute(path), link);
  fs::create_hard_link(path, hard);
  return {path, fs::relative(path).string(), fs::absolute(path).string(), link, hard};
}

// Runs argv (standard output and error to `log`) and sends `sig` once `ready()` holds, as a user's
// Ctrl-C or kill would; returns the wait status, or -1 when the command ended before `ready()`.
int run_and_signal(const std::vector<std::string>& argv, int sig, const std::string& log,
                   const std::function<bool()>& ready) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(sig, SIG_DFL); // as in a foreground program (a background job ignores SIGINT)
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!ready()) {
    if (::waitpid(pid, &status, WNOHANG) == pid || std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, sig);
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

} // namespace

TEST_CASE("generated executable: an output that is an input is refused", "[e2e][outputs]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string dir = fresh_dir("same_file");
  const std::string data = dir + "/y.csv", params = dir + "/p.json";
  run_ok({exe, "simulate", "--T", "20", "--out", data});
  write_file(params, "{}\n");
  for (const std::string& out : spellings(data, dir)) {
    expect_refused({exe, "filter", "--data", data, "--out", out}, out, data);
    expect_refused({exe, "smooth", "--data", data, "--out", out}, out, data);
    expect_refused({exe, "simulate", "--T", "5", "--inputs", data, "--out", out}, out, data);
  }
  for (const std::string& out : spellings(params, dir))
    expect_refused({exe, "--params", params, "simulate", "--T", "5", "--out", out}, out, params);
}

TEST_CASE("generated executable: symlinks, FIFOs, devices and '-' are written through",
          "[e2e][outputs]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string dir = fresh_dir("write_through");
  const std::string expected = run_ok({exe, "simulate", "--T", "10"}).out;

  const std::string target = dir + "/target.csv", link = dir + "/link.csv";
  write_file(target, "old\n");
  fs::create_symlink("target.csv", link);
  run_ok({exe, "simulate", "--T", "10", "--out", link});
  CHECK(fs::is_symlink(link));
  CHECK(read_file(target) == expected);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 2);

  const std::string fifo = dir + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::string read;
  std::thread reader([&] { read = read_file(fifo); });
  run_ok({exe, "simulate", "--T", "10", "--out", fifo});
  reader.join();
  CHECK(read == expected);
  CHECK(fs::is_fifo(fifo));

  if (fs::is_character_file("/dev/null")) { // in some containers it has become a regular file
    run_ok({exe, "simulate", "--T", "10", "--out", "/dev/null"});
    CHECK(fs::is_character_file("/dev/null"));
  }
  CHECK(run_ok({exe, "simulate", "--T", "10", "--out", "-"}).out == expected);

  ProcessResult r = run_process({exe, "simulate", "--T", "10", "--out", dir});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains(dir) && Contains("directory"));
}

TEST_CASE("ssmc: -o is never the source or the IR read", "[e2e][outputs]") {
  const std::string dir = fresh_dir("ssmc_same_file");
  const std::string source = dir + "/m.ssm";
  write_file(source, read_file(example_path("lgssm1.ssm")));
  for (const std::string& out : spellings(source, dir)) {
    expect_refused({ssmc_path(), "build", source, "-o", out}, out, source);
    expect_refused({ssmc_path(), "build", source, "--emit=ir", "-o", out}, out, source);
  }
  // A module the source imports is an input too.
  const std::string importer = dir + "/imp.ssm", module = dir + "/steps.ssm";
  write_file(module, "module steps {\n  fn step(x : real) -> real = 0.9 * x;\n}\n");
  write_file(importer, "model imp {\n  import \"steps\";\n  state x : real;\n  obs y : real;\n"
                       "  x[0] ~ normal(0, 1);\n  x[t] ~ normal(step(x[t-1]), 1);\n"
                       "  y[t] ~ normal(x[t], 1);\n}\n");
  expect_refused({ssmc_path(), "build", importer, "-o", module}, module, module);
  expect_refused({ssmc_path(), "build", importer, "--emit=ir", "-o", module}, module, module);
  const std::string ir = dir + "/m.ir";
  // It says what it wrote, and nothing when the output is a device.
  CHECK(run_ok({ssmc_path(), "build", source, "--emit=ir", "-o", ir}).err ==
        "ssmc: wrote " + ir + " (the IR)\n");
  CHECK(run_ok({ssmc_path(), "build", source, "--emit=ir", "-o", "/dev/null"}).err.empty());
  for (const std::string& out : spellings(ir, dir))
    expect_refused({ssmc_path(), "opt", ir, "-o", out}, out, ir);
  // Through a symlink to another file, the link is kept and its target written.
  const std::string link = dir + "/ir-link";
  fs::create_symlink("m2.ir", link);
  run_ok({ssmc_path(), "opt", ir, "-o", link});
  CHECK(fs::is_symlink(link));
  CHECK(read_file(dir + "/m2.ir") == read_file(ir));
}

TEST_CASE("SIGINT and SIGTERM: no temporary file is left, the status is 128 + the signal",
          "[e2e][outputs]") {
  const std::string& exe = example_exe("lgssm1");
  const std::string log = scratch_path("interrupted.log");
  const std::string data = scratch_path("interrupted_data.csv");
  run_ok({exe, "simulate", "--T", "2000", "--seed", "1", "--out", data});
  for (int sig : {SIGINT, SIGTERM}) {
    INFO("signal " << sig);
    // ssmc: the 10-D model spends about half a second writing its object file (a temporary
    // beside the output); the signal is sent as soon as that file appears.
    std::string dir = fresh_dir("interrupted_build");
    int status = run_and_signal(
        {ssmc_path(), "build", example_path("lgssm.ssm"), "--no-cache", "-o", dir + "/lgssm"}, sig,
        log, [&] { return !fs::is_empty(dir); });
    INFO(read_file(log));
    REQUIRE(status != -1);
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == sig)); // a shell reports 128 + sig
    CHECK(fs::is_empty(dir));

    // A long smoothing run, interrupted after 700 ms: no output and no temporary file.
    dir = fresh_dir("interrupted_smooth");
    const auto start = std::chrono::steady_clock::now();
    status = run_and_signal(
        {exe, "smooth", "--data", data, "--method", "ffbsm", "--particles", "20000", "--threads",
         "1", "--out", dir + "/out.csv"},
        sig, log,
        [&] { return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(700); });
    REQUIRE(status != -1);
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == sig));
    CHECK(fs::is_empty(dir));
  }
}
