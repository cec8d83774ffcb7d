// Unit tests of the IR utilities and the built-in passes on hand-built IR.
#include "ir/evaluate.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"

#include <catch2/catch.hpp>

#include <sstream>

using namespace ssm;
using ir::Node;
using ir::Op;
using ir::Shape;

namespace {

Node constant(double v) {
  return Node{Op::Const, Shape::scalar(), {}, {v}, {}, {}, -1, 0, {}};
}
Node op(Op o, std::vector<int> args, Shape shape = Shape::scalar()) {
  return Node{o, shape, std::move(args), {}, {}, {}, -1, 0, {}};
}
Node var(Op o, int v, int lag = 0, Shape shape = Shape::scalar()) {
  return Node{o, shape, {}, {}, {}, {}, v, lag, {}};
}

// AR(1): x[0] ~ normal(0, 1); x[t] ~ normal(rho * x[t-1], sigma); y[t] ~ normal(x[t], 1).
ir::Model ar1() {
  ir::Model m;
  m.name = "ar1";
  m.params = {{"rho", ir::ParamType::Real, Shape::scalar(), std::vector<double>{0.9}, {}},
              {"sigma", ir::ParamType::Real, Shape::scalar(), std::vector<double>{1}, {}}};
  m.states = {{"x", Shape::scalar(), {}}};
  m.obs = {{"y", Shape::scalar(), {}}};
  int z = m.initial.add(constant(0)), one = m.initial.add(constant(1));
  m.initial.relations.push_back({ir::VarKind::State, 0, ir::Dist::Normal, {z, one}, {}});
  auto& tr = m.transition;
  int rho = tr.add(var(Op::Param, 0)), x = tr.add(var(Op::State, 0, 1));
  int mean = tr.add(op(Op::Mul, {rho, x})), sigma = tr.add(var(Op::Param, 1));
  tr.relations.push_back({ir::VarKind::State, 0, ir::Dist::Normal, {mean, sigma}, {}});
  auto& ob = m.observation;
  int xo = ob.add(var(Op::State, 0)), s = ob.add(constant(1));
  ob.relations.push_back({ir::VarKind::Obs, 0, ir::Dist::Normal, {xo, s}, {}});
  return m;
}

void run(ir::Model& m, std::string_view pipeline, passes::PassContext& ctx) {
  passes::PassManager pm;
  pm.add_pipeline(pipeline);
  std::ostringstream log;
  pm.run(m, ctx, log);
}

} // namespace

TEST_CASE("verifier accepts a well-formed model and prints it", "[ir]") {
  ir::Model m = ar1();
  CHECK(ir::verify(m).empty());
  std::string text = ir::print(m);
  CHECK(text.find("%1 = state x[t-1] : real") != std::string::npos);
  CHECK(text.find("x[t] ~ normal(%2, %3)") != std::string::npos);
}

TEST_CASE("verifier rejects broken IR", "[ir]") {
  SECTION("operand after use") {
    ir::Model m = ar1();
    m.transition.nodes[2].args = {0, 3};
    CHECK_FALSE(ir::verify(m).empty());
  }
  SECTION("shape mismatch") {
    ir::Model m = ar1();
    m.transition.nodes[2].shape = Shape::vector(2);
    CHECK_FALSE(ir::verify(m).empty());
  }
  SECTION("future value in a transition") {
    ir::Model m = ar1();
    m.transition.nodes[1].lag = 0; // x[t] ~ normal(rho * x[t], sigma)
    auto errors = ir::verify(m);
    REQUIRE_FALSE(errors.empty());
    CHECK(errors[0].find("before it is sampled") != std::string::npos);
  }
  SECTION("a state without a transition") {
    ir::Model m = ar1();
    m.transition.relations.clear();
    CHECK_FALSE(ir::verify(m).empty());
  }
}

