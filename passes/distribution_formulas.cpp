// Each distribution's log-density as IR and the upper bound of its density, side by side, and the
// table that maps ir::Dist to them: see distribution_formulas.h.
#include "distribution_formulas.h"

#include "ir/printer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ssm::passes {

std::string BoundTerms::text(int node) const {
  return ir::print_expr(model_, arena_, node);
}

std::optional<double> BoundTerms::constant(int id) const {
  if (b[id].op == ir::Op::Const && b[id].shape.is_scalar())
    return b[id].values[0];
  return std::nullopt;
}

int BoundTerms::pi_times(double c) {
  ir::Node mul;
  mul.op = ir::Op::Mul;
  mul.args = {b.constant(c), b.constant(std::numbers::pi)};
  return b.raw(std::move(mul));
}

int BoundTerms::call_raw(const char* fn, int x) {
  ir::Node n;
  n.op = ir::Op::Call;
  n.fn = fn;
  n.args = {x};
  return b.raw(std::move(n));
}

int BoundTerms::where(const std::vector<int>& conditions, int bound) {
  if (conditions.empty())
    return bound;
  int all = -1;
  for (int c : conditions)
    all = all < 0 ? c : b.call("and", {all, c});
  return b.select(all, bound, b.constant(NAN));
}

int BoundTerms::shape_term(int s, int total) {
  const int sm1 = b.materialize(b.sub(s, b.constant(1)));
  return b.select(b.call("eq", {sm1, b.constant(0)}), b.constant(0),
                  b.mul(sm1, b.call("log", {b.div(sm1, total)})));
}

namespace {

using Args = std::vector<int>;

const double half_log_2pi = 0.5 * std::log(2 * std::numbers::pi);

// (2 pi)^(-d/2), the multivariate normal's constant, as a Pow node kept symbolic (not yet added).
ir::Node two_pi_power(BoundTerms& f, int d) {
  ir::Node p;
  p.op = ir::Op::Pow;
  p.args = {f.pi_times(2), f.b.constant(-d / 2.0)};
  return p;
}

// A probability mass is at most 1 (an upper bound, not the density at the mode).
ComponentBound mass_bound(BoundTerms& f, const Args&, int) {
  return {f.b.constant(1), false, {}, {}};
}

// normal(mu, sigma): -((x - mu) / s)^2 / 2 - log s - log(2 pi) / 2; bound 1 / (sigma sqrt(2 pi))
// at the mean.
int normal_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  return b.sub(b.sub(b.neg(b.div(f.sq(b.div(b.sub(x, f.arg(0, i)), f.arg(1, i))), f.c(2))),
                     f.log(f.arg(1, i))),
               f.c(half_log_2pi));
}
ComponentBound normal_bound(BoundTerms& f, const Args& a, int) {
  return {f.one_over(f.b.mul(a[1], f.sqrt_2pi())), true, {}, {}};
}

// lognormal(mu, sigma): the normal's of log x, less log x; bound at the mode exp(mu - sigma^2):
// exp(sigma^2 / 2 - mu) / (sigma sqrt(2 pi)).
int lognormal_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int lx = f.log(x);
  return b.sub(b.sub(b.sub(b.neg(b.div(f.sq(b.div(b.sub(lx, f.arg(0, i)), f.arg(1, i))), f.c(2))),
                           f.log(f.arg(1, i))),
                     lx),
               f.c(half_log_2pi));
}
ComponentBound lognormal_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  int s2 = b.pow(a[1], b.constant(2));
  int e = b.call("exp", {b.materialize(b.sub(b.div(s2, b.constant(2)), a[0]))});
  return {b.div(e, b.mul(a[1], f.sqrt_2pi())), true, {}, {}};
}

