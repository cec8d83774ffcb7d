// The method registry (core/method_registry.h) on made-up methods: registration and rank order,
// `auto`'s choice (among particle methods too), the reasons of methods that do not apply, and the
// help texts generated from the registrations.
#include "core/error.h"
#include "core/method_registry.h"

#include <catch2/catch.hpp>

namespace {

ssm::Method method(const std::string& name, int rank, bool applies, bool particles = false) {
  ssm::Method m;
  m.name = name;
  m.task = ssm::Task::Filter;
  m.rank = rank;
  m.particles = particles;
  if (!applies)
    m.applies = [](const ssm_model&, const ssm::ModelInfo&) -> ssm::Refusal { return "no"; };
  return m;
}

std::vector<std::string> names(const std::vector<const ssm::Method*>& methods) {
  std::vector<std::string> out;
  for (const ssm::Method* m : methods)
    out.push_back(m->name);
  return out;
}

} // namespace

TEST_CASE("the registry lists methods in registration order, applicable ones by rank") {
  ssm::MethodRegistry r;
  ssm::Method b = method("b", 3, true, true);
  b.auto_help = "else {}";
  ssm::Method e = method("e", 1, false);
  e.auto_help = "{} for exact models";
  ssm::Method g = method("g", 2, true, true);
  g.note = "a proposal";
  g.auto_help = "{} with a proposal";
  ssm::Method u = method("u", 4, true);
  u.title = "unscented";
  for (ssm::Method* m : {&b, &e, &g, &u})
    r.add(*m);
  const ssm_model model{};
  const ssm::ModelInfo info;

  CHECK(r.names(ssm::Task::Filter) == std::vector<std::string>{"b", "e", "g", "u"});
  CHECK(r.names(ssm::Task::Smooth).empty());
  CHECK(names(r.applicable(ssm::Task::Filter, model, info)) ==
        std::vector<std::string>{"g", "b", "u"});
  CHECK(r.choose(ssm::Task::Filter, model, info).name == "g");
  CHECK(r.find(ssm::Task::Filter, "e")->why_not(model, info) == "no");
  CHECK(r.find(ssm::Task::Filter, "x") == nullptr);
  CHECK_THROWS_AS(r.choose(ssm::Task::Smooth, model, info), ssm::Error);

  CHECK(r.method_list(ssm::Task::Filter) == "b, e, g (a proposal) or u (unscented)");
  CHECK(r.particle_list(ssm::Task::Filter) == "b, g (a proposal)");
  CHECK(r.auto_help(ssm::Task::Filter) == "e for exact models, g with a proposal, else b");
  CHECK(r.auto_help(ssm::Task::Filter, true) == "g with a proposal, else b");
}

TEST_CASE("an option's help can name the methods that read it") {
  ssm::MethodRegistry r;
  ssm::Method a = method("a", 1, true), b = method("b", 2, true), c = method("c", 3, true);
  a.options = {"--lag"};
  c.options = {"--lag", "--other"};
  for (ssm::Method* m : {&a, &b, &c})
    r.add(*m);
  ssm::MethodOption lag{.flag = "--lag", .help = "the lag", .users_in_help = true};
  r.add_option(ssm::Task::Filter, lag);
  CHECK(r.options(ssm::Task::Filter).size() == 1);
  CHECK(r.option_help(ssm::Task::Filter, lag) == "a, c: the lag");
  lag.users_in_help = false;
  CHECK(r.option_help(ssm::Task::Filter, lag) == "the lag");
  CHECK(r.options(ssm::Task::Smooth).empty());
}
