// Models for the structure analyses' unit tests: compiled from source or from the shipped
// examples, and run through the default pipeline.
#pragma once

#include "frontend/frontend.h"
#include "passes/pass_manager.h"
#include "passes/passes.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace ssm::unit_test {

inline ir::Model compile_source(const std::string& source, const std::string& name = "test.ssm") {
  frontend::DiagnosticEngine diags;
  std::optional<ir::Model> model = frontend::compile_model(source, name, diags);
  INFO(diags.str());
  REQUIRE(model.has_value());
  REQUIRE_FALSE(diags.has_errors());
  return *model;
}

inline std::string read(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline ir::Model example(const std::string& name) {
  std::string path = std::string(SSM_EXAMPLES_DIR) + "/" + name + ".ssm";
  return compile_source(read(path), path);
}

inline passes::PassContext analyse(ir::Model& model) {
  passes::PassManager pm;
  pm.add_pipeline(passes::default_pipeline);
  passes::PassContext context;
  std::ostringstream log;
  pm.run(model, context, log);
  return context;
}

} // namespace ssm::unit_test
