// compile_model: the frontend's entry point (parse, then check and lower).
#include "Frontend.h"

#include "Lower.h"
#include "Parser.h"

namespace ssm::frontend {

std::optional<ir::Model> compile_model(std::string_view source, const std::string& filename,
                                       DiagnosticEngine& diags) {
  diags.set_source(filename, std::string(source));
  std::optional<ast::Model> ast = parse(diags.source(), diags);
  if (!ast)
    return std::nullopt;
  return lower(*ast, filename, diags);
}

} // namespace ssm::frontend