// student_t(nu, mu, sigma): lgamma((nu+1)/2) - lgamma(nu/2) - log(sqrt(nu pi) s)
//   - (nu+1)/2 log(1 + ((x - mu)/s)^2 / nu); bound Gamma((nu+1)/2) / (Gamma(nu/2) sqrt(nu pi)
//   sigma) at mu.
int student_t_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int nu = f.arg(0, i), z = b.div(b.sub(x, f.arg(1, i)), f.arg(2, i));
  const int h = b.div(b.add(nu, f.c(1)), f.c(2));
  return b.sub(b.sub(b.sub(b.call("lgamma", {h}), b.call("lgamma", {b.div(nu, f.c(2))})),
                     f.log(b.mul(b.call("sqrt", {b.mul(nu, f.c(std::numbers::pi))}), f.arg(2, i)))),
               b.mul(h, f.log(b.add(f.c(1), b.div(f.sq(z), nu)))));
}
ComponentBound student_t_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  if (auto nu = f.constant(a[0])) {
    double k = std::exp(std::lgamma((*nu + 1) / 2) - std::lgamma(*nu / 2)) /
               std::sqrt(*nu * std::numbers::pi);
    return {b.div(b.constant(k), a[2]), true, {}, {}};
  }
  int half = b.constant(2);
  int ratio = b.call(
      "exp", {b.materialize(b.sub(b.call("lgamma", {b.div(b.add(a[0], b.constant(1)), half)}),
                                  b.call("lgamma", {b.div(a[0], half)})))});
  return {b.div(ratio, b.mul(b.call("sqrt", {b.mul(a[0], b.constant(std::numbers::pi))}), a[2])),
          true,
          {},
          {}};
}

// half_normal(sigma): log 2 + normal(0, s) on x >= 0; bound sqrt(2 / pi) / sigma at 0.
int half_normal_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  return b.sub(b.sub(b.neg(b.div(f.sq(b.div(x, f.arg(0, i))), f.c(2))), f.log(f.arg(0, i))),
               f.c(half_log_2pi - std::log(2.0)));
}
ComponentBound half_normal_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  ir::Node over;
  over.op = ir::Op::Div;
  over.args = {b.constant(2), b.constant(std::numbers::pi)};
  return {b.div(f.sqrt_raw(b.raw(std::move(over))), a[0]), true, {}, {}};
}

// uniform(lo, hi): -log(hi - lo) on the support; bound 1 / (hi - lo).
int uniform_log_density(LogDensityTerms& f, int, int i) {
  return f.b.neg(f.log(f.b.sub(f.arg(1, i), f.arg(0, i))));
}
ComponentBound uniform_bound(BoundTerms& f, const Args& a, int) {
  return {f.one_over(f.b.materialize(f.b.sub(a[1], a[0]))), true, {}, {}};
}

// gamma(alpha, beta): alpha log beta - lgamma(alpha) + (alpha - 1) log x - beta x; bound at the
// mode (alpha - 1) / beta when alpha >= 1.
int gamma_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int alpha = f.arg(0, i), beta = f.arg(1, i);
  return b.sub(b.add(b.sub(b.mul(alpha, f.log(beta)), f.shape_log_gamma(alpha)),
                     b.mul(b.sub(alpha, f.c(1)), f.log(x))),
               b.mul(beta, x));
}
ComponentBound gamma_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  if (auto alpha = f.constant(a[0])) {
    if (*alpha < 1)
      return {-1,
              true,
              {},
              fmt::format("the shape alpha = {} < 1 makes the density unbounded at 0", *alpha)};
    if (*alpha == 1)
      return {a[1], true, {}, {}};
    double am1 = *alpha - 1;
    double k = std::exp(am1 * std::log(am1) - am1 - std::lgamma(*alpha));
    return {b.mul(b.constant(k), a[1]), true, {}, {}};
  }
  int am1 = b.materialize(b.sub(a[0], b.constant(1)));
  int e = b.call("exp", {b.materialize(b.sub(b.neg(am1), b.call("lgamma", {a[0]})))});
  return {b.mul(a[1], b.mul(b.pow(am1, am1), e)), true, fmt::format("{} >= 1", f.text(a[0])), {}};
}

// exponential(beta): log beta - beta x; bound beta at 0.
int exponential_log_density(LogDensityTerms& f, int x, int i) {
  return f.b.sub(f.log(f.arg(0, i)), f.b.mul(f.arg(0, i), x));
}
ComponentBound exponential_bound(BoundTerms&, const Args& a, int) {
  return {a[0], true, {}, {}};
}

