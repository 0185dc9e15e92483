#include "client/command_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/command_suggestion.h"
#include "client/exit_codes.h"
#include "common/job_spec.h"
#include "common/version.h"

namespace benchd::client {
namespace {

// A function-local static: registrations run from other files' static
// initializers, in an order C++ leaves open.
std::vector<Command>& Registry() {
  static std::vector<Command> registry;
  return registry;
}

std::vector<std::string> Words(const std::string& path) {
  return absl::StrSplit(path, ' ', absl::SkipEmpty());
}

CLI::App* Subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name() == name) return sub;
  }
  return nullptr;
}

// Leaves the aliases' group out of the help; CLI11 2.1 still ends the
// options before it with a blank line of its own, dropped here.
class Formatter : public CLI::Formatter {
 public:
  std::string make_group(std::string group, bool is_positional,
                         std::vector<const CLI::Option*> opts) const override {
    if (group == kAliasGroup) return "";
    return CLI::Formatter::make_group(std::move(group), is_positional, std::move(opts));
  }
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    std::string help = CLI::Formatter::make_help(app, std::move(name), mode);
    absl::StrReplaceAll({{"\n\n\n", "\n\n"}}, &help);
    return help;
  }
};

const CLI::Validator kPositive(
    [](std::string& v) {
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      return end != v.c_str() && d > 0 ? std::string() : "must be a number above 0";
    },
    "", "POSITIVE");

void AddGlobalFlags(Cli& cli) {
  CLI::App& app = cli.app;
  app.add_option("--address", cli.creds.address,
                 "benchd's gRPC address host:port (env BENCHD_ADDRESS, config \"address\"; "
                 "default 127.0.0.1:7531)");
  app.add_option("--timeout", cli.timeout_seconds,
                 "seconds allowed for connecting and for each call (watch: connecting only)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--token-file", cli.creds.token_file,
                 "a file whose first line is the bearer token (env BENCHD_TOKEN_FILE, or the "
                 "token itself in BENCHD_TOKEN; config \"token_file\")");
  app.add_flag("--tls", cli.creds.tls,
               "speak TLS, verifying the daemon against the system's CAs (env BENCHD_TLS=1)");
  app.add_option("--tls-ca", cli.creds.tls_ca,
                 "speak TLS, verifying the daemon's certificate against this CA (PEM; env "
                 "BENCHD_TLS_CA)");
  app.add_option("--tls-cert", cli.creds.tls_cert,
                 "client certificate for mTLS (PEM; with --tls-key; env BENCHD_TLS_CERT)");
  app.add_option("--tls-key", cli.creds.tls_key,
                 "the client certificate's private key (PEM; env BENCHD_TLS_KEY)");
  app.add_option("--tls-server-name", cli.creds.tls_server_name,
                 "the name to verify in the daemon's certificate when it is not the address's "
                 "host (env BENCHD_TLS_SERVER_NAME)");
  for (const char* flag : {"--token-file", "--tls-ca", "--tls-cert", "--tls-key"}) {
    cli.CompleteFiles(&app, flag);
  }
}

// Thrown from a command's callback, so CLI11 reports it as its own errors.
void CheckAliases(const std::vector<Cli::Alias>& aliases) {
  for (const Cli::Alias& a : aliases) {
    if (a.alias->count() > 0 && a.canonical->count() > 0) {
      throw CLI::ValidationError(a.alias->get_name() + " and " + a.canonical->get_name(),
                                 "one flag given twice (" + a.alias->get_name() +
                                     " is the older spelling of " + a.canonical->get_name() +
                                     "); give " + a.canonical->get_name() + " once");
    }
    if (a.required && a.alias->count() == 0 && a.canonical->count() == 0) {
      throw CLI::RequiredError(a.canonical->get_name());
    }
  }
}

}  // namespace

int WithDaemon(const Connect& connect, const std::function<int(const GlobalOptions&)>& run) {
  absl::StatusOr<GlobalOptions> g = connect();
  if (!g.ok()) return ReportError(g.status());
  return run(*g);
}

bool RegisterCommand(Command command) {
  Registry().push_back(std::move(command));
  return true;
}

std::vector<Command> RegisteredCommands() {
  std::vector<Command> commands = Registry();
  std::stable_sort(commands.begin(), commands.end(), [](const Command& a, const Command& b) {
    const size_t da = Words(a.path).size(), db = Words(b.path).size();
    return da != db ? da < db : a.order < b.order;
  });
  return commands;
}

