// Helpers that build the words of diagnostics (messages.h).
#include "messages.h"

#include <fmt/format.h>

namespace ssm::frontend::msg {

std::string plural(std::size_t n, std::string_view word) {
  if (n == 1)
    return fmt::format("1 {}", word);
  return fmt::format("{} {}", n, word == "index" ? "indices" : std::string(word) + "s");
}

} // namespace ssm::frontend::msg