// poisson(lambda): x log lambda - lambda - lgamma(x + 1); bound: a mass.
int poisson_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  return b.sub(b.sub(b.mul(x, f.log(f.arg(0, i))), f.arg(0, i)),
               b.call("lgamma", {b.add(x, f.c(1))}));
}

// bernoulli(p): x log p + (1 - x) log(1 - p); bound: a mass.
int bernoulli_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  return b.add(b.mul(x, f.log(f.arg(0, i))),
               b.mul(b.sub(f.c(1), x), f.log(b.sub(f.c(1), f.arg(0, i)))));
}

// bernoulli_logit(alpha): x alpha - softplus(alpha), with softplus(a) = max(a, 0) +
// log1p(exp(-|a|)) so that neither term overflows; bound: a mass.
int bernoulli_logit_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int a = f.arg(0, i);
  const int softplus = b.add(b.call("max", {a, f.c(0)}),
                             b.call("log1p", {b.call("exp", {b.neg(b.call("abs", {a}))})}));
  return b.sub(b.mul(x, a), softplus);
}

// mvnormal(mu, Sigma) and mvnormal_chol(mu, L): -|z|^2 / 2 - sum log L[i, i] - d log(2 pi) / 2
// with z = L^-1 (x - mu) and L L' the covariance; for mvnormal, L is its Cholesky factor written
// out element by element. Bound (2 pi)^(-d/2) det(Sigma)^(-1/2) at the mean.
struct WhitenedGaussian {
  int d = 0;
  std::vector<int> L; // row-major, lower triangle (-1 above the diagonal)
  std::vector<int> z; // L^-1 (x - mu)
};
WhitenedGaussian whiten(LogDensityTerms& f, bool chol) {
  ExprBuilder& b = f.b;
  WhitenedGaussian w;
  const int d = w.d = f.shape.size();
  auto at = [&](int k, int i, int j) { return b.element(f.args[k], i * d + j); };
  std::vector<int>& L = w.L;
  L.assign(static_cast<size_t>(d) * d, -1);
  for (int j = 0; j < d; ++j)
    for (int i = j; i < d; ++i) {
      if (chol) {
        L[i * d + j] = at(1, i, j);
        continue;
      }
      int v = at(1, i, j);
      for (int k = 0; k < j; ++k)
        v = b.sub(v, b.mul(L[i * d + k], L[j * d + k]));
      L[i * d + j] = i == j ? b.call("sqrt", {v}) : b.div(v, L[j * d + j]);
    }
  w.z.resize(d);
  for (int i = 0; i < d; ++i) {
    int r = b.sub(b.element(f.x_node, i), f.arg(0, i));
    for (int k = 0; k < i; ++k)
      r = b.sub(r, b.mul(L[i * d + k], w.z[k]));
    w.z[i] = b.div(r, L[i * d + i]);
  }
  return w;
}
int mvnormal_or_chol_log_density(LogDensityTerms& f, bool chol) {
  ExprBuilder& b = f.b;
  const WhitenedGaussian w = whiten(f, chol);
  int lp = b.constant(-w.d * half_log_2pi);
  for (int i = 0; i < w.d; ++i)
    lp = b.sub(b.sub(lp, b.div(f.sq(w.z[i]), f.c(2))), f.log(w.L[i * w.d + i]));
  return b.materialize(lp);
}
// Its gradient, with g = Sigma^-1 (x - mu) = L'^-1 z: g in mu, -g in x, and in the entries the
// formula reads (the lower triangle of Sigma or L), (g g' - Sigma^-1) off the diagonal and half
// that on it (an entry below the diagonal stands for both of a symmetric pair), resp. g z' -
// diag(1 / L[i, i]). About 2 d^3 / 3 operations in all, where forward mode through the
// factorisation costs d^3 per entry of Sigma.
LogDensityAdjoints mvnormal_or_chol_adjoints(LogDensityTerms& f, bool chol) {
  ExprBuilder& b = f.b;
  const WhitenedGaussian w = whiten(f, chol);
  const int d = w.d;
  auto L = [&](int i, int j) { return w.L[static_cast<size_t>(i) * d + j]; };
  std::vector<int> g(d);
  for (int i = d - 1; i >= 0; --i) {
    int v = w.z[i];
    for (int k = i + 1; k < d; ++k)
      v = b.sub(v, b.mul(L(k, i), g[k]));
    g[i] = b.div(v, L(i, i));
  }
  LogDensityAdjoints adj;
  adj.target.resize(d);
  for (int i = 0; i < d; ++i)
    adj.target[i] = b.neg(g[i]);
  adj.args.push_back(g); // the mean is a vector like the target (the frontend checks)
  std::vector<int> matrix(static_cast<size_t>(d) * d, -1);
  if (chol) {
    for (int i = 0; i < d; ++i)
      for (int j = 0; j <= i; ++j) {
        const int gz = b.mul(g[i], w.z[j]);
        matrix[i * d + j] = i == j ? b.sub(gz, b.div(f.c(1), L(i, i))) : gz;
      }
  } else {
    // Sigma^-1 = L'^-1 L^-1 from the triangular inverse M = L^-1.
    std::vector<int> M(static_cast<size_t>(d) * d, -1);
    for (int j = 0; j < d; ++j) {
      M[j * d + j] = b.div(f.c(1), L(j, j));
      for (int i = j + 1; i < d; ++i) {
        int v = -1;
        for (int k = j; k < i; ++k)
          v = b.add(v, b.mul(L(i, k), M[k * d + j]));
        M[i * d + j] = b.neg(b.div(v, L(i, i)));
      }
    }
    for (int i = 0; i < d; ++i)
      for (int j = 0; j <= i; ++j) {
        int inverse = -1; // (Sigma^-1)[i, j] = sum_k M[k, i] M[k, j], k >= i
        for (int k = i; k < d; ++k)
          inverse = b.add(inverse, b.mul(M[k * d + i], M[k * d + j]));
        const int entry = b.sub(b.mul(g[i], g[j]), inverse);
        matrix[i * d + j] = i == j ? b.div(entry, f.c(2)) : entry;
      }
  }
  adj.args.push_back(std::move(matrix));
  return adj;
}
int mvnormal_log_density(LogDensityTerms& f, int, int) {
  return mvnormal_or_chol_log_density(f, false);
}
LogDensityAdjoints mvnormal_adjoints(LogDensityTerms& f) {
  return mvnormal_or_chol_adjoints(f, false);
}
ComponentBound mvnormal_bound(BoundTerms& f, const Args& args, int d) {
  ExprBuilder& b = f.b;
  const int sigma = args[1];
  int scale = b.raw(two_pi_power(f, d));
  int det = b.pow(b.call("det", {sigma}), b.constant(-0.5));
  return {b.mul(scale, det), true, {}, {}};
}

