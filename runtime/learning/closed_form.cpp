// EM's closed-form M-step: see closed_form.h.
#include "learning/closed_form.h"
#include "core/error.h"

#include <Eigen/Cholesky>
#include <Eigen/QR>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ssm {

namespace {

// What a piece reads at one step besides its points: the observations and the inputs at t.
struct StepValues {
  const double* y;
  const double* u; // null without inputs
};

double value(const EmRead& r, const StepPoints& s, int64_t p, const StepValues& at) {
  if (r.obs)
    return at.y[r.offset];
  if (r.input)
    return at.u[r.offset];
  return (r.lag == 1 ? s.prev : s.cur)[r.offset * s.count + p];
}

double value(const EmReadSum& r, const StepPoints& s, int64_t p, const StepValues& at) {
  double v = r.constant;
  for (const auto& [coef, read] : r.terms)
    v += coef * value(read, s, p, at);
  return v;
}

// Every observation component a piece reads: those decide whether it has a step at t.
std::vector<int64_t> observations_read(const EmPiece& piece) {
  std::vector<int64_t> out;
  auto add = [&](const EmRead& r) {
    if (r.obs)
      out.push_back(r.offset);
  };
  auto add_sum = [&](const EmReadSum& s) {
    for (const auto& term : s.terms)
      add(term.second);
  };
  for (const EmRead& r : piece.target)
    add(r);
  if (piece.group)
    add(*piece.group);
  add_sum(piece.exposure);
  for (const EmReadSum& s : piece.offset)
    add_sum(s);
  for (const EmReadSum& s : piece.features)
    add_sum(s);
  for (const EmPiece::Coefficient& c : piece.coefficients)
    add_sum(c.feature);
  return out;
}

// Whether the piece has a term at step t: initial pieces at t = 0, transition ones after,
// observation ones wherever what they read (`read`, observations_read's) is observed.
bool applies(const EmPiece& piece, const std::vector<int64_t>& read, int64_t t, const double* y) {
  if (piece.block == "plate") // a plate model's latent relation: every item
    return true;
  if (piece.block == "initial")
    return t == 0;
  if (piece.block == "transition")
    return t > 0;
  return std::none_of(read.begin(), read.end(), [&](int64_t c) { return std::isnan(y[c]); });
}

// The group a point falls in: the value of the piece's group read, checked.
int64_t group_of(const EmPiece& piece, const StepPoints& s, int64_t p, const StepValues& at,
                 int64_t t, const std::string& context) {
  if (!piece.group)
    return 0;
  const double g = value(*piece.group, s, p, at);
  if (!(g >= 0 && g < static_cast<double>(piece.groups)) || g != std::floor(g))
    throw Error(fmt::format("{}: {} indexes a parameter with {} at t={}, outside 0..{}", context,
                            piece.relation, g, t, piece.groups - 1));
  return static_cast<int64_t>(g);
}

int64_t slot(const std::vector<int64_t>& slots, int64_t g) {
  return slots.size() == 1 ? slots[0] : slots[g];
}

// The relations a parameter is read from, for the report.
std::string pieces_of(const EmStepsInfo& em, const EmStepsInfo::Verdict& v) {
  std::vector<std::string> out;
  for (int64_t k : v.pieces)
    out.push_back(em.pieces[k].relation);
  return fmt::format("{}", fmt::join(out, "; "));
}

std::vector<int64_t> theta_of(const EmPiece& piece, int64_t d) {
  std::vector<int64_t> out;
  for (const auto& row : piece.probabilities)
    out.insert(out.end(), row.begin(), row.end());
  out.insert(out.end(), piece.rate.begin(), piece.rate.end());
  for (const EmPiece::Coefficient& c : piece.coefficients)
    out.insert(out.end(), c.theta.begin(), c.theta.end());
  for (const auto& row : piece.matrix)
    out.insert(out.end(), row.begin(), row.end());
  if (piece.noise == "cov")
    for (int64_t c = 0; c < d * d; ++c)
      out.push_back(piece.noise_theta[0] + c);
  else
    out.insert(out.end(), piece.noise_theta.begin(), piece.noise_theta.end());
  return out;
}

} // namespace

