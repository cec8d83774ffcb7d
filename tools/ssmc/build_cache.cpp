// The compile cache: see build_cache.h.
#include "build_cache.h"
#include "core/output.h"

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <unistd.h>

namespace fs = std::filesystem;

namespace ssm::tools {

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
  return BuildCache(dir);
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
  if (ec)
    fs::remove(tmp, ec);
}

std::string file_identity(const std::string& path) {
  std::error_code ec;
  auto size = fs::file_size(path, ec);
  if (ec)
    return "missing";
  auto mtime = fs::last_write_time(path, ec).time_since_epoch().count();
  return fmt::format("{}:{}", size, mtime);
}

} // namespace ssm::tools