// categorical(p): log p[x] - log sum p (for a scalar target); bound: a mass.
int categorical_log_density(LogDensityTerms& f, int x, int) {
  ExprBuilder& b = f.b;
  if (f.shape.size() != 1)
    return -1;
  ir::Node pick;
  pick.op = ir::Op::DynIndex;
  pick.args = {f.args[0], x};
  pick.shape = ir::Shape{};
  const int k = b[f.args[0]].shape.size();
  int sum = -1;
  for (int j = 0; j < k; ++j)
    sum = b.add(sum, b.element(f.args[0], j));
  return b.sub(f.log(b.raw(std::move(pick))), f.log(sum));
}

// beta(a, b): (a - 1) log x + (b - 1) log(1 - x) - lgamma(a) - lgamma(b) + lgamma(a + b); bound
// x^(a-1) (1-x)^(b-1) / B(a, b) at the mode (a - 1) / (a + b - 2) when a, b >= 1 (a shape of
// exactly 1 puts the mode at an end: b at 0 for a = 1); a shape below 1 makes the density
// unbounded at that end.
int beta_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int a = f.arg(0, i), bb = f.arg(1, i);
  return b.add(b.sub(b.sub(b.add(b.mul(b.sub(a, f.c(1)), f.log(x)),
                                 b.mul(b.sub(bb, f.c(1)), f.log(b.sub(f.c(1), x)))),
                           f.shape_log_gamma(a)),
                     f.shape_log_gamma(bb)),
               f.log_gamma(b.add(a, bb)));
}
ComponentBound beta_bound(BoundTerms& f, const Args& args, int) {
  ExprBuilder& b = f.b;
  const int sa = args[0], sb = args[1];
  const std::optional<double> ca = f.constant(sa), cb = f.constant(sb);
  if ((ca && *ca < 1) || (cb && *cb < 1))
    return {-1,
            true,
            {},
            fmt::format("the {} shape {} is below 1, which makes the density unbounded at {}",
                        ca && *ca < 1 ? "first" : "second", ca && *ca < 1 ? *ca : *cb,
                        ca && *ca < 1 ? "0" : "1")};
  if (ca && cb) {
    if (*ca == 1 || *cb == 1)
      return {b.constant(std::max(*ca, *cb)), true, {}, {}};
    const double m = (*ca - 1) / (*ca + *cb - 2);
    const double log_f = (*ca - 1) * std::log(m) + (*cb - 1) * std::log1p(-m) +
                         std::lgamma(*ca + *cb) - std::lgamma(*ca) - std::lgamma(*cb);
    return {b.constant(std::exp(log_f)), true, {}, {}};
  }
  std::vector<int> conditions;
  std::vector<std::string> texts;
  for (int s : {sa, sb})
    if (!f.constant(s)) {
      conditions.push_back(f.at_least_one(s));
      texts.push_back(f.text(s) + " >= 1");
    }
  const int total = b.materialize(b.sub(b.add(sa, sb), b.constant(2)));
  const int log_f =
      b.materialize(b.sub(b.sub(b.add(b.add(f.shape_term(sa, total), f.shape_term(sb, total)),
                                      b.call("lgamma", {b.add(sa, sb)})),
                                b.call("lgamma", {sa})),
                          b.call("lgamma", {sb})));
  return {f.where(conditions, b.call("exp", {log_f})),
          true,
          fmt::format("{}", fmt::join(texts, " and ")),
          {}};
}

