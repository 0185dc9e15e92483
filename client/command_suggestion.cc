#include "client/command_suggestion.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/format.h"

namespace benchd::client {

int EditDistance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::vector<std::string> NearestNames(const std::string& word,
                                      const std::vector<std::string>& names) {
  // One edit for a short word, two from six letters on: "gro" is not "get".
  const int most = std::max<int>(1, std::min<int>(2, static_cast<int>(word.size()) / 3));
  std::vector<std::pair<int, std::string>> near;
  for (const std::string& name : names) {
    const int d = EditDistance(word, name);
    const bool prefix = word.size() >= 2 && name.rfind(word, 0) == 0;
    if (d <= most || prefix) near.emplace_back(prefix ? 0 : d, name);
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, name] : near) out.push_back(std::move(name));
  return out;
}

const CLI::App* SubcommandNamed(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

std::optional<UnknownCommand> FindUnknownCommand(const CLI::App& app,
                                                 const std::vector<std::string>& args) {
  const CLI::App* at = &app;
  std::string path = app.get_name();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return std::nullopt;
    if (arg.size() > 1 && arg[0] == '-') {
      if (arg.find('=') != std::string::npos) continue;
      const CLI::Option* opt = at->get_option_no_throw(arg);
      if (opt == nullptr && at->get_parent() != nullptr) {
        opt = at->get_parent()->get_option_no_throw(arg);  // a global flag after the command
      }
      if (opt != nullptr && opt->get_items_expected_min() > 0) ++i;  // its value
      continue;
    }
    const std::vector<const CLI::App*> subs =
        at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) return std::nullopt;  // a positional of a command
    if (const CLI::App* next = SubcommandNamed(*at, arg)) {
      at = next;
      path = absl::StrCat(path, " ", arg);
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::App* sub : subs) names.push_back(sub->get_name());
    const std::vector<std::string> near = NearestNames(arg, names);
    std::vector<std::string> quoted;
    for (const std::string& n : near) quoted.push_back(absl::StrCat("'", n, "'"));
    return UnknownCommand{
        arg, path,
        absl::StrCat("unknown command '", arg, "' for '", path, "'; ",
                     near.empty() ? absl::StrCat("expected ", ChoicesText(names))
                                  : absl::StrCat("did you mean ", ChoicesText(quoted), "?"))};
  }
  return std::nullopt;
}

}  // namespace benchd::client
