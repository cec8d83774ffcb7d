// The message of the ssm::Error a piece of code throws, for the unit tests that check what an
// error says ("(no error)" when it throws none).
#pragma once

#include "core/error.h"

#include <functional>
#include <string>

namespace ssm::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ssm::Error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace ssm::test
