// Tests of a model's parameter space (learning/parameter_space.h): which parameters are learned,
// the layout and names of the unconstrained vector, the maps over the whole theta (fixed
// parameters keep their values), the gradient against finite differences, and the errors.
#include "error_of.h"
#include "learning_support.h"

#include "core/error.h"
#include "core/metadata.h"
#include "learning/parameter_space.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>

using Catch::Matchers::Contains;
using learning_test::Vector;
using ssm::test::error_of;

namespace {

// theta = [mu | sigma | rho | Q (2x2) | w (3) | c]: mu has a default, sigma a prior, rho both,
// Q a default, w a prior, c neither (so it is never learned).
ssm::ModelInfo test_model() {
  ssm::ModelInfo info;
  info.name = "space";
  auto add = [&](const std::string& name, const std::string& type, std::vector<int64_t> shape,
                 std::optional<double> lower, std::optional<double> upper,
                 std::optional<Vector> def, const std::string& prior) {
    ssm::ParamInfo p = learning_test::make_param(name, type, std::move(shape), lower, upper, prior);
    p.offset = info.n_theta;
    p.default_value = std::move(def);
    info.n_theta += p.size;
    info.params.push_back(p);
  };
  add("mu", "real", {}, {}, {}, Vector{0.5}, "");
  add("sigma", "real", {}, 0.0, {}, {}, "gamma(2, 1)");
  add("rho", "real", {}, -1.0, 1.0, Vector{0.9}, "uniform(-1, 1)");
  add("Q", "cov_matrix", {2, 2}, {}, {}, Vector{1, 0.3, 0.3, 2}, "");
  add("w", "simplex", {3}, 0.0, 1.0, {}, "dirichlet([1, 1, 1])");
  add("c", "real", {}, {}, {}, {}, "");
  return info;
}

// A value of theta inside every support.
Vector test_theta() {
  return {0.5, 1.5, 0.9, 1, 0.3, 0.3, 2, 0.2, 0.3, 0.5, 7};
}

} // namespace

TEST_CASE("parameter space: learned parameters, layout and names", "[learning]") {
  const ssm::ModelInfo info = test_model();
  const ssm::ParameterSpace all(info);
  REQUIRE(all.n_theta() == 11);
  REQUIRE(all.dimension() == 1 + 1 + 1 + 3 + 2);
  REQUIRE(all.learned().size() == 5); // c has neither a default nor a prior
  REQUIRE(all.find("c") == nullptr);
  REQUIRE(all.find("Q")->offset == 3);
  REQUIRE(all.find("Q")->index == 3);
  REQUIRE(all.find("w")->offset == 6);
  REQUIRE(all.find("w")->transform.kind() == ssm::TransformKind::Simplex);
  REQUIRE(all.find("rho")->transform.kind() == ssm::TransformKind::Interval);
  REQUIRE(all.coordinate_names() == std::vector<std::string>{"mu", "sigma", "rho", "Q[0,0]",
                                                             "Q[1,0]", "Q[1,1]", "w[0]", "w[1]"});

  const ssm::ParameterSpace some(info, {"rho", "Q"});
  REQUIRE(some.dimension() == 4);
  REQUIRE(some.find("rho") == nullptr);
  REQUIRE(some.find("w")->offset == 2);
  REQUIRE(some.coordinate_names() == std::vector<std::string>{"mu", "sigma", "w[0]", "w[1]"});
}