ClosedFormMStep::ClosedFormMStep(const ModelInfo& info, const ParameterSpace& space, bool map,
                                 const std::vector<ObsData>& series)
    : info_(info), updated_(info.n_theta, false), normals_(info.em_steps.pieces.size()),
      observations_read_(info.em_steps.pieces.size()), counts_(info.n_theta),
      numerator_(info.n_theta), denominator_(info.n_theta) {
  const EmStepsInfo& em = info.em_steps;
  // The learned parameters, and why each is not updated here (empty: it is).
  std::map<std::string, std::string> why;
  for (const LearnedParam& p : space.learned()) {
    const ParamInfo& param = info.params[p.index];
    const EmStepsInfo::Verdict* v = em.find(param.name);
    if (!v)
      why[param.name] = "the model's metadata has no em-m-steps analysis";
    else if (!v->closed_form)
      why[param.name] = v->reason;
    else if (map && !param.prior.empty())
      why[param.name] = "--map: its prior enters the M-step";
    else if (map && v->read_by_prior)
      why[param.name] = "--map: another parameter's prior reads it";
    else
      why[param.name] = "";
  }
  // An observation piece with partly missing observations at some step.
  for (size_t k = 0; k < em.pieces.size(); ++k) {
    const std::vector<int64_t>& read = observations_read_[k] = observations_read(em.pieces[k]);
    for (const ObsData& data : series)
      for (int64_t t = 0; t < data.T && !read.empty(); ++t) {
        const double* y = data.at(t);
        const auto missing =
            std::count_if(read.begin(), read.end(), [&](int64_t c) { return std::isnan(y[c]); });
        if (missing == 0 || missing == static_cast<int64_t>(read.size()))
          continue;
        for (const EmStepsInfo::Verdict& v : em.params)
          if (std::find(v.pieces.begin(), v.pieces.end(), static_cast<int64_t>(k)) !=
                  v.pieces.end() &&
              why.count(v.name) && why[v.name].empty())
            why[v.name] = fmt::format("{}: its observations are partly missing at t={}",
                                      em.pieces[k].relation, t);
        break;
      }
  }
  // The rows of a mvnormal's mean share their features, so they are least squares one by one
  // only with every coefficient free: a table with fixed and learned parameters is numerical.
  for (const EmPiece& piece : em.pieces) {
    std::vector<std::string> names;
    bool fixed = false;
    for (const auto& row : piece.matrix)
      for (int64_t c : row) {
        const ParamInfo* p = info.param_of_component(c);
        if (!p || !why.count(p->name))
          fixed = true;
        else
          names.push_back(p->name);
      }
    if (fixed)
      for (const std::string& name : names)
        if (why[name].empty())
          why[name] = fmt::format("{}: its mean's coefficients are partly fixed", piece.relation);
  }
  // A piece is updated here with all its learned parameters or not at all.
  for (bool changed = true; changed;) {
    changed = false;
    for (const EmStepsInfo::Verdict& v : em.params) {
      if (!why.count(v.name) || why[v.name].empty())
        continue;
      for (int64_t k : v.pieces)
        for (const EmStepsInfo::Verdict& w : em.params)
          if (why.count(w.name) && why[w.name].empty() &&
              std::find(w.pieces.begin(), w.pieces.end(), k) != w.pieces.end()) {
            why[w.name] = fmt::format("{} also reads {}, which is updated numerically",
                                      em.pieces[k].relation, v.name);
            changed = true;
          }
    }
  }
  for (const LearnedParam& p : space.learned()) {
    const ParamInfo& param = info.params[p.index];
    if (!why[param.name].empty()) {
      numeric_.push_back({param.name, why[param.name]});
      continue;
    }
    closed_.push_back({param.name, pieces_of(em, *em.find(param.name))});
    for (int64_t c = param.offset; c < param.offset + param.size; ++c)
      updated_[c] = true;
  }
  for (size_t k = 0; k < em.pieces.size(); ++k) {
    const EmPiece& piece = em.pieces[k];
    const std::vector<int64_t> theta = theta_of(piece, static_cast<int64_t>(piece.target.size()));
    if (std::none_of(theta.begin(), theta.end(), [&](int64_t c) { return updated_[c]; }))
      continue;
    active_.push_back(static_cast<int64_t>(k));
    Gaussian& g = normals_[k];
    if (piece.family == "normal") {
      for (const EmPiece::Coefficient& c : piece.coefficients)
        for (int64_t s : c.theta)
          if (std::find(g.coefficients.begin(), g.coefficients.end(), s) == g.coefficients.end())
            g.coefficients.push_back(s);
      const int64_t groups = piece.noise_theta.size() > 1 ? piece.groups : 1;
      g.moments.assign(groups, Eigen::MatrixXd());
      g.weight.assign(groups, 0.0);
    } else if (piece.family == "mvnormal") {
      g.moments.assign(1, Eigen::MatrixXd());
      g.weight.assign(1, 0.0);
    }
  }
  reset();
}