TEST_CASE("constant folding evaluates constant subtrees and identities", "[passes]") {
  ir::Model m = ar1();
  auto& tr = m.transition;
  // mean = rho * x[t-1] * (2 - 1)  ->  rho * x[t-1]
  int two = tr.add(constant(2)), one = tr.add(constant(1));
  int diff = tr.add(op(Op::Sub, {two, one}));
  int scaled = tr.add(op(Op::Mul, {2, diff}));
  tr.relations[0].args[0] = scaled;
  passes::PassContext ctx;
  run(m, "constant-fold", ctx);
  CHECK(ir::verify(m).empty());
  const Node& mean = tr.nodes[tr.relations[0].args[0]];
  CHECK(mean.op == Op::Mul);
  CHECK(tr.nodes.size() == 4); // rho, x, mul, sigma
}

TEST_CASE("constant folding of vector and matrix operations", "[passes]") {
  Node a{Op::Const, Shape::matrix(2, 2), {}, {1, 2, 3, 4}, {}, {}, -1, 0, {}};
  Node v{Op::Const, Shape::vector(2), {}, {5, 6}, {}, {}, -1, 0, {}};
  Node mv = op(Op::MatMul, {0, 1}, Shape::vector(2));
  CHECK(ir::evaluate(mv, {a.values, v.values}, {a.shape, v.shape}) == std::vector<double>{17, 39});
  Node row = op(Op::Index, {0}, Shape::vector(2));
  row.index = {1};
  CHECK(ir::evaluate(row, {a.values}, {a.shape}) == std::vector<double>{3, 4});
  Node elem = op(Op::Index, {0});
  elem.index = {1, 0};
  CHECK(ir::evaluate(elem, {a.values}, {a.shape}) == std::vector<double>{3});
  Node dot = op(Op::Call, {0, 1});
  dot.fn = "dot";
  CHECK(ir::evaluate(dot, {v.values, v.values}, {v.shape, v.shape}) == std::vector<double>{61});
  Node scaled = op(Op::Mul, {0, 1}, Shape::vector(2));
  CHECK(ir::evaluate(scaled, {{2}, v.values}, {Shape::scalar(), v.shape}) ==
        std::vector<double>{10, 12});
}

TEST_CASE("cse merges equal nodes, including equal constants, but not NaN with others",
          "[passes]") {
  ir::Model m = ar1();
  auto& tr = m.transition;
  int rho2 = tr.add(var(Op::Param, 0)), x2 = tr.add(var(Op::State, 0, 1));
  int mean2 = tr.add(op(Op::Mul, {rho2, x2}));
  int sum = tr.add(op(Op::Add, {2, mean2}));
  tr.relations[0].args[0] = sum;
  passes::PassContext ctx;
  run(m, "cse", ctx);
  CHECK(ir::verify(m).empty());
  CHECK(tr.nodes.size() == 5); // rho, x, mul, add(mul, mul), sigma
  const Node& add = tr.nodes[tr.relations[0].args[0]];
  CHECK(add.args[0] == add.args[1]);

  ir::Model n = ar1();
  n.initial.nodes[1].values = {NAN};
  run(n, "cse", ctx);
  CHECK(n.initial.nodes.size() == 2);
}

TEST_CASE("markov-structure reports the lags each relation reads", "[passes]") {
  ir::Model m = ar1();
  passes::PassContext ctx;
  run(m, "markov-structure", ctx);
  REQUIRE(ctx.markov);
  CHECK(ctx.markov->order == 1);
  CHECK_FALSE(ctx.markov->states_independent);
  REQUIRE(ctx.markov->relations.size() == 3);
  const auto& tr = ctx.markov->relations[1];
  CHECK(tr.target == "x[t]");
  CHECK(tr.lagged == std::vector<std::string>{"x[t-1]"});
  CHECK(tr.params == std::vector<std::string>{"rho", "sigma"});
  CHECK(ctx.markov->relations[2].lagged == std::vector<std::string>{"x[t]"});
}

