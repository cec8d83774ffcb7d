// posix_spawn with both output streams captured through pipes. The pipes are drained together with
// poll() so that a child filling one of them while we wait on the other cannot deadlock.
#include "process.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace e2e {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", what, std::strerror(errno)));
}

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0)
      fail("pipe2");
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0)
        ::close(f);
  }
  void close_end(int i) {
    ::close(fd[i]);
    fd[i] = -1;
  }
};

} // namespace

std::string ProcessResult::describe() const {
  std::string status =
      signal ? fmt::format("killed by signal {}", signal) : fmt::format("exit code {}", exit_code);
  return fmt::format("$ {}\n[{}]\n--- stdout ---\n{}\n--- stderr ---\n{}", command, status,
                     out.size() > 4000 ? out.substr(0, 4000) + "..." : out, err);
}

ProcessResult run_process(const std::vector<std::string>& argv, int terminate_after_ms) {
  if (argv.empty())
    throw std::runtime_error("run_process: empty command");
  ProcessResult r;
  for (const auto& a : argv)
    r.command += (r.command.empty() ? "" : " ") +
                 (a.find_first_of(" \"'[]") == std::string::npos ? a : "'" + a + "'");

  Pipe out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);

  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    fail(fmt::format("cannot start '{}'", argv[0]));
  }
  out.close_end(1);
  err.close_end(1);

  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  char buf[65536];
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(terminate_after_ms);
  bool terminated = terminate_after_ms < 0;
  while (open > 0) {
    int timeout = -1;
    if (!terminated) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    const int ready = ::poll(fds, 2, timeout);
    if (ready < 0) {
      if (errno == EINTR)
        continue;
      fail("poll");
    }
    if (ready == 0) { // the deadline passed
      ::kill(pid, SIGTERM);
      terminated = true;
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1; // closed by the Pipe destructor
        --open;
      }
    }
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      fail("waitpid");
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

} // namespace e2e