TEST_CASE("parameter space: maps over the whole theta; fixed parameters keep their values",
          "[learning]") {
  const ssm::ModelInfo info = test_model();
  const ssm::ParameterSpace space(info, {"rho"});
  const Vector theta = test_theta();
  const Vector u = space.unconstrain(theta);
  REQUIRE(static_cast<int64_t>(u.size()) == space.dimension());
  REQUIRE(u[0] == 0.5);                   // mu: identity
  REQUIRE(u[1] == Approx(std::log(1.5))); // sigma: log
  REQUIRE(u[2] == Approx(0));             // log L_00 of Q = log 1
  Vector back(11, -99.0);                 // what constrain does not write stays
  space.constrain(u, back);
  for (int k : {0, 1, 3, 4, 5, 6, 7, 8, 9})
    REQUIRE(std::abs(back[k] - theta[k]) <= 1e-12);
  REQUIRE(back[2] == -99);  // rho is fixed
  REQUIRE(back[10] == -99); // c is not learned

  // Moving u changes only the learned components of theta.
  Vector moved = theta;
  Vector u2 = u;
  for (double& v : u2)
    v += 0.25;
  space.constrain(u2, moved);
  REQUIRE(moved[2] == theta[2]);
  REQUIRE(moved[10] == theta[10]);
  REQUIRE(moved[1] == Approx(1.5 * std::exp(0.25)));
  REQUIRE(moved[7] + moved[8] + moved[9] == Approx(1));

  double expected = 0;
  for (const ssm::LearnedParam& l : space.learned())
    expected +=
        l.transform.log_jacobian(std::span<const double>(u2).subspan(l.offset, l.transform.size()));
  REQUIRE(space.log_jacobian(u2) == Approx(expected));
}

TEST_CASE("parameter space: the gradient over the whole theta against finite differences",
          "[learning]") {
  const ssm::ModelInfo info = test_model();
  const ssm::ParameterSpace space(info, {"mu"});
  // log p reads every component of theta, fixed and unlearned ones too.
  const auto log_p = [](const Vector& th) {
    double f = 0;
    for (size_t k = 0; k < th.size(); ++k)
      f += std::cos(0.7 * th[k] + 0.1 * k) + 0.2 * (k + 1) * th[k];
    return f;
  };
  const auto grad_log_p = [](const Vector& th) {
    Vector g(th.size());
    for (size_t k = 0; k < th.size(); ++k)
      g[k] = -0.7 * std::sin(0.7 * th[k] + 0.1 * k) + 0.2 * (k + 1);
    return g;
  };
  const Vector base = test_theta();
  const Vector u0 = space.unconstrain(base);
  for (bool with_jacobian : {false, true}) {
    const auto f = [&](const Vector& u) {
      Vector th = base;
      space.constrain(u, th);
      return log_p(th) + (with_jacobian ? space.log_jacobian(u) : 0.0);
    };
    Vector th = base;
    space.constrain(u0, th);
    const Vector grad = space.gradient(u0, grad_log_p(th), with_jacobian);
    const Vector expected = learning_test::fd_gradient(f, u0);
    for (size_t k = 0; k < grad.size(); ++k)
      REQUIRE(grad[k] == Approx(expected[k]).margin(1e-6));
  }
}

TEST_CASE("parameter space: errors name the parameter", "[learning]") {
  const ssm::ModelInfo info = test_model();
  REQUIRE_THAT(error_of([&] {
                 ssm::ParameterSpace(info, {"mu", "tau"});
               }),
               Contains("'tau'") && Contains("mu (real), sigma (real), rho (real), Q "
                                             "(cov_matrix[2]), w (simplex[3]), c (real)"));
  const ssm::ParameterSpace space(info);
  Vector theta = test_theta();
  theta[1] = -1;
  REQUIRE_THAT(error_of([&] { space.unconstrain(theta); }),
               Contains("'sigma' = -1") && Contains("gamma(2, 1)"));
  theta = test_theta();
  theta[4] = 5;
  theta[5] = 5;
  REQUIRE_THAT(error_of([&] { space.unconstrain(theta); }),
               Contains("'Q' (cov_matrix[2]) must be symmetric positive definite"));
  theta = test_theta();
  theta[9] = 0.6;
  REQUIRE_THAT(error_of([&] { space.unconstrain(theta); }),
               Contains("'w' (simplex[3]) must sum to 1"));
  // A fixed parameter is not mapped, so a value outside its support is not this space's concern.
  theta = test_theta();
  theta[2] = 2;
  REQUIRE(ssm::ParameterSpace(info, {"rho"}).unconstrain(theta).size() == 7);
}
