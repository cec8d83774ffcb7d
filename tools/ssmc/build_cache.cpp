// The compile cache: see build_cache.h.
#include "build_cache.h"
#include "core/output.h"

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace fs = std::filesystem;

namespace ssm::tools {

namespace {

constexpr std::uint64_t default_limit = std::uint64_t{5} << 30;
constexpr std::size_t key_length = 64; // hex SHA-256

// The entries of the cache directory: key -> bytes (executable and messages) and last use.
struct Entry {
  std::uint64_t bytes = 0;
  fs::file_time_type used{};
};

bool is_key(const std::string& name) {
  return name.size() >= key_length &&
         std::all_of(name.begin(), name.begin() + key_length,
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// Reads the directory; with `remove_stale`, deletes the temporaries of builds that died more than
// an hour ago (a live one renames its temporary within seconds).
std::map<std::string, Entry> scan(const std::string& dir, bool remove_stale) {
  std::map<std::string, Entry> entries;
  std::error_code ec;
  const auto stale = fs::file_time_type::clock::now() - std::chrono::hours(1);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code file_ec;
    if (!is_key(name) || !it->is_regular_file(file_ec))
      continue;
    const std::uint64_t bytes = it->file_size(file_ec);
    const fs::file_time_type time = it->last_write_time(file_ec);
    if (file_ec) // removed meanwhile by another build
      continue;
    const std::string rest = name.substr(key_length);
    if (rest.find(".tmp.") != std::string::npos) {
      if (remove_stale && time < stale)
        fs::remove(it->path(), file_ec);
      continue;
    }
    if (!rest.empty() && rest != ".messages")
      continue;
    Entry& entry = entries[name.substr(0, key_length)];
    entry.bytes += bytes;
    if (rest.empty()) // the executable's time is the entry's last use (a hit touches it)
      entry.used = time;
  }
  return entries;
}

} // namespace

std::optional<std::uint64_t> parse_size(const std::string& text) {
  std::size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (!std::isfinite(value) || value < 0 || text.empty() || text[0] == '-' || text[0] == '+' ||
      std::isspace(static_cast<unsigned char>(text[0])))
    return std::nullopt;
  std::string unit = text.substr(end);
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  static const std::map<std::string, int> shifts = {
      {"", 0},     {"B", 0},  {"K", 10},  {"KB", 10},  {"KIB", 10}, {"M", 20},  {"MB", 20},
      {"MIB", 20}, {"G", 30}, {"GB", 30}, {"GIB", 30}, {"T", 40},   {"TB", 40}, {"TIB", 40}};
  const auto shift = shifts.find(unit);
  if (shift == shifts.end())
    return std::nullopt;
  const double bytes = std::ldexp(value, shift->second);
  if (bytes >= 0x1p63)
    return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::string format_size(std::uint64_t bytes) {
  if (bytes < 1024)
    return fmt::format("{} bytes", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  for (; value >= 1024 && unit < 3; ++unit)
    value /= 1024;
  return fmt::format("{:.1f} {}", value, units[unit]);
}

std::optional<BuildCache> BuildCache::open() {
  const char* enabled = std::getenv("SSMC_CACHE");
  if (enabled && (std::string(enabled) == "0" || std::string(enabled) == "off"))
    return std::nullopt;
  std::string dir;
  if (const char* d = std::getenv("SSMC_CACHE_DIR"); d && *d)
    dir = d;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = fmt::format("{}/ssmc", x);
  else if (const char* h = std::getenv("HOME"); h && *h)
    dir = fmt::format("{}/.cache/ssmc", h);
  else
    return std::nullopt;
  std::uint64_t limit = default_limit;
  if (const char* size = std::getenv("SSMC_CACHE_SIZE"); size && *size) {
    const std::optional<std::uint64_t> parsed = parse_size(size);
    if (!parsed)
      throw std::runtime_error(fmt::format(
          "SSMC_CACHE_SIZE is '{}': expected the compile cache's size limit, such as 500M or 5G "
          "(0: no limit)",
          size));
    limit = *parsed;
  }
  return BuildCache(dir, limit);
}

std::string BuildCache::key(const std::vector<std::string>& parts) const {
  llvm::SHA256 sha;
  for (const std::string& part : parts) {
    sha.update(fmt::format("{}:", part.size())); // length-prefixed, so parts cannot run together
    sha.update(part);
  }
  return llvm::toHex(sha.final(), /*LowerCase=*/true);
}

std::string BuildCache::entry(const std::string& key) const {
  return fmt::format("{}/{}", dir_, key);
}

std::optional<std::string> BuildCache::fetch(const std::string& key,
                                             const std::string& output) const {
  std::error_code ec;
  if (!fs::is_regular_file(entry(key), ec))
    return std::nullopt;
  std::string messages;
  if (std::ifstream in(entry(key) + ".messages"); in) {
    std::stringstream text;
    text << in.rdbuf();
    messages = text.str();
  }
  ssm::TemporaryPath tmp(output); // through a symlink, its target is replaced
  if (!fs::copy_file(entry(key), tmp.path(), fs::copy_options::overwrite_existing, ec))
    return std::nullopt;
  try {
    tmp.commit();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  fs::last_write_time(entry(key), fs::file_time_type::clock::now(), ec); // a use, for eviction
  return messages;
}

void BuildCache::store(const std::string& key, const std::string& built,
                       const std::string& messages) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  // The messages first: an entry is only found once it is complete.
  const std::string messages_tmp = fmt::format("{}.messages.tmp.{}", entry(key), getpid());
  {
    std::ofstream out(messages_tmp, std::ios::binary);
    out << messages;
    if (!out)
      ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec)
    fs::rename(messages_tmp, entry(key) + ".messages", ec);
  if (ec) {
    fs::remove(messages_tmp, ec);
    return;
  }
  std::string tmp = fmt::format("{}.tmp.{}", entry(key), getpid());
  if (fs::copy_file(built, tmp, fs::copy_options::overwrite_existing, ec))
    fs::rename(tmp, entry(key), ec); // atomic: concurrent builds of one model are safe
  if (ec) {
    fs::remove(tmp, ec);
    return;
  }
  if (limit_ > 0 && usage().bytes > limit_)
    trim(limit_ / 10 * 9, key); // some room below the cap, so that not every store evicts
}

BuildCache::Usage BuildCache::usage() const {
  Usage usage;
  for (const auto& [key, entry] : scan(dir_, /*remove_stale=*/false)) {
    ++usage.entries;
    usage.bytes += entry.bytes;
  }
  return usage;
}

void BuildCache::trim(std::uint64_t target, const std::string& keep) const {
  const std::map<std::string, Entry> entries = scan(dir_, /*remove_stale=*/true);
  std::uint64_t total = 0;
  std::vector<std::pair<fs::file_time_type, std::string>> by_use;
  for (const auto& [key, entry] : entries) {
    total += entry.bytes;
    if (key != keep)
      by_use.emplace_back(entry.used, key);
  }
  std::sort(by_use.begin(), by_use.end());
  std::error_code ec;
  for (const auto& [used, key] : by_use) {
    if (total <= target)
      break;
    // The executable first: a concurrent fetch that still finds it reads its messages or none.
    fs::remove(entry(key), ec);
    fs::remove(entry(key) + ".messages", ec);
    total -= entries.at(key).bytes;
  }
}

std::size_t BuildCache::clear() const {
  std::size_t removed = 0;
  std::error_code ec;
  for (const auto& [key, entry] : scan(dir_, /*remove_stale=*/true)) {
    removed += fs::remove(this->entry(key), ec) ? 1 : 0;
    fs::remove(this->entry(key) + ".messages", ec);
  }
  return removed;
}

std::string file_identity(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec)
    return "missing";
  auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  return fmt::format("{}:{}", size, mtime);
}

int show_cache(bool clear) {
  const std::optional<BuildCache> cache = BuildCache::open();
  if (!cache) {
    const char* enabled = std::getenv("SSMC_CACHE");
    fmt::print("the compile cache is off ({})\n",
               enabled ? fmt::format("SSMC_CACHE={}", enabled)
                       : std::string("no directory: set SSMC_CACHE_DIR or HOME"));
    return 0;
  }
  if (clear)
    fmt::print("removed {} entries from {}\n", cache->clear(), cache->directory());
  const BuildCache::Usage usage = cache->usage();
  fmt::print("directory  {}\nentries    {}\nsize       {}\nlimit      {}\n", cache->directory(),
             usage.entries, format_size(usage.bytes),
             cache->size_limit() ? format_size(cache->size_limit())
                                 : std::string("none (SSMC_CACHE_SIZE=0)"));
  return 0;
}

} // namespace ssm::tools