void ClosedFormMStep::reset() {
  std::fill(counts_.begin(), counts_.end(), 0.0);
  std::fill(numerator_.begin(), numerator_.end(), 0.0);
  std::fill(denominator_.begin(), denominator_.end(), 0.0);
  for (int64_t k : active_) {
    const EmPiece& piece = info_.em_steps.pieces[k];
    Gaussian& g = normals_[k];
    const int64_t size = piece.family == "normal"
                             ? static_cast<int64_t>(g.coefficients.size()) + 1
                             : static_cast<int64_t>(piece.features.size() + piece.target.size());
    for (Eigen::MatrixXd& m : g.moments)
      m = Eigen::MatrixXd::Zero(size, size);
    std::fill(g.weight.begin(), g.weight.end(), 0.0);
  }
}

void ClosedFormMStep::add(int64_t t, const StepPoints& s, const double* y, const double* u) {
  const StepValues step{y, u};
  Eigen::VectorXd psi;
  for (int64_t k : active_) {
    const EmPiece& piece = info_.em_steps.pieces[k];
    if (!applies(piece, observations_read_[k], t, y))
      continue;
    Gaussian& g = normals_[k];
    for (int64_t p = 0; p < s.count; ++p) {
      const double w = s.weight[p];
      if (!(w > 0))
        continue;
      const int64_t group = group_of(piece, s, p, step, t, context_);
      if (piece.family == "categorical") {
        const std::vector<int64_t>& row =
            piece.probabilities[piece.probabilities.size() == 1 ? 0 : group];
        const double v = value(piece.target[0], s, p, step);
        if (!(v >= 0 && v < static_cast<double>(row.size())) || v != std::floor(v))
          throw Error(fmt::format("{}: {} takes the value {} at t={}, outside 0..{}", context_,
                                  piece.relation, v, t, row.size() - 1));
        counts_[row[static_cast<size_t>(v)]] += w;
      } else if (piece.family == "poisson" || piece.family == "bernoulli") {
        const int64_t c = slot(piece.rate, group);
        numerator_[c] += w * value(piece.target[0], s, p, step);
        denominator_[c] += w * value(piece.exposure, s, p, step);
      } else if (piece.family == "normal") {
        const int64_t J = static_cast<int64_t>(g.coefficients.size());
        psi.setZero(J + 1);
        for (const EmPiece::Coefficient& c : piece.coefficients) {
          const int64_t at =
              std::find(g.coefficients.begin(), g.coefficients.end(), slot(c.theta, group)) -
              g.coefficients.begin();
          psi[at] += value(c.feature, s, p, step);
        }
        psi[J] = value(piece.target[0], s, p, step) - value(piece.offset[0], s, p, step);
        const int64_t noise_group = g.moments.size() > 1 ? group : 0;
        g.moments[noise_group].selfadjointView<Eigen::Lower>().rankUpdate(psi, w);
        g.weight[noise_group] += w;
      } else { // mvnormal: psi = (features, target - offset)
        const int64_t K = static_cast<int64_t>(piece.features.size()),
                      d = static_cast<int64_t>(piece.target.size());
        psi.resize(K + d);
        for (int64_t j = 0; j < K; ++j)
          psi[j] = value(piece.features[j], s, p, step);
        for (int64_t i = 0; i < d; ++i)
          psi[K + i] = value(piece.target[i], s, p, step) - value(piece.offset[i], s, p, step);
        g.moments[0].selfadjointView<Eigen::Lower>().rankUpdate(psi, w);
        g.weight[0] += w;
      }
    }
  }
}

// The coefficients of a Gaussian mean by least squares over the free ones (the others at their
// values), then each noise group's residual sum of squares, added to ssr/n by the noise's theta
// component (pooled over the pieces that share it).
void ClosedFormMStep::solve_normal(int64_t k, std::vector<double>& theta, std::vector<double>& ssr,
                                   std::vector<double>& n) const {
  const EmPiece& piece = info_.em_steps.pieces[k];
  const Gaussian& g = normals_[k];
  const int64_t J = static_cast<int64_t>(g.coefficients.size());
  Eigen::MatrixXd total = Eigen::MatrixXd::Zero(J + 1, J + 1);
  for (const Eigen::MatrixXd& m : g.moments)
    total += Eigen::MatrixXd(m.selfadjointView<Eigen::Lower>());
  Eigen::VectorXd beta(J);
  std::vector<int64_t> free;
  for (int64_t j = 0; j < J; ++j) {
    beta[j] = theta[g.coefficients[j]];
    // A coefficient no point reached (a group with no probability) keeps its value.
    if (updated_[g.coefficients[j]] && total(j, j) > 0)
      free.push_back(j);
  }
  if (!free.empty()) {
    const int64_t F = static_cast<int64_t>(free.size());
    Eigen::MatrixXd A(F, F);
    Eigen::VectorXd b(F);
    for (int64_t a = 0; a < F; ++a) {
      b[a] = total(free[a], J);
      for (int64_t j = 0; j < J; ++j)
        if (std::find(free.begin(), free.end(), j) == free.end())
          b[a] -= total(free[a], j) * beta[j];
      for (int64_t c = 0; c < F; ++c)
        A(a, c) = total(free[a], free[c]);
    }
    const Eigen::VectorXd x = A.completeOrthogonalDecomposition().solve(b);
    for (int64_t a = 0; a < F; ++a) {
      beta[free[a]] = x[a];
      theta[g.coefficients[free[a]]] = x[a];
    }
  }
  if (piece.noise != "sd" && piece.noise != "variance")
    return;
  Eigen::VectorXd c(J + 1);
  c << -beta, 1.0;
  for (size_t grp = 0; grp < g.moments.size(); ++grp) {
    const int64_t at = slot(piece.noise_theta, static_cast<int64_t>(grp));
    const Eigen::MatrixXd full(g.moments[grp].selfadjointView<Eigen::Lower>());
    ssr[at] += c.dot(full * c);
    n[at] += g.weight[grp];
  }
}

