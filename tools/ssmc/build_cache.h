// A cache of compiled models. The key is a SHA-256 of everything that determines the output: the
// model's source text and path (the path is embedded in the executable's metadata), what is
// emitted, the pass pipeline, ssmc's version and binary, the runtime libraries and kernel bitcode
// it links (size and modification time), the host CPU and features the kernels are tuned for, the
// C++ driver, the contents of the pass plugins loaded (--load-pass) and of the modules the model
// imports (directly or through other modules). Rebuilding an unchanged model copies the cached
// file instead of compiling it.
//
// The directory is $SSMC_CACHE_DIR, else $XDG_CACHE_HOME/ssmc, else ~/.cache/ssmc; SSMC_CACHE=0 or
// `ssmc build --no-cache` turns it off. Its size is capped ($SSMC_CACHE_SIZE, default 5G, as
// ccache's): a store that takes it over the cap evicts the least recently used entries (a hit
// counts as a use) down to 90% of it, so that a busy machine's disk never fills with old builds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ssm::tools {

class BuildCache {
public:
  // nullopt when caching is turned off or no directory can be determined.
  static std::optional<BuildCache> open();

  // The key of an output made from these inputs: each part is a string or the contents of a file.
  std::string key(const std::vector<std::string>& parts) const;

  // Copies the entry to `output` (atomically, keeping its permissions) and returns the compiler's
  // messages (warnings) from when it was built, to be shown again; nullopt on a miss.
  std::optional<std::string> fetch(const std::string& key, const std::string& output) const;

  // Stores a copy of `built` and the messages its compilation printed. Failures are ignored: a
  // cache that cannot be written is only slower.
  void store(const std::string& key, const std::string& built, const std::string& messages) const;

  const std::string& directory() const { return dir_; }
  // In bytes; 0 is no limit.
  std::uint64_t size_limit() const { return limit_; }

  struct Usage {
    std::size_t entries = 0;
    std::uint64_t bytes = 0;
  };
  Usage usage() const;

  // Evicts the least recently used entries, never `keep`, until the cache holds at most `target`
  // bytes; also removes temporary files that a killed build left more than an hour ago.
  void trim(std::uint64_t target, const std::string& keep = "") const;

  // Removes every entry; returns how many.
  std::size_t clear() const;

private:
  BuildCache(std::string dir, std::uint64_t limit) : dir_(std::move(dir)), limit_(limit) {}
  std::string entry(const std::string& key) const;
  std::string dir_;
  std::uint64_t limit_;
};

// Parses a size such as 500M, 5G, 1.5GiB or 123456 (bytes; the suffixes are powers of 1024);
// nullopt if it is not one.
std::optional<std::uint64_t> parse_size(const std::string& text);
// 1.5 GiB, 231.4 MiB, 812 bytes.
std::string format_size(std::uint64_t bytes);

// `ssmc cache [--clear]`: prints the directory, the entries, their size and the cap (after
// removing every entry, with `clear`), or that the cache is off; returns the exit status.
int show_cache(bool clear);

// "size:mtime" of a file, or "missing": a cheap identity that changes when the file is rebuilt.
std::string file_identity(const std::string& path);

} // namespace ssm::tools