std::unique_ptr<Cli> BuildCli() {
  auto cli = std::make_unique<Cli>();
  CLI::App& app = cli->app;
  const std::string footer = std::string(kExitCodesHelp) + kCredentialsEnvHelp;
  app.footer(footer);
  app.formatter(std::make_shared<Formatter>());  // its subcommands take it when added
  app.require_subcommand(1);
  // Global flags may come after the subcommand too: `benchctl get J --address h:p`.
  app.fallthrough();
  app.set_version_flag("--version", std::string(kVersion));
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("benchctl: ") + e.what() + "\nRun with --help for more information.\n";
  });
  AddGlobalFlags(*cli);

  for (const Command& command : RegisteredCommands()) {
    std::vector<std::string> words = Words(command.path);
    CLI::App* parent = &app;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      CLI::App* next = Subcommand(*parent, words[i]);
      if (next == nullptr) {
        // A build mistake, caught by every test that builds the CLI.
        std::fprintf(stderr, "benchctl: command '%s' registered without its parent '%s'\n",
                     command.path.c_str(), words[i].c_str());
        std::abort();
      }
      parent = next;
    }
    CLI::App* cmd = parent->add_subcommand(words.back(), command.description);
    if (!command.examples.empty()) {
      cmd->footer("Examples:\n  " + absl::StrJoin(command.examples, "\n  ") + "\n\n" + footer);
    }
    CommandRun run = command.setup ? command.setup(cmd, *cli) : nullptr;
    if (!run) cmd->require_subcommand(1);
    std::vector<Cli::Alias> aliases;
    for (const Cli::Alias& a : cli->aliases) {
      if (a.cmd == cmd) aliases.push_back(a);
    }
    if (!aliases.empty()) cmd->callback([aliases] { CheckAliases(aliases); });
    cli->runs.emplace_back(cmd, std::move(run));
  }
  return cli;
}

int ReportParseError(const Cli& cli, const CLI::ParseError& e,
                     const std::vector<std::string>& args) {
  const CLI::App& app = cli.app;
  // `benchctl` alone prints the help (and is a usage error); `benchctl help
  // [COMMAND...]` prints that command's.
  const std::optional<UnknownCommand> unknown =
      e.get_exit_code() != 0 ? FindUnknownCommand(app, args) : std::nullopt;
  const bool no_command = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !unknown &&
                          app.get_subcommands().empty();
  if (no_command || (unknown && unknown->path == "benchctl" && unknown->word == "help")) {
    const CLI::App* at = &app;
    auto word = std::find(args.begin(), args.end(), std::string("help"));
    for (word = word == args.end() ? word : word + 1; word != args.end(); ++word) {
      const CLI::App* sub = SubcommandNamed(*at, *word);
      if (sub == nullptr) break;
      at = sub;
    }
    std::fputs(at->help().c_str(), stdout);
    for (const std::string& arg : args) {  // and a flag it does not know, by name
      const std::string flag = arg.substr(0, arg.find('='));
      if (flag.size() > 1 && flag[0] == '-' && app.get_option_no_throw(flag) == nullptr) {
        std::fprintf(stderr, "benchctl: unknown option '%s'\n", flag.c_str());
      }
    }
    return no_command ? kExitUsage : kExitOk;
  }
  // A command that is not one: say which word and the nearest commands.
  // Request kinds were top-level verbs once: say where every kind is.
  if (unknown) {
    const std::vector<std::string> kinds = JobKindNames();
    if (unknown->path == "benchctl" &&
        std::find(kinds.begin(), kinds.end(), unknown->word) != kinds.end()) {
      std::fprintf(stderr,
                   "benchctl: no command '%s': it is `benchctl submit %s ...` (with --watch to "
                   "follow the job and print its result)\n",
                   unknown->word.c_str(), unknown->word.c_str());
    } else {
      std::fprintf(stderr, "benchctl: %s\nRun with --help for more information.\n",
                   unknown->message.c_str());
    }
    return kExitUsage;
  }
  // --help and --version exit 0; every other parse error is a usage error.
  app.exit(e);
  return e.get_exit_code() == 0 ? kExitOk : kExitUsage;
}

int RunChosen(const Cli& cli) {
  const Connect connect = [&cli]() -> absl::StatusOr<GlobalOptions> {
    absl::StatusOr<ClientSettings> settings =
        ResolveClientSettings(cli.creds, ProcessEnvironment());
    if (!settings.ok()) return settings.status();
    for (const std::string& warning : settings->warnings) {
      std::fprintf(stderr, "benchctl: %s\n", warning.c_str());
    }
    GlobalOptions g;
    g.address = settings->address;
    g.timeout_seconds = cli.timeout_seconds;
    g.security = std::move(settings->security);
    return g;
  };
  // The deepest chosen command runs: `submit benchmark`, not `submit`.
  for (auto it = cli.runs.rbegin(); it != cli.runs.rend(); ++it) {
    if (it->second && it->first->parsed()) return it->second(connect);
  }
  return kExitUsage;  // unreachable: every group requires a subcommand
}

}  // namespace benchd::client
