#pragma once

// What the C++ tests of the `ullm` program share: a check that prints `ok`/`FAIL` and counts
// failures, and running a command to read its output and exit status.

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace ullm_cli_test {

inline int failures = 0;

inline void check(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    if (!ok) ++failures;
}

// Runs `command` through the shell, returning its stdout and setting `status` to its exit
// status (-1 when it did not exit).
inline std::string run(const std::string& command, int& status) {
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return out;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        out.append(buffer, n);
    const int raw = ::pclose(pipe);
    status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    return out;
}

}  // namespace ullm_cli_test