// M = E[y f'] E[f f']^-1 (all of M or none of it is free), then the residual second moment,
// added to ssr/n by the covariance's first theta component.
void ClosedFormMStep::solve_mvnormal(int64_t k, std::vector<double>& theta,
                                     std::vector<Eigen::MatrixXd>& ssr,
                                     std::vector<double>& n) const {
  const EmPiece& piece = info_.em_steps.pieces[k];
  const Gaussian& g = normals_[k];
  const int64_t K = static_cast<int64_t>(piece.features.size()),
                d = static_cast<int64_t>(piece.target.size());
  const Eigen::MatrixXd m(g.moments[0].selfadjointView<Eigen::Lower>());
  const Eigen::MatrixXd ff = m.topLeftCorner(K, K), fy = m.topRightCorner(K, d),
                        yy = m.bottomRightCorner(d, d);
  Eigen::MatrixXd M(d, K); // the coefficients: all updated, or none (the constructor's rule)
  for (int64_t i = 0; i < d; ++i)
    for (int64_t j = 0; j < K; ++j)
      M(i, j) = theta[piece.matrix[i][j]];
  if (K > 0 && updated_[piece.matrix[0][0]]) {
    M = ff.completeOrthogonalDecomposition().solve(fy).transpose();
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < K; ++j)
        theta[piece.matrix[i][j]] = M(i, j);
  }
  if (piece.noise != "cov")
    return;
  const int64_t at = piece.noise_theta[0];
  Eigen::MatrixXd s = yy;
  if (K > 0)
    s += -M * fy - fy.transpose() * M.transpose() + M * ff * M.transpose();
  if (ssr[at].size() == 0)
    ssr[at] = Eigen::MatrixXd::Zero(d, d);
  ssr[at] += s;
  n[at] += g.weight[0];
}

void ClosedFormMStep::solve(std::vector<double>& theta) const {
  const EmStepsInfo& em = info_.em_steps;
  std::vector<double> ssr(info_.n_theta, 0.0), n(info_.n_theta, 0.0);
  std::vector<Eigen::MatrixXd> cov(info_.n_theta);
  std::map<int64_t, std::string> noise_kind; // theta component -> sd | variance
  for (int64_t k : active_) {
    const EmPiece& piece = em.pieces[k];
    if (piece.family == "categorical") {
      for (const std::vector<int64_t>& row : piece.probabilities) {
        if (!updated_[row[0]])
          continue;
        double total = 0;
        for (int64_t c : row)
          total += counts_[c];
        if (total > 0) // a row no point used (a state with no probability) keeps its values
          for (int64_t c : row)
            theta[c] = counts_[c] / total;
      }
    } else if (piece.family == "poisson" || piece.family == "bernoulli") {
      for (int64_t c : piece.rate)
        if (updated_[c] && denominator_[c] > 0)
          theta[c] = numerator_[c] / denominator_[c];
    } else if (piece.family == "normal") {
      solve_normal(k, theta, ssr, n);
      for (int64_t c : piece.noise_theta)
        noise_kind[c] = piece.noise;
    } else {
      solve_mvnormal(k, theta, cov, n);
    }
  }
  for (const auto& [c, kind] : noise_kind)
    if (updated_[c] && n[c] > 0)
      theta[c] = kind == "sd" ? std::sqrt(std::max(0.0, ssr[c] / n[c])) : ssr[c] / n[c];
  for (int64_t c = 0; c < info_.n_theta; ++c) {
    if (cov[c].size() == 0 || !updated_[c] || !(n[c] > 0))
      continue;
    const Eigen::MatrixXd s = cov[c] / n[c];
    const int64_t d = s.rows();
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j)
        theta[c + i * d + j] = 0.5 * (s(i, j) + s(j, i));
  }
}

} // namespace ssm
