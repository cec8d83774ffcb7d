// Helpers shared by the linear-Gaussian end-to-end tests (test_lgssm.cpp, test_exact_methods.cpp,
// test_stdlib.cpp): blanking observations, reading columns, and the reference models of
// examples/lgssm1.ssm and examples/lgssm.ssm.
#pragma once

#include "kalman.h"
#include "support.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace e2e {

// Blanks the given columns of the given rows of a simulated CSV, alternating between an empty cell
// and NA so both spellings are exercised.
Table with_missing(Table table, const std::vector<std::string>& columns,
                   const std::vector<size_t>& rows);
// The observations of `cols`, one vector per time step.
std::vector<Eigen::VectorXd> observations(const Table& data, const std::vector<std::string>& cols);
// name[0], ..., name[n-1]
std::vector<std::string> indexed(const std::string& name, int n);
Eigen::MatrixXd matrix_from_json(const nlohmann::json& j);
// examples/lgssm1.ssm renamed `name`, with `extra` statements at the end of the model.
std::string lgssm1_source(const std::string& name, const std::string& extra);
// The local level model of the Nile data with a vague initial law, level[0] ~ N(0, 1e10) (the
// exactly diffuse one of Durbin & Koopman in the limit), as model 'nile_diffuse'.
extern const char* const kNileDiffuse;
// examples/lgssm.ssm (10-D) with the parameters of a --params file; x[0] ~ mvnormal(0, Q).
LinearGaussianModel lgssm_model(const std::string& params_file);

// examples/lgssm1.ssm with parameters other than its defaults (m0 != 0 in particular): the
// --param arguments and the matching reference model.
struct Lgssm1 {
  double a = 0.8, q = 0.7, r = 0.6, m0 = 0.5, s0 = 2;
  std::vector<std::string> params() const {
    return {"--param", fmt::format("a={}", a),  "--param", fmt::format("q={}", q),
            "--param", fmt::format("r={}", r),  "--param", fmt::format("m0={}", m0),
            "--param", fmt::format("s0={}", s0)};
  }
  LinearGaussianModel model() const {
    LinearGaussianModel m;
    m.m0 = Eigen::VectorXd::Constant(1, m0);
    m.P0 = Eigen::MatrixXd::Constant(1, 1, s0 * s0);
    m.A = Eigen::MatrixXd::Constant(1, 1, a);
    m.Q = Eigen::MatrixXd::Constant(1, 1, q * q);
    m.B = Eigen::MatrixXd::Constant(1, 1, 1.0);
    m.R = Eigen::MatrixXd::Constant(1, 1, r * r);
    return m;
  }
};

} // namespace e2e
