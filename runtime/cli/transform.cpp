// `unconstrain` and `constrain`: parameter draws mapped to the unconstrained coordinates that the
// learning methods move in (Stan's transforms: learning/param_transform.h) and back. A --prior
// density is a density of those coordinates, so `unconstrain` of `sample`'s or `vi`'s draws,
// fitted by `ssmc density fit`, makes one data set's posterior the next one's prior; `constrain`
// maps draws of the coordinates (`ssmc density sample`) back to parameter values.
#include "cli/command.h"
#include "core/error.h"
#include "core/output.h"
#include "learning/parameter_space.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace ssm::cli {

namespace {

// A CSV file of draws, its `#` comment lines (Stan's) skipped. A file `vi` wrote (CmdStan's
// variational layout: log_p__ and log_g__ columns) starts with the mean of q, which is no draw.
CsvTable read_draws(const std::string& path) {
  CsvTable table = read_csv(path, true);
  const auto has = [&](const char* name) {
    return std::find(table.header.begin(), table.header.end(), name) != table.header.end();
  };
  if (has("log_p__") && has("log_g__") && !table.rows.empty()) {
    table.rows.erase(table.rows.begin());
    table.lines.erase(table.lines.begin());
  }
  if (table.rows.empty())
    throw Error(fmt::format("{}: no draws (a header and no rows)", path));
  return table;
}

// The column of each name in `wanted` (the first of its spellings found), or an error naming
// the file, what is missing and what the file has.
std::vector<size_t> find_columns(const CsvTable& table, const std::string& path,
                                 const std::vector<std::vector<std::string>>& wanted,
                                 const char* what) {
  std::vector<size_t> at;
  for (const std::vector<std::string>& spellings : wanted) {
    size_t found = table.header.size();
    for (const std::string& name : spellings)
      if (auto it = std::find(table.header.begin(), table.header.end(), name);
          it != table.header.end() && found == table.header.size())
        found = static_cast<size_t>(it - table.header.begin());
    if (found == table.header.size())
      throw Error(fmt::format("{}: no column '{}' ({}); its columns are {}", path,
                              fmt::join(spellings, "' or '"), what, fmt::join(table.header, ", ")));
    at.push_back(found);
  }
  return at;
}

class Transform : public Command {
public:
  Transform(CLI::App* app, bool to_unconstrained)
      : Command(app), to_unconstrained_(to_unconstrained) {
    app->add_option("--from", draws_,
                    to_unconstrained
                        ? "Draws of the parameters: Stan CSV files (sample --out, vi --out or "
                          "--param-draws; `#` lines and vi's first row, q's mean, skipped) or CSV "
                          "with Stan's or ssmc's names (sigma, mu.2 or mu[1]); repeatable, rows "
                          "appended"
                        : "Draws of the unconstrained coordinates (`ssmc density sample`), "
                          "columns named as unconstrain writes them; repeatable")
        ->required()
        ->type_name("FILE.csv");
    app->add_option("--fix", fixed_,
                    "A parameter that is not learned (repeatable), as for sample's --fix")
        ->type_name("NAME");
    app->add_option("--out", out_, "Output CSV file (default: standard output)")
        ->type_name("FILE.csv");
  }

