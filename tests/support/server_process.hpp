#pragma once

// Shared by the throwaway servers of the tests and benchmarks (postgres_server, redis_server,
// the MCP reference servers).

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace ullm::test {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
int free_loopback_port();

/// Starts `arguments` (the first a path) with exactly `environment`, its stdin, stdout and
/// stderr on /dev/null. The child's pid, or -1 when it could not be started.
pid_t spawn_quiet(std::vector<std::string> arguments, std::vector<std::string> environment);

/// Whether something accepts TCP connections on 127.0.0.1:`port` before `limit` has passed
/// (tried every 20 ms).
bool wait_until_accepting(int port, std::chrono::milliseconds limit);

/// A new directory `<tmp>/<label>.XXXXXX` (mode 0700); throws `std::system_error`.
std::string make_temp_dir(const std::string& label);

/// The whole text of a file, or "" when it cannot be read (for quoting a server's log).
std::string read_text_file(const std::string& path);

}  // namespace ullm::test
