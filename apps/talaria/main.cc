// talaria: the command-line entry point. Subcommands live in *_command.cc.
#include <cstdio>
#include <exception>

#include "commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Talaria: session-aware serving of tool-using LLM agents"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "talaria 0.1.0");
  talaria::cli::AddTraceCommand(app);
  talaria::cli::AddProfileCommand(app);
  talaria::cli::AddReplayCommand(app);
  talaria::cli::AddServeCommand(app);
  talaria::cli::AddReportCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const talaria::InputError& e) {
    std::fprintf(stderr, "talaria: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "talaria: fatal: %s\n", e.what());
    return 1;
  }
  return 0;
}
