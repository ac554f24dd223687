#include "commands.h"
namespace talaria::cli {
void AddProfileCommand(CLI::App&) {}
}