// inverse_gamma(alpha, beta): alpha log beta - lgamma(alpha) - (alpha + 1) log x - beta / x; bound
// at the mode beta / (alpha + 1): (alpha + 1)^(alpha + 1) exp(-(alpha + 1)) / (Gamma(alpha) beta).
int inverse_gamma_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int alpha = f.arg(0, i), beta = f.arg(1, i);
  return b.sub(b.sub(b.sub(b.mul(alpha, f.log(beta)), f.shape_log_gamma(alpha)),
                     b.mul(b.add(alpha, f.c(1)), f.log(x))),
               b.div(beta, x));
}
ComponentBound inverse_gamma_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  const int ap1 = b.materialize(b.add(a[0], b.constant(1)));
  const int log_k =
      b.materialize(b.sub(b.sub(b.mul(ap1, b.call("log", {ap1})), ap1), b.call("lgamma", {a[0]})));
  return {b.div(b.call("exp", {log_k}), a[1]), true, {}, {}};
}

// laplace(mu, b): -|x - mu| / s - log(2 s); bound 1 / (2 b) at mu.
int laplace_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  return b.sub(b.neg(b.div(b.call("abs", {b.sub(x, f.arg(0, i))}), f.arg(1, i))),
               f.log(b.mul(f.c(2), f.arg(1, i))));
}
ComponentBound laplace_bound(BoundTerms& f, const Args& a, int) {
  return {f.one_over(f.b.mul(f.b.constant(2), a[1])), true, {}, {}};
}

// cauchy(mu, sigma): -log(pi s (1 + ((x - mu) / s)^2)); bound 1 / (pi sigma) at mu.
int cauchy_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  return b.neg(f.log(b.mul(b.mul(f.c(std::numbers::pi), f.arg(1, i)),
                           b.add(f.c(1), f.sq(b.div(b.sub(x, f.arg(0, i)), f.arg(1, i)))))));
}
ComponentBound cauchy_bound(BoundTerms& f, const Args& a, int) {
  return {f.one_over(f.b.mul(f.b.constant(std::numbers::pi), a[1])), true, {}, {}};
}

