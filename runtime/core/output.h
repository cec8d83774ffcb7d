// Atomic output files: data is written to FILE.tmp.<pid> and renamed over FILE on commit(), so an
// interrupted or failed run never leaves a half-written result under the final name.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ssm {

class OutputFile {
public:
  // An empty path or "-" writes to `fallback` (stdout by default) instead of a file. Opens the
  // temporary file at once so an unwritable destination fails before any work is done.
  explicit OutputFile(const std::string& path, std::FILE* fallback = stdout);
  ~OutputFile(); // removes the temporary file unless commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view data);
  // Flushes, closes and renames into place. Throws ssm::Error on any I/O failure.
  void commit();
  const std::string& path() const { return path_; }

private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
  bool is_fallback_ = false, committed_ = false;
};

// Throws ssm::Error naming `path` when it cannot be created (its directory is missing or not
// writable, or it is a directory), so that a long run can fail before it starts while the
// temporary file is only created once there is something to write. Empty and "-" pass.
void check_output_path(const std::string& path);

} // namespace ssm