  void run(const Context& c, const ParamValues&) override {
    const ParameterSpace space(c.info, fixed_);
    space.require_some(app_->get_name(), "map");
    check_output_path(out_);
    // Only the learned components are read or written: the others may stay 0.
    const std::vector<double> given(static_cast<size_t>(c.info.n_theta), 0.0);
    // The columns read and written: the learned components by Stan's name (ssmc's accepted
    // too), and the unconstrained coordinates.
    std::vector<std::vector<std::string>> components;
    std::vector<std::string> stan_columns;
    for (const LearnedParam& l : space.learned()) {
      const ParamInfo& p = c.info.params[l.index];
      const std::vector<std::string> ours = column_names(p.name, p.shape);
      for (int64_t k = 0; k < p.size; ++k) {
        stan_columns.push_back(stan_name(p.name, p.shape, k));
        components.push_back({stan_columns.back()});
        if (ours[static_cast<size_t>(k)] != stan_columns.back())
          components.back().push_back(ours[static_cast<size_t>(k)]);
      }
    }
    std::vector<std::vector<std::string>> coordinates;
    std::vector<std::string> coordinate_columns;
    for (const std::string& name : space.coordinate_names()) {
      coordinates.push_back({name});
      coordinate_columns.push_back(csv_name(name));
    }
    const auto& read = to_unconstrained_ ? components : coordinates;
    const std::vector<std::string>& written = to_unconstrained_ ? coordinate_columns : stan_columns;

    std::string csv = fmt::format("{}\n", fmt::join(written, ","));
    int64_t skipped = 0;
    const auto n = static_cast<size_t>(space.n_theta());
    for (const std::string& path : draws_) {
      const CsvTable table = read_draws(path);
      const std::vector<size_t> at = find_columns(
          table, path, read,
          to_unconstrained_ ? "a learned parameter's component" : "an unconstrained coordinate");
      for (size_t r = 0; r < table.rows.size(); ++r) {
        std::vector<double> point(at.size());
        size_t missing = 0;
        for (size_t k = 0; k < at.size(); ++k)
          missing += !parse_cell(table.rows[r][at[k]], point[k], path, table.lines[r],
                                 table.header[at[k]]);
        if (missing == at.size()) { // vi's row for a draw whose parameters overflow
          ++skipped;
          continue;
        }
        for (size_t k = 0; k < at.size(); ++k)
          if (std::isnan(point[k]))
            throw Error(fmt::format("{}:{}: column '{}': a missing value", path, table.lines[r],
                                    table.header[at[k]]));
        std::vector<double> out;
        try {
          if (to_unconstrained_) {
            std::vector<double> theta = given;
            size_t k = 0;
            for (const LearnedParam& l : space.learned()) {
              const ParamInfo& p = c.info.params[l.index];
              for (int64_t j = 0; j < p.size; ++j)
                theta[static_cast<size_t>(p.offset + j)] = point[k++];
            }
            out = space.unconstrain({theta.data(), n});
          } else {
            std::vector<double> theta = given;
            space.constrain(point, {theta.data(), n});
            for (const LearnedParam& l : space.learned()) {
              const ParamInfo& p = c.info.params[l.index];
              out.insert(out.end(), theta.begin() + p.offset, theta.begin() + p.offset + p.size);
            }
          }
        } catch (const Error& e) { // outside the support, or overflowing: the row says which
          throw Error(fmt::format("{}:{}: {}", path, table.lines[r], e.what()));
        }
        for (size_t k = 0; k < out.size(); ++k) {
          if (k > 0)
            csv += ',';
          csv += format_double(out[k]);
        }
        csv += '\n';
      }
    }
    if (skipped > 0)
      warn(c, fmt::format("{}: {} row{} without values (draws whose parameters overflow) "
                          "skipped",
                          app_->get_name(), skipped, skipped == 1 ? "" : "s"));
    write_output(c, out_, csv);
  }

private:
  bool to_unconstrained_;
  std::vector<std::string> draws_, fixed_;
  std::string out_;
};

} // namespace

std::unique_ptr<Command> add_unconstrain(CLI::App& app, const Context&) {
  return std::make_unique<Transform>(
      app.add_subcommand("unconstrain",
                         "Map draws of the learned parameters to their unconstrained coordinates "
                         "(the scale of a --prior density); CSV, one column per coordinate"),
      true);
}

std::unique_ptr<Command> add_constrain(CLI::App& app, const Context&) {
  return std::make_unique<Transform>(
      app.add_subcommand("constrain", "Map draws of the unconstrained coordinates back to the "
                                      "learned parameters' values; CSV with Stan's names"),
      false);
}

} // namespace ssm::cli
