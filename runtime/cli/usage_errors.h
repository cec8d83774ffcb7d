// Usage errors of a CLI11 command line in words a user can act on: a misspelt option with the
// closest real one ("did you mean"), and an option given twice. Header-only, for the executables'
// command line (cli.cpp) and ssmc's alike.
#pragma once

#include "core/spelling.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ssm::cli {

// The long options that `app` and its parsed subcommand take, as `--name`.
inline std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  auto add = [&](const CLI::App& a) {
    for (const CLI::Option* o : a.get_options())
      for (const std::string& n : o->get_lnames())
        names.push_back("--" + n);
  };
  add(app);
  for (const CLI::App* sub : app.get_subcommands())
    add(*sub);
  return names;
}

// "unknown option '--particels'; did you mean '--particles'?" for an argument of CLI11's
// "The following arguments were not expected: 10 --particels" that looks like an option, or
// nullopt.
inline std::optional<std::string> unknown_option(const CLI::App& app, const CLI::ParseError& e) {
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  if (colon == std::string::npos)
    return std::nullopt;
  std::istringstream words(what.substr(colon + 2));
  for (std::string arg; words >> arg;) {
    if (!arg.starts_with("-") || arg == "-" || arg == "--")
      continue;
    const std::string name = arg.substr(0, arg.find('='));
    std::string message = fmt::format("unknown option '{}'", name);
    if (std::optional<std::string> guess = closest_name(name, option_names(app)))
      message += fmt::format("; did you mean '{}'?", *guess);
    return message;
  }
  return std::nullopt;
}

// "--seed given 2 times; it takes one value" for CLI11's "--seed: At Most 1 required but
// received 2", or nullopt.
inline std::optional<std::string> repeated_option(const CLI::ParseError& e) {
  const std::string what = e.what();
  const std::string marker = ": At Most 1 required but received ";
  const size_t at = what.find(marker);
  if (!dynamic_cast<const CLI::ArgumentMismatch*>(&e) || at == std::string::npos)
    return std::nullopt;
  return fmt::format("{} given {} times; it takes one value", what.substr(0, at),
                     what.substr(at + marker.size()));
}

} // namespace ssm::cli
