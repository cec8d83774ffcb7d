// The exception type the runtime throws for user-facing errors (bad data, bad parameters, a
// collapsed filter). The command line prints what() as `<prog>: error: <what>` and exits with 1.
#pragma once

#include <stdexcept>
#include <string>

namespace ssm {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

} // namespace ssm
