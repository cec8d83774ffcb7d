// Output files that never lose data: a regular file is written to a temporary file beside it and
// renamed into place on commit(); a symlink, FIFO or device is written through, never replaced;
// an output that is one of the run's inputs is refused; and SIGINT/SIGTERM remove every pending
// temporary file before the process dies.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ssm {

// A temporary file name beside `destination` (beside its target when it is a symlink, so the link
// is kept and the rename stays within one file system), registered for the signal handlers.
// commit() renames it over the destination; otherwise the destructor removes whatever is there.
// A destination that exists and is not a regular file (a FIFO, a device) is an ssm::Error.
class TemporaryPath {
public:
  explicit TemporaryPath(const std::string& destination, const std::string& tag = "tmp");
  ~TemporaryPath();
  TemporaryPath(const TemporaryPath&) = delete;
  TemporaryPath& operator=(const TemporaryPath&) = delete;

  const std::string& path() const { return tmp_; }
  void commit(); // throws ssm::Error when the rename fails (and removes the temporary file)

private:
  std::string target_, tmp_;
  int slot_ = -1;
  bool done_ = false;
};

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
  std::string path_;
  std::unique_ptr<TemporaryPath> tmp_; // none when a FIFO or a device is written in place
  std::FILE* file_ = nullptr;
  bool is_fallback_ = false, committed_ = false;
};

// True when `a` and `b` name the same file: the same device and inode when both exist (a hard
// link, a symlink, another spelling), else the same canonical path.
bool same_file(const std::string& a, const std::string& b);

// Throws ssm::Error naming `path` when it is one of `inputs` (see same_file) or cannot be created
// (its directory is missing or not writable, or it is a directory), so that a long run fails
// before it starts while the temporary file is only created once there is something to write.
// Empty and "-" pass; empty inputs are skipped.
void check_output_path(const std::string& path, const std::vector<std::string>& inputs = {});

// A temporary file to remove if the process is interrupted (a fixed-size registry the signal
// handlers read). register_temporary returns a slot for release_temporary, or -1 when full.
int register_temporary(const std::string& path);
void release_temporary(int slot);
// Installs SIGINT and SIGTERM handlers that unlink the registered temporary files, then die by
// the signal with its default action (exit status 128 + the signal). Idempotent.
void install_cleanup_handlers();

} // namespace ssm
