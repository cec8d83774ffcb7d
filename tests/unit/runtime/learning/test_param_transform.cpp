// Tests of one parameter's unconstrained map (learning/param_transform.h) for each kind: round
// trips at random points (fixed seed), the log-Jacobian against finite differences, the gradient
// chain rule against finite differences of a test function, Stan's reference values, the errors.
#include "error_of.h"
#include "learning_support.h"

#include "core/error.h"
#include "learning/param_transform.h"

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <random>
#include <string>

using Catch::Matchers::Contains;
using learning_test::make_param;
using learning_test::Vector;
using ssm::test::error_of;

namespace {

Vector constrain(const ssm::ParamTransform& t, const Vector& u) {
  Vector x(t.param().size);
  t.constrain(u, x);
  return x;
}

Vector unconstrain(const ssm::ParamTransform& t, const Vector& x) {
  Vector u(t.size());
  t.unconstrain(x, u);
  return u;
}

// The free components of x, those the Jacobian is taken to: the lower triangle of a cov_matrix
// (row by row), the first K - 1 components of a simplex, all others.
Vector free_components(const ssm::ParamTransform& t, const Vector& x) {
  if (t.kind() == ssm::TransformKind::CovMatrix) {
    const int64_t d = t.param().shape[0];
    Vector out;
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j <= i; ++j)
        out.push_back(x[i * d + j]);
    return out;
  }
  if (t.kind() == ssm::TransformKind::Simplex)
    return Vector(x.begin(), x.end() - 1);
  return x;
}

// A parameter of each kind, with a way to draw a random constrained value of it.
struct Case {
  ssm::ParamInfo param;
  std::function<Vector(std::mt19937_64&)> draw;
};

std::vector<Case> cases() {
  auto normals = [](std::mt19937_64& rng, int64_t n, double sd) {
    std::normal_distribution<double> z(0, sd);
    Vector v(n);
    for (double& x : v)
      x = z(rng);
    return v;
  };
  std::vector<Case> out;
  out.push_back({make_param("mu", "real", {}), [=](auto& rng) { return normals(rng, 1, 3); }});
  out.push_back({make_param("A", "matrix", {2, 2}), [=](auto& rng) { return normals(rng, 4, 2); }});
  out.push_back({make_param("sigma", "vector", {3}, 0.5, {}, "gamma(2, 1)"), [=](auto& rng) {
                   Vector v = normals(rng, 3, 1);
                   for (double& x : v)
                     x = 0.5 + std::exp(x);
                   return v;
                 }});
  out.push_back({make_param("b", "real", {}, {}, 2.0),
                 [=](auto& rng) { return Vector{2 - std::exp(normals(rng, 1, 1)[0])}; }});
  out.push_back({make_param("rho", "vector", {2}, -1.0, 3.0, "uniform(-1, 3)"), [](auto& rng) {
                   std::uniform_real_distribution<double> unif(0.01, 0.99);
                   return Vector{-1 + 4 * unif(rng), -1 + 4 * unif(rng)};
                 }});
  out.push_back({make_param("Q", "cov_matrix", {3, 3}), [=](auto& rng) {
                   const Vector a = normals(rng, 9, 1);
                   const Eigen::Map<const Eigen::Matrix3d> A(a.data());
                   const Eigen::Matrix3d S = A * A.transpose() + 0.5 * Eigen::Matrix3d::Identity();
                   return Vector(S.data(), S.data() + 9);
                 }});
  out.push_back({make_param("w", "simplex", {4}), [](auto& rng) {
                   std::exponential_distribution<double> e(1.0);
                   Vector v(4);
                   double total = 0;
                   for (double& x : v)
                     total += x = e(rng);
                   for (double& x : v)
                     x /= total;
                   return v;
                 }});
  return out;
}

// A test log density of the constrained value, reading every component with its own weight
// (both triangles of a cov_matrix differently, all K of a simplex), and its gradient.
double test_function(const Vector& x) {
  double f = 0;
  for (size_t k = 0; k < x.size(); ++k)
    f += (0.3 + 0.1 * k) * x[k] - 0.05 * (k + 1) * x[k] * x[k] + std::sin(x[k]);
  return f;
}
Vector test_gradient(const Vector& x) {
  Vector g(x.size());
  for (size_t k = 0; k < x.size(); ++k)
    g[k] = (0.3 + 0.1 * k) - 0.1 * (k + 1) * x[k] + std::cos(x[k]);
  return g;
}

} // namespace

