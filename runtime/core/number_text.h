// Reading a number written as text (a CSV cell, --param, a literal in a model), with the reason
// when it is none: a number too large or too small for a double says so, rather than becoming
// inf or 0 without a word. Header-only, for the frontend and the runtime alike.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace ssm {

struct NumberText {
  std::optional<double> value;
  std::string problem;       // when value is empty: "overflows a double (...)", "is not a number"
  bool out_of_range = false; // a number, but too large or too small for a double
};

// The whole of `text` as a double (a leading '+' allowed).
inline NumberText read_number(std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+')
    s.remove_prefix(1);
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  if (s.empty() || end != s.data() + s.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range))
    return {std::nullopt, "is not a number"};
  if (ec == std::errc::result_out_of_range) { // subnormal values are read; beyond them, not
    const std::string copy(s);
    const double rounded = std::strtod(copy.c_str(), nullptr);
    if (std::isinf(rounded))
      return {std::nullopt, "overflows a double (the largest is about 1.8e308)", true};
    return {std::nullopt,
            "underflows a double: it would be 0 (the smallest positive double is about 4.9e-324)",
            true};
  }
  return {d, ""};
}

} // namespace ssm