// truncated_normal(mu, sigma, lo, hi): normal(mu, s) - log(Phi((hi - mu) / s) - Phi((lo - mu) /
// s)); bound the normal's density at the point of [lo, hi] nearest mu, over the interval's mass.
int truncated_normal_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int mu = f.arg(0, i), s = f.arg(1, i);
  const int lo = b.div(b.sub(f.arg(2, i), mu), s), hi = b.div(b.sub(f.arg(3, i), mu), s);
  return b.sub(
      b.sub(b.sub(b.neg(b.div(f.sq(b.div(b.sub(x, mu), s)), f.c(2))), f.log(s)), f.c(half_log_2pi)),
      b.call("log_normal_mass", {b.materialize(lo), b.materialize(hi)}));
}
ComponentBound truncated_normal_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  const int mu = a[0], s = a[1];
  const int mode = b.call("min", {b.call("max", {mu, a[2]}), a[3]});
  const int z = b.div(b.sub(mode, mu), s);
  const int lo = b.materialize(b.div(b.sub(a[2], mu), s));
  const int hi = b.materialize(b.div(b.sub(a[3], mu), s));
  const int log_f = b.materialize(
      b.sub(b.neg(b.div(b.mul(z, z), b.constant(2))), b.call("log_normal_mass", {lo, hi})));
  return {b.div(b.call("exp", {log_f}), b.mul(s, f.sqrt_2pi())), true, {}, {}};
}

// binomial(n, p): lgamma(n+1) - lgamma(x+1) - lgamma(n-x+1) + x log p + (n-x) log(1-p); bound: a
// mass.
int binomial_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int n = f.arg(0, i), p = f.arg(1, i);
  return b.add(
      b.sub(b.sub(b.call("lgamma", {b.add(n, f.c(1))}), b.call("lgamma", {b.add(x, f.c(1))})),
            b.call("lgamma", {b.add(b.sub(n, x), f.c(1))})),
      b.add(b.mul(x, f.log(p)), b.mul(b.sub(n, x), f.log(b.sub(f.c(1), p)))));
}

// negative_binomial(mu, phi): lgamma(x + phi) - lgamma(x + 1) - lgamma(phi)
//   + x log(mu / (mu + phi)) + phi log(phi / (mu + phi)); bound: a mass.
int negative_binomial_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int mu = f.arg(0, i), phi = f.arg(1, i), total_rate = b.add(mu, phi);
  return b.add(b.add(b.sub(b.sub(f.log_gamma(b.add(x, phi)), f.log_gamma(b.add(x, f.c(1)))),
                           f.shape_log_gamma(phi)),
                     b.mul(x, f.log(b.div(mu, total_rate)))),
               b.mul(phi, f.log(b.div(phi, total_rate))));
}

// weibull(k, lambda): log k - log lambda + (k - 1) log z - z^k with z = x / lambda; bound at the
// mode lambda q^(1/k), q = (k - 1) / k, when k >= 1: k q^q e^(-q) / lambda (q = 0, 1 / lambda,
// for k = 1).
int weibull_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int k = f.arg(0, i), lambda = f.arg(1, i), lz = f.log(b.div(x, lambda));
  return b.sub(b.add(b.sub(f.log(k), f.log(lambda)), b.mul(b.sub(k, f.c(1)), lz)),
               b.call("exp", {b.mul(k, lz)}));
}
ComponentBound weibull_bound(BoundTerms& f, const Args& a, int) {
  ExprBuilder& b = f.b;
  if (auto k = f.constant(a[0])) {
    if (*k < 1)
      return {
          -1, true, {}, fmt::format("the shape k = {} < 1 makes the density unbounded at 0", *k)};
    const double q = (*k - 1) / *k;
    const double c = *k * std::exp(q == 0 ? 0.0 : q * std::log(q) - q);
    return {b.div(b.constant(c), a[1]), true, {}, {}};
  }
  const int q = b.materialize(b.div(b.sub(a[0], b.constant(1)), a[0]));
  const int c = b.mul(a[0], b.mul(b.pow(q, q), b.call("exp", {b.materialize(b.neg(q))})));
  return {b.div(c, a[1]), true, fmt::format("{} >= 1", f.text(a[0])), {}};
}

