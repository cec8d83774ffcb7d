// Atomic output files (temporary file + rename).
#include "core/output.h"
#include "core/error.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace ssm {

OutputFile::OutputFile(const std::string& path, std::FILE* fallback) : path_(path) {
  if (path.empty() || path == "-") {
    file_ = fallback;
    is_fallback_ = true;
    return;
  }
  tmp_ = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (!file_)
    throw Error(fmt::format("cannot write '{}': {}", tmp_, std::strerror(errno)));
}

OutputFile::~OutputFile() {
  if (is_fallback_ || committed_)
    return;
  if (file_)
    std::fclose(file_);
  std::remove(tmp_.c_str());
}

void OutputFile::write(std::string_view data) {
  if (!file_)
    throw Error(fmt::format("write to '{}' after it was closed", path_));
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size())
    throw Error(fmt::format("cannot write '{}': {}", is_fallback_ ? "standard output" : tmp_,
                            std::strerror(errno)));
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
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp_.c_str());
    committed_ = true;
    throw Error(fmt::format("cannot write '{}': {}", tmp_, std::strerror(err ? err : errno)));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    err = errno;
    std::remove(tmp_.c_str());
    committed_ = true;
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", tmp_, path_, std::strerror(err)));
  }
  committed_ = true;
}

void check_output_path(const std::string& path) {
  if (path.empty() || path == "-")
    return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error(fmt::format("cannot write '{}': it is a directory", path));
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty())
    dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
}

} // namespace ssm
