// Helpers shared by the linear-Gaussian end-to-end tests: see lgssm_support.h.
#include "lgssm_support.h"

#include <catch2/catch.hpp>

namespace e2e {

const char* const kNileDiffuse = R"(
model nile_diffuse {
  param sigma_eps ~ half_normal(500) = 100;
  param sigma_eta ~ half_normal(200) = 20;
  state level : real;
  obs y : real;
  level[0] ~ normal(0, 1e5);
  level[t] ~ normal(level[t-1], sigma_eta);
  y[t] ~ normal(level[t], sigma_eps);
}
)";

Table with_missing(Table table, const std::vector<std::string>& columns,
                   const std::vector<size_t>& rows) {
  int n = 0;
  for (size_t row : rows)
    for (const auto& col : columns) {
      const int j = table.column_index(col);
      REQUIRE(j >= 0);
      table.rows.at(row).at(j) = n++ % 2 ? "NA" : "";
    }
  return table;
}

std::vector<Eigen::VectorXd> observations(const Table& data, const std::vector<std::string>& cols) {
  std::vector<Eigen::VectorXd> ys(data.rows.size(), Eigen::VectorXd(cols.size()));
  for (size_t k = 0; k < cols.size(); ++k) {
    std::vector<double> c = data.column(cols[k]);
    for (size_t t = 0; t < c.size(); ++t)
      ys[t][k] = c[t];
  }
  return ys;
}

std::vector<std::string> indexed(const std::string& name, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i)
    v.push_back(fmt::format("{}[{}]", name, i));
  return v;
}

Eigen::MatrixXd matrix_from_json(const nlohmann::json& j) {
  Eigen::MatrixXd m(j.size(), j.at(0).size());
  for (size_t i = 0; i < j.size(); ++i)
    for (size_t k = 0; k < j[i].size(); ++k)
      m(i, k) = j[i][k].get<double>();
  return m;
}

std::string lgssm1_source(const std::string& name, const std::string& extra) {
  std::string source = read_file(example_path("lgssm1.ssm"));
  source.replace(source.find("model lgssm1 "), 13, "model " + name + " ");
  source.insert(source.rfind('}'), extra);
  return source;
}

LinearGaussianModel lgssm_model(const std::string& params_file) {
  const nlohmann::json p = nlohmann::json::parse(read_file(params_file));
  LinearGaussianModel m;
  m.A = matrix_from_json(p.at("A"));
  m.Q = matrix_from_json(p.at("Q"));
  m.B = matrix_from_json(p.at("B"));
  m.R = matrix_from_json(p.at("R"));
  m.m0 = Eigen::VectorXd::Zero(m.A.rows());
  m.P0 = m.Q;
  return m;
}

} // namespace e2e