// gumbel(mu, beta): -log beta - z - exp(-z) with z = (x - mu) / beta; bound 1 / (beta e) at the
// mode mu.
int gumbel_log_density(LogDensityTerms& f, int x, int i) {
  ExprBuilder& b = f.b;
  const int beta = f.arg(1, i), z = b.div(b.sub(x, f.arg(0, i)), beta);
  return b.sub(b.sub(b.neg(f.log(beta)), z), b.call("exp", {b.neg(z)}));
}
ComponentBound gumbel_bound(BoundTerms& f, const Args& a, int) {
  return {f.one_over(f.b.mul(a[1], f.call_raw("exp", f.b.constant(1)))), true, {}, {}};
}

// mvnormal_chol(mu, L): the log-density with mvnormal's; bound (2 pi)^(-d/2) / |L[0, 0] ...
// L[d-1, d-1]|, det(L L')^(-1/2) from the factor's diagonal.
int mvnormal_chol_log_density(LogDensityTerms& f, int, int) {
  return mvnormal_or_chol_log_density(f, true);
}
LogDensityAdjoints mvnormal_chol_adjoints(LogDensityTerms& f) {
  return mvnormal_or_chol_adjoints(f, true);
}
ComponentBound mvnormal_chol_bound(BoundTerms& f, const Args& args, int d) {
  ExprBuilder& b = f.b;
  const int factor = args[1];
  ir::Node p = two_pi_power(f, d);
  int diagonal = -1;
  for (int i = 0; i < d; ++i) {
    const int l = b.element(factor, i * d + i);
    diagonal = diagonal < 0 ? l : b.mul(diagonal, l);
  }
  return {b.div(b.raw(std::move(p)), b.call("abs", {diagonal})), true, {}, {}};
}

// dirichlet(alpha): lgamma(sum a) - sum lgamma(a_i) + sum (a_i - 1) log x_i; bound Gamma(sum a) /
// prod Gamma(a_i) prod x_i^(a_i - 1) at the mode x_i = (a_i - 1) / (sum a - K), when every
// a_i >= 1 (a shape below 1 makes the density unbounded at a face of the simplex). A shape of
// exactly 1 puts the mode on a face: its factor x_i^0 is 1.
int dirichlet_log_density(LogDensityTerms& f, int, int) {
  ExprBuilder& b = f.b;
  const int d = f.shape.size();
  int sum = -1, lp = -1;
  for (int i = 0; i < d; ++i) {
    sum = b.add(sum, f.arg(0, i));
    lp = b.add(lp, b.sub(b.mul(b.sub(f.arg(0, i), f.c(1)), f.log(b.element(f.x_node, i))),
                         f.shape_log_gamma(f.arg(0, i))));
  }
  return b.materialize(b.add(lp, f.log_gamma(sum)));
}
ComponentBound dirichlet_bound(BoundTerms& f, const Args& args, int K) {
  ExprBuilder& b = f.b;
  const int alpha = args[0];
  std::vector<int> a;
  std::vector<double> values;
  for (int i = 0; i < K; ++i) {
    a.push_back(b.element(alpha, i));
    if (auto v = f.constant(a.back()))
      values.push_back(*v);
  }
  for (double v : values)
    if (v < 1)
      return {
          -1, true, {}, fmt::format("a concentration below 1 ({}) makes the density unbounded", v)};
  if (static_cast<int>(values.size()) == K) {
    double sum = 0, log_f = 0;
    for (double v : values) {
      sum += v;
      log_f -= std::lgamma(v);
    }
    log_f += std::lgamma(sum);
    for (double v : values)
      if (v > 1)
        log_f += (v - 1) * std::log((v - 1) / (sum - K));
    return {b.constant(std::exp(log_f)), true, {}, {}};
  }
  int sum = -1, log_f = -1;
  std::vector<int> conditions;
  for (int ai : a)
    sum = b.add(sum, ai);
  const int excess = b.materialize(b.sub(sum, b.constant(K)));
  for (int ai : a) {
    log_f = b.sub(b.add(log_f, f.shape_term(ai, excess)), b.call("lgamma", {ai}));
    if (!f.constant(ai))
      conditions.push_back(f.at_least_one(ai));
  }
  log_f = b.add(log_f, b.call("lgamma", {sum}));
  return {f.where(conditions, b.call("exp", {b.materialize(log_f)})),
          true,
          fmt::format("every component of {} >= 1", f.text(alpha)),
          {}};
}

