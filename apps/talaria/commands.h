// Subcommands of the talaria CLI. Each Add* registers a subcommand on the app;
// its callback runs the command and may throw InputError, which main reports.
#pragma once

#include <CLI/CLI.hpp>

namespace talaria::cli {

void AddTraceCommand(CLI::App& app);
void AddProfileCommand(CLI::App& app);
void AddReplayCommand(CLI::App& app);
void AddServeCommand(CLI::App& app);
void AddReportCommand(CLI::App& app);

}  // namespace talaria::cli
