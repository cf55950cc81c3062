#pragma once

// Shared by the throwaway database servers of the tests (postgres_server, redis_server).

#include <string>

namespace ullm::test {

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
int free_loopback_port();

/// A new directory `<tmp>/<label>.XXXXXX` (mode 0700); throws `std::system_error`.
std::string make_temp_dir(const std::string& label);

/// The whole text of a file, or "" when it cannot be read (for quoting a server's log).
std::string read_text_file(const std::string& path);

}  // namespace ullm::test
