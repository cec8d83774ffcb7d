// The whole of a file as a string (empty if it cannot be read), for the unit tests that compare
// files or compile models from them.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace unit_test_files {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace unit_test_files