TEST_CASE("param transform: constrain(unconstrain(x)) == x for every kind", "[learning]") {
  std::mt19937_64 rng(20261125);
  for (const Case& c : cases()) {
    const ssm::ParamTransform t(c.param);
    INFO(c.param.name << " (" << ssm::type_string(c.param) << ")");
    for (int rep = 0; rep < 50; ++rep) {
      const Vector x = c.draw(rng);
      const Vector u = unconstrain(t, x);
      REQUIRE(static_cast<int64_t>(u.size()) == t.size());
      const Vector back = constrain(t, u);
      for (size_t k = 0; k < x.size(); ++k)
        REQUIRE(std::abs(back[k] - x[k]) <= 1e-12);
      const Vector u_back = unconstrain(t, back);
      for (size_t k = 0; k < u.size(); ++k)
        REQUIRE(std::abs(u_back[k] - u[k]) <= 1e-9 * std::max(1.0, std::abs(u[k])));
    }
  }
}

TEST_CASE("param transform: log-Jacobian equals log|det| of the finite-difference Jacobian",
          "[learning]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z(0, 0.8);
  for (const Case& c : cases()) {
    const ssm::ParamTransform t(c.param);
    INFO(c.param.name << " (" << ssm::type_string(c.param) << ")");
    for (int rep = 0; rep < 10; ++rep) {
      Vector u(t.size());
      for (double& v : u)
        v = z(rng);
      const auto free_of_u = [&](const Vector& v) { return free_components(t, constrain(t, v)); };
      const Eigen::MatrixXd J = learning_test::fd_jacobian(free_of_u, u);
      REQUIRE(J.rows() == J.cols());
      REQUIRE(t.log_jacobian(u) == Approx(learning_test::log_abs_det(J)).margin(1e-6));
    }
  }
}

TEST_CASE("param transform: the gradient chain rule against finite differences", "[learning]") {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> z(0, 0.8);
  for (const Case& c : cases()) {
    const ssm::ParamTransform t(c.param);
    for (bool with_jacobian : {false, true}) {
      INFO(c.param.name << " (" << ssm::type_string(c.param) << ")"
                        << (with_jacobian ? " with the log-Jacobian" : ""));
      for (int rep = 0; rep < 10; ++rep) {
        Vector u(t.size());
        for (double& v : u)
          v = z(rng);
        const auto f = [&](const Vector& v) {
          return test_function(constrain(t, v)) + (with_jacobian ? t.log_jacobian(v) : 0.0);
        };
        const Vector expected = learning_test::fd_gradient(f, u);
        Vector grad_u(t.size());
        t.gradient(u, test_gradient(constrain(t, u)), grad_u, with_jacobian);
        for (size_t k = 0; k < u.size(); ++k)
          REQUIRE(grad_u[k] == Approx(expected[k]).margin(1e-6));
      }
    }
  }
}

TEST_CASE("param transform: Stan's reference points", "[learning]") {
  SECTION("unbounded: the identity, log-Jacobian 0") {
    const ssm::ParamTransform t(make_param("A", "matrix", {2, 2}));
    REQUIRE(t.kind() == ssm::TransformKind::Identity);
    const Vector u{-1.5, 0, 2.25, 1e6};
    REQUIRE(constrain(t, u) == u);
    REQUIRE(unconstrain(t, u) == u);
    REQUIRE(t.log_jacobian(u) == 0);
    Vector g(4);
    t.gradient(u, Vector{1, 2, 3, 4}, g, true);
    REQUIRE(g == Vector{1, 2, 3, 4});
  }
  SECTION("0 maps to the uniform simplex") {
    for (int64_t K : {1, 2, 3, 5, 10}) {
      const ssm::ParamTransform t(make_param("w", "simplex", {K}));
      REQUIRE(t.size() == K - 1);
      for (double x : constrain(t, Vector(K - 1, 0.0)))
        REQUIRE(x == Approx(1.0 / K).epsilon(1e-15));
      for (double u : unconstrain(t, Vector(K, 1.0 / K)))
        REQUIRE(std::abs(u) < 1e-14);
    }
  }
  SECTION("bounds: 0 maps to a + 1, b - 1, the midpoint") {
    REQUIRE(constrain(ssm::ParamTransform(make_param("s", "real", {}, 2.0)), {0.0})[0] == 3);
    REQUIRE(constrain(ssm::ParamTransform(make_param("s", "real", {}, {}, 2.0)), {0.0})[0] == 1);
    REQUIRE(constrain(ssm::ParamTransform(make_param("s", "real", {}, 2.0, 6.0)), {0.0})[0] == 4);
    REQUIRE(unconstrain(ssm::ParamTransform(make_param("s", "real", {}, 1.0)), {1 + M_E})[0] ==
            Approx(1));
  }
  SECTION("cov_matrix: 0 maps to the identity; the layout of u") {
    const ssm::ParamTransform t(make_param("Q", "cov_matrix", {2, 2}));
    REQUIRE(t.size() == 3);
    REQUIRE(constrain(t, {0, 0, 0}) == Vector{1, 0, 0, 1});
    // L = [[2, 0], [0.5, 3]]: u = (log 2, 0.5, log 3), Sigma = L L^T.
    const Vector x = constrain(t, {std::log(2.0), 0.5, std::log(3.0)});
    REQUIRE(x[0] == Approx(4));
    REQUIRE(x[1] == Approx(1));
    REQUIRE(x[2] == Approx(1));
    REQUIRE(x[3] == Approx(9.25));
    REQUIRE(t.coordinate_names() == std::vector<std::string>{"Q[0,0]", "Q[1,0]", "Q[1,1]"});
  }
  SECTION("far from 0, the log-Jacobians stay finite where the maps underflow") {
    const ssm::ParamTransform simplex(make_param("w", "simplex", {3}));
    REQUIRE(constrain(simplex, {800, 0})[1] == 0); // the stick after w[0] underflows
    REQUIRE(simplex.log_jacobian(Vector{800, 0}) ==
            Approx(-1600)); // 2 (-(800 - log 2)) + 2 log 0.5
    const ssm::ParamTransform interval(make_param("rho", "real", {}, -1.0, 1.0));
    REQUIRE(interval.log_jacobian(Vector{-800}) == Approx(std::log(2.0) - 800));
  }
  SECTION("coordinate names") {
    REQUIRE(ssm::ParamTransform(make_param("sigma", "real", {}, 0.0)).coordinate_names() ==
            std::vector<std::string>{"sigma"});
    REQUIRE(ssm::ParamTransform(make_param("w", "simplex", {4})).coordinate_names() ==
            std::vector<std::string>{"w[0]", "w[1]", "w[2]"});
    REQUIRE(ssm::ParamTransform(make_param("A", "matrix", {1, 2})).coordinate_names() ==
            std::vector<std::string>{"A[0,0]", "A[0,1]"});
  }
}

