// Output files: atomic temp-and-rename for regular files, written through for the others, refusal
// of an output that is an input, and removal of temporary files on SIGINT and SIGTERM.
#include "core/output.h"
#include "core/error.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace ssm {

namespace {

namespace fs = std::filesystem;

// The signal handlers may only read plain memory: fixed-size path buffers, each claimed (1),
// filled, then published (2) for the handler, and freed (0) once the file is gone or renamed.
constexpr int kMaxTemporaries = 64;
constexpr std::size_t kMaxTemporaryPath = 4096;
std::array<std::array<char, kMaxTemporaryPath>, kMaxTemporaries> temporaries;
std::array<std::atomic<int>, kMaxTemporaries> temporary_state;

extern "C" void remove_temporaries_and_die(int sig) {
  for (int i = 0; i < kMaxTemporaries; ++i)
    if (temporary_state[i].load() == 2)
      ::unlink(temporaries[i].data());
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

std::string stdio_error(const std::string& what) {
  return fmt::format("cannot write '{}': {}", what, std::strerror(errno));
}

} // namespace

int register_temporary(const std::string& path) {
  if (path.size() >= kMaxTemporaryPath)
    return -1;
  for (int i = 0; i < kMaxTemporaries; ++i) {
    int expected = 0;
    if (!temporary_state[i].compare_exchange_strong(expected, 1))
      continue;
    std::memcpy(temporaries[i].data(), path.c_str(), path.size() + 1);
    temporary_state[i].store(2);
    return i;
  }
  return -1;
}

void release_temporary(int slot) {
  if (slot >= 0)
    temporary_state[slot].store(0);
}

void install_cleanup_handlers() {
  struct sigaction action {};
  action.sa_handler = remove_temporaries_and_die;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    // A signal the parent ignores (nohup, a background job) stays ignored.
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
      continue;
    ::sigaction(sig, &action, nullptr);
  }
}

TemporaryPath::TemporaryPath(const std::string& destination, const std::string& tag) {
  // Renaming over a FIFO or a device (/dev/null) would replace it with a regular file.
  if (struct stat st{}; ::stat(destination.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Error(fmt::format("cannot write '{}': it is not a regular file", destination));
  std::error_code ec;
  target_ = fs::is_symlink(destination, ec) ? fs::weakly_canonical(destination, ec).string()
                                            : destination;
  if (ec)
    target_ = destination;
  tmp_ = fmt::format("{}.{}.{}", target_, tag, static_cast<long>(::getpid()));
  slot_ = register_temporary(tmp_);
}

TemporaryPath::~TemporaryPath() {
  if (!done_)
    ::unlink(tmp_.c_str());
  release_temporary(slot_);
}

void TemporaryPath::commit() {
  done_ = true;
  if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp_, target_, std::strerror(err)));
  }
}

OutputFile::OutputFile(const std::string& path, std::FILE* fallback) : path_(path) {
  if (path.empty() || path == "-") {
    file_ = fallback;
    is_fallback_ = true;
    return;
  }
  struct stat st {
  }, lst{};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    throw Error(fmt::format("cannot write '{}': it is a directory", path));
  // A FIFO, a device or a dangling symlink is written through, in place; a regular file (also
  // through a symlink) via a temporary file renamed over it.
  if ((exists && !S_ISREG(st.st_mode)) || (!exists && ::lstat(path.c_str(), &lst) == 0)) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_)
      throw Error(stdio_error(path));
    return;
  }
  tmp_ = std::make_unique<TemporaryPath>(path);
  file_ = std::fopen(tmp_->path().c_str(), "wb");
  if (!file_)
    throw Error(stdio_error(tmp_->path()));
}

OutputFile::~OutputFile() {
  if (!is_fallback_ && !committed_ && file_)
    std::fclose(file_); // then tmp_ removes the temporary file
}

void OutputFile::write(std::string_view data) {
  if (!file_)
    throw Error(fmt::format("write to '{}' after it was closed", path_));
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size())
    throw Error(stdio_error(is_fallback_ ? "standard output" : tmp_ ? tmp_->path() : path_));
}

void OutputFile::commit() {
  if (is_fallback_) {
    if (std::fflush(file_) != 0 || std::ferror(file_))
      throw Error(fmt::format("cannot write standard output: {}", std::strerror(errno)));
    committed_ = true;
    return;
  }
  std::FILE* f = file_;
  file_ = nullptr;
  committed_ = true;
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok)
    throw Error(fmt::format("cannot write '{}': {}", tmp_ ? tmp_->path() : path_,
                            std::strerror(err ? err : errno)));
  if (tmp_)
    tmp_->commit();
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  if (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return !ea && !eb && ca == cb;
}

void check_output_path(const std::string& path, const std::vector<std::string>& inputs) {
  if (path.empty() || path == "-")
    return;
  for (const std::string& input : inputs)
    if (!input.empty() && input != "-" && same_file(path, input))
      throw Error(fmt::format("refusing to write '{}': it is the same file as the input '{}'", path,
                              input));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      throw Error(fmt::format("cannot write '{}': it is a directory", path));
    if (!S_ISREG(st.st_mode)) { // a FIFO or a device is opened in place
      if (::access(path.c_str(), W_OK) != 0)
        throw Error(stdio_error(path));
      return;
    }
  }
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(path, ec).parent_path();
  if (ec || dir.empty())
    dir = fs::path(path).parent_path();
  if (dir.empty())
    dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(errno == ENOENT
                    ? fmt::format("cannot write '{}': the directory '{}' does not exist", path,
                                  fs::path(path).parent_path().string())
                    : stdio_error(path));
}

} // namespace ssm