// multinomial(n, p): lgamma(n + 1) - sum lgamma(x_i + 1) + sum x_i log(p_i / sum p); bound: a
// mass.
int multinomial_log_density(LogDensityTerms& f, int, int) {
  ExprBuilder& b = f.b;
  const int d = f.shape.size();
  const int n = f.args[0];
  int sum = -1, lp = f.log_gamma(b.add(n, f.c(1)));
  for (int i = 0; i < d; ++i)
    sum = b.add(sum, f.arg(1, i));
  for (int i = 0; i < d; ++i) {
    const int x = b.element(f.x_node, i);
    lp = b.add(lp, b.sub(b.mul(x, f.log(b.div(f.arg(1, i), sum))), f.log_gamma(b.add(x, f.c(1)))));
  }
  return b.materialize(lp);
}

// density(log_density): a learned density's log p is its argument, the network's output
// (vi computes it: passes/net_outputs.cpp); the compiler knows no bound of it.
int density_log_density(LogDensityTerms& f, int, int) {
  return f.b.materialize(f.arg(0, 0));
}
ComponentBound density_bound(BoundTerms&, const Args&, int) {
  return {-1, true, {}, "a learned density (a network's) has no bound the compiler knows"};
}

} // namespace

DistFormulas distribution_formulas(ir::Dist dist) {
  using D = ir::Dist;
  switch (dist) { // no default: a new distribution must be given its formulas here
  case D::Normal:
    return {false, normal_log_density, normal_bound};
  case D::LogNormal:
    return {false, lognormal_log_density, lognormal_bound};
  case D::StudentT:
    return {false, student_t_log_density, student_t_bound};
  case D::HalfNormal:
    return {false, half_normal_log_density, half_normal_bound};
  case D::Uniform:
    return {false, uniform_log_density, uniform_bound};
  case D::Gamma:
    return {false, gamma_log_density, gamma_bound};
  case D::Exponential:
    return {false, exponential_log_density, exponential_bound};
  case D::Poisson:
    return {false, poisson_log_density, mass_bound};
  case D::Bernoulli:
    return {false, bernoulli_log_density, mass_bound};
  case D::BernoulliLogit:
    return {false, bernoulli_logit_log_density, mass_bound};
  case D::MvNormal:
    return {true, mvnormal_log_density, mvnormal_bound, nullptr, mvnormal_adjoints};
  case D::Categorical:
    return {false, categorical_log_density, mass_bound};
  case D::Beta:
    return {false, beta_log_density, beta_bound};
  case D::InverseGamma:
    return {false, inverse_gamma_log_density, inverse_gamma_bound};
  case D::Laplace:
    return {false, laplace_log_density, laplace_bound};
  case D::Cauchy:
    return {false, cauchy_log_density, cauchy_bound};
  case D::TruncatedNormal:
    return {false, truncated_normal_log_density, truncated_normal_bound};
  case D::Binomial:
    return {false, binomial_log_density, mass_bound};
  case D::NegativeBinomial:
    return {false, negative_binomial_log_density, mass_bound};
  case D::Weibull:
    return {false, weibull_log_density, weibull_bound};
  case D::Gumbel:
    return {false, gumbel_log_density, gumbel_bound};
  case D::MvNormalChol:
    return {true, mvnormal_chol_log_density, mvnormal_chol_bound, nullptr, mvnormal_chol_adjoints};
  case D::Dirichlet:
    return {true, dirichlet_log_density, dirichlet_bound};
  case D::Multinomial:
    return {true, multinomial_log_density, mass_bound};
  case D::Dirac:
    return {false, nullptr, nullptr, "a deterministic relation (dirac) has no density"};
  case D::Diffusion:
    return {false, nullptr, nullptr, "an SDE's transition (diffusion) has no closed-form density"};
  case D::Dif:
    return {false, nullptr, nullptr, "a guide's dif is evaluated by vi's LibTorch code"};
  case D::Backward:
    return {false, nullptr, nullptr,
            "a state-space model's guide (backward) is smooth --method variational's LibTorch "
            "family"};
  case D::Density:
    return {true, density_log_density, density_bound};
  }
  return {};
}

} // namespace ssm::passes