TEST_CASE("param transform: values outside the support are clear errors", "[learning]") {
  const ssm::ParamTransform positive(make_param("sigma", "vector", {3}, 0.0, {}, "gamma(2, 1)"));
  std::string e = error_of([&] { unconstrain(positive, {1, 0, 2}); });
  REQUIRE_THAT(e, Contains("'sigma[1]' = 0") && Contains("(0, inf)") && Contains("gamma(2, 1)"));
  e = error_of([&] { unconstrain(positive, {1, NAN, 2}); });
  REQUIRE_THAT(e, Contains("'sigma[1]' = nan") && Contains("finite"));
  const ssm::ParamTransform interval(make_param("rho", "real", {}, -1.0, 1.0));
  REQUIRE_THAT(error_of([&] { unconstrain(interval, {1.5}); }),
               Contains("'rho' = 1.5") && Contains("(-1, 1)"));
  const ssm::ParamTransform upper(make_param("b", "real", {}, {}, 0.0));
  REQUIRE_THAT(error_of([&] { unconstrain(upper, {0.0}); }), Contains("(-inf, 0)"));

  const ssm::ParamTransform cov(make_param("Q", "cov_matrix", {2, 2}));
  REQUIRE_THAT(error_of([&] {
                 unconstrain(cov, {1, 0.5, 0.4, 1});
               }),
               Contains("symmetric positive definite") && Contains("'Q[1,0]' = 0.4"));
  REQUIRE_THAT(error_of([&] {
                 unconstrain(cov, {1, 2, 2, 1});
               }),
               Contains("'Q' (cov_matrix[2]) must be symmetric positive definite"));

  const ssm::ParamTransform simplex(make_param("w", "simplex", {3}));
  REQUIRE_THAT(error_of([&] {
                 unconstrain(simplex, {0.5, 0.3, 0.3});
               }),
               Contains("'w' (simplex[3]) must sum to 1") && Contains("1.1"));
  REQUIRE_THAT(error_of([&] {
                 unconstrain(simplex, {0.5, 0, 0.5});
               }),
               Contains("positive") && Contains("'w[1]' = 0"));
  REQUIRE(error_of([&] { unconstrain(simplex, {0.5, 0.3, 0.2 + 5e-9}); }) == "(no error)");
  REQUIRE_THAT(error_of([&] {
                 unconstrain(simplex, {0.5, 0.3, 0.2 + 2e-8});
               }),
               Contains("sum to 1"));
}

TEST_CASE("param transform: bad unconstrained points and bad declarations", "[learning]") {
  const ssm::ParamTransform cov(make_param("Q", "cov_matrix", {2, 2}));
  REQUIRE_THAT(error_of([&] {
                 constrain(cov, {0, NAN, 0});
               }),
               Contains("'Q'") && Contains("'Q[1,0]' is nan"));
  const ssm::ParamTransform positive(make_param("sigma", "real", {}, 0.0));
  REQUIRE_THAT(error_of([&] { constrain(positive, {1000}); }),
               Contains("'sigma' overflows") && Contains("inf"));
  REQUIRE_THAT(error_of([] { ssm::ParamTransform(make_param("k", "int", {})); }),
               Contains("parameter 'k'") && Contains("only real, vector, matrix"));
  REQUIRE_THAT(error_of([] { ssm::ParamTransform(make_param("s", "real", {}, 2.0, 2.0)); }),
               Contains("(2, 2) is empty"));
}
