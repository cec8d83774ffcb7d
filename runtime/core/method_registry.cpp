// The method registry's queries: methods by task, `auto`'s choice, and the help texts generated
// from the registrations.
#include "core/method_registry.h"
#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace ssm {

std::vector<const Method*> MethodRegistry::methods(Task task) const {
  std::vector<const Method*> out;
  for (const Method& m : methods_)
    if (m.task == task)
      out.push_back(&m);
  return out;
}

std::vector<std::string> MethodRegistry::names(Task task) const {
  std::vector<std::string> out;
  for (const Method* m : methods(task))
    out.push_back(m->name);
  return out;
}

const Method* MethodRegistry::find(Task task, std::string_view name) const {
  for (const Method& m : methods_)
    if (m.task == task && m.name == name)
      return &m;
  return nullptr;
}

std::vector<const Method*> MethodRegistry::applicable(Task task, const ssm_model& model,
                                                      const ModelInfo& info) const {
  std::vector<const Method*> out;
  for (const Method* m : ranked(task))
    if (!m->why_not(model, info))
      out.push_back(m);
  // auto's choices first: a filter with a biased likelihood, or a method auto passes over for
  // another, after the others.
  std::stable_partition(out.begin(), out.end(),
                        [&](const Method* m) { return m->auto_may_choose(model, info); });
  return out;
}

const Method& MethodRegistry::choose(Task task, const ssm_model& model, const ModelInfo& info,
                                     bool particles) const {
  for (const Method* m : applicable(task, model, info))
    if ((m->particles || !particles) && m->auto_may_choose(model, info))
      return *m;
  std::vector<std::string> reasons;
  for (const Method* m : ranked(task))
    if (m->particles || !particles)
      reasons.push_back(fmt::format("{}: {}", m->name, m->why_not(model, info).value_or("")));
  throw Error(
      fmt::format("no method applies to model '{}' ({})", info.name, fmt::join(reasons, "; ")));
}

const std::vector<MethodOption>& MethodRegistry::options(Task task) const {
  static const std::vector<MethodOption> none;
  auto it = options_.find(task);
  return it == options_.end() ? none : it->second;
}

OptionValues MethodRegistry::default_options(Task task) const {
  OptionValues values;
  for (const MethodOption& o : options(task))
    values.slot(o.key()) = o.default_value;
  return values;
}

std::string MethodRegistry::method_list(Task task) const {
  std::vector<std::string> items;
  for (const Method* m : methods(task)) {
    std::string item = m->name;
    for (const std::string* paren : {&m->title, &m->note})
      if (!paren->empty())
        item += " (" + *paren + ")";
    items.push_back(item);
  }
  if (items.size() < 2)
    return items.empty() ? "" : items[0];
  const std::string last = items.back();
  items.pop_back();
  return fmt::format("{} or {}", fmt::join(items, ", "), last);
}

std::string MethodRegistry::particle_list(Task task) const {
  std::vector<std::string> items;
  for (const Method* m : methods(task))
    if (m->particles)
      items.push_back(m->note.empty() ? m->name : m->name + " (" + m->note + ")");
  return fmt::format("{}", fmt::join(items, ", "));
}

std::vector<const Method*> MethodRegistry::ranked(Task task) const {
  std::vector<const Method*> out = methods(task);
  std::stable_sort(out.begin(), out.end(),
                   [](const Method* a, const Method* b) { return a->rank < b->rank; });
  return out;
}

std::string MethodRegistry::auto_help(Task task, bool particles) const {
  std::vector<std::string> items;
  for (const Method* m : ranked(task))
    if (!m->auto_help.empty() && (m->particles || !particles))
      items.push_back(fmt::format(fmt::runtime(m->auto_help), m->name));
  return fmt::format("{}", fmt::join(items, ", "));
}

std::string MethodRegistry::option_help(Task task, const MethodOption& option) const {
  if (!option.users_in_help)
    return option.help;
  std::vector<std::string> users;
  for (const Method* m : methods(task))
    if (std::find(m->options.begin(), m->options.end(), option.flag) != m->options.end())
      users.push_back(m->name);
  return fmt::format("{}: {}", fmt::join(users, ", "), option.help);
}

std::string MethodRun::particle_choice() const {
  return registry ? registry->choose(Task::Filter, model, info, true).name : "auto";
}

std::vector<int64_t> parse_layer_widths(const std::string& text, const std::string& who) {
  std::vector<int64_t> widths;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string word = text.substr(at, comma - at);
    int64_t w = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), w);
    if (ec != std::errc() || end != word.data() + word.size() || w < 1 || w > 65536)
      throw Error(fmt::format("{}: --hidden {}: expected widths from 1 to 65536 separated by "
                              "commas, as 64,64",
                              who, text));
    widths.push_back(w);
    at = comma + 1;
  }
  return widths;
}

} // namespace ssm