TEST_CASE("the pass manager rejects an unknown pass by name", "[passes]") {
  passes::PassManager pm;
  try {
    pm.add_pipeline("cse,no-such-pass");
    FAIL("no exception");
  } catch (const passes::PassError& e) {
    CHECK(std::string(e.what()).find("unknown pass 'no-such-pass'") != std::string::npos);
    CHECK(std::string(e.what()).find("constant-fold") != std::string::npos);
  }
}

TEST_CASE("a pass of ssmc that throws other than a PassError is an internal error", "[passes]") {
  // Passes of ssmc's own (no plugin owns them).
  class RangeError : public passes::Pass {
  public:
    std::string_view name() const override { return "test-range-error"; }
    std::string_view description() const override { return "throws std::range_error"; }
    void run(ir::Model&, passes::PassContext&) override {
      throw std::range_error("weight out of range");
    }
  };
  class UserError : public passes::Pass {
  public:
    std::string_view name() const override { return "test-pass-error"; }
    std::string_view description() const override { return "throws PassError"; }
    void run(ir::Model&, passes::PassContext&) override {
      throw passes::PassError("the model has no observation");
    }
  };
  ir::Model m = ar1();
  passes::PassContext ctx;
  std::ostringstream log;
  // std::range_error is a std::runtime_error, which a plugin may throw for the user: not so here.
  passes::PassManager range_error;
  range_error.add(std::make_unique<RangeError>());
  try {
    range_error.run(m, ctx, log);
    FAIL("no exception");
  } catch (const ir::InternalError& e) {
    CHECK(std::string(e.what()) == "in pass 'test-range-error': weight out of range");
  }
  passes::PassManager user_error;
  user_error.add(std::make_unique<UserError>());
  CHECK_THROWS_AS(user_error.run(m, ctx, log), passes::PassError);
}

TEST_CASE("a plugin's pass that fails is the plugin's fault, its std::runtime_error the user's",
          "[passes]") {
  class RangeError : public passes::Pass {
  public:
    std::string_view name() const override { return "its-own-name"; }
    std::string_view description() const override { return "throws std::range_error"; }
    void run(ir::Model&, passes::PassContext&) override {
      throw std::range_error("no observation to count");
    }
  };
  class Throws42 : public passes::Pass {
  public:
    std::string_view name() const override { return "throws-int"; }
    std::string_view description() const override { return "throws an int"; }
    void run(ir::Model&, passes::PassContext&) override { throw 42; }
  };
  class BreaksIr : public passes::Pass {
  public:
    std::string_view name() const override { return "breaks-ir"; }
    std::string_view description() const override { return "leaves an operand out of range"; }
    void run(ir::Model& m, passes::PassContext&) override {
      m.transition.relations.at(0).args.at(0) = 100000;
    }
  };
  ir::Model m = ar1();
  passes::PassContext ctx;
  std::ostringstream log;
  // Owned by a plugin (as add_pipeline records it, whatever name() says): a std::runtime_error is
  // its documented way to report the user's problem.
  passes::PassManager user_error;
  user_error.add(std::make_unique<RangeError>(), "libcount.so");
  CHECK_THROWS_AS(user_error.run(m, ctx, log), std::range_error);
  auto fault = [&](std::unique_ptr<passes::Pass> pass) {
    passes::PassManager pm;
    pm.add(std::move(pass), "libcount.so");
    ir::Model copy = ar1();
    try {
      pm.run(copy, ctx, log);
    } catch (const passes::PluginFault& e) {
      CHECK(e.plugin() == "libcount.so");
      return std::string(e.what());
    }
    FAIL("no PluginFault");
    return std::string();
  };
  CHECK(fault(std::make_unique<Throws42>()) ==
        "in pass 'throws-int': an exception of unknown type");
  CHECK_THAT(fault(std::make_unique<BreaksIr>()),
             Catch::Contains("in pass 'breaks-ir': the IR is invalid after pass 'breaks-ir'"));
}
