// Helpers shared by the test suites: where ../shared lives, reading whole files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ds::test {

// The shared data directory: $DS_SHARED, else ../shared beside the source tree.
// Fails the calling test (FAIL, not SKIP) when it does not exist.
std::string shared_dir();
std::string shared_path(const std::string& rel);
// The build directory (for ds-cli and ds-server binaries).
std::string binary_dir();
std::vector<uint8_t> read_file_bytes(const std::string& path);
std::string read_file_text(const std::string& path);
void write_file_bytes(const std::string& path, const std::vector<uint8_t>& data);
// A fresh scratch directory under the system temp dir, unique per call.
std::string make_temp_dir(const std::string& tag);

// Runs a shell command and captures its standard output (append "2>&1" to capture
// standard error too). exit_code is -1 when the command died by a signal (see signal).
struct CommandResult {
  int exit_code = -1;
  int signal = 0;
  std::string out;
  double seconds = 0;
};
CommandResult run_command(const std::string& cmd);
// The ds-cli binary of this build.
std::string cli_path();

}  // namespace ds::test
