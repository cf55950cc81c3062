#pragma once

// The MCP servers the tests start: the npm reference servers pinned in tests/mcp (installed by
// `.ci/deps.sh` with `npm ci`) and the misbehaving fixture server beside them, run with the
// `node` CMake found. A missing node or package fails the test that needs it (no skipping).
// Also counters of this process's open descriptors and child processes, for leak checks.

#include <ullm/mcp/mcp_client.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/server_process.hpp"

namespace ullm::test {

inline std::string node_program() {
    return ULLM_TEST_NODE;
}

inline std::filesystem::path mcp_package_dir() {
    return ULLM_TEST_MCP_DIR;
}

// The entry point of an npm reference server (`everything`, `filesystem`), required to exist.
inline std::string mcp_reference_server(const std::string& name) {
    const auto path = mcp_package_dir() / "node_modules" / "@modelcontextprotocol" /
                      ("server-" + name) / "dist" / "index.js";
    INFO("run `npm ci` in tests/mcp (.ci/deps.sh does): " << path);
    REQUIRE(std::filesystem::exists(path));
    return path.string();
}

// Options that start server-everything over stdio.
inline McpStdioOptions everything_server() {
    McpStdioOptions options;
    options.command = {node_program(), mcp_reference_server("everything"), "stdio"};
    return options;
}

// Options that start server-filesystem over stdio, allowed into `directory`.
inline McpStdioOptions filesystem_server(const std::filesystem::path& directory) {
    McpStdioOptions options;
    options.command = {node_program(), mcp_reference_server("filesystem"),
                       std::filesystem::canonical(directory).string()};
    return options;
}

// Options that start the misbehaving fixture server in `mode` (see misbehaving_server.mjs).
inline McpStdioOptions misbehaving_server(const std::string& mode) {
    McpStdioOptions options;
    options.command = {node_program(), (mcp_package_dir() / "misbehaving_server.mjs").string(),
                       mode};
    options.shutdown_grace = std::chrono::milliseconds(300);
    return options;
}

// server-everything in Streamable HTTP mode on a free port of 127.0.0.1 (it listens on every
// interface: fine for a short test), started with posix_spawn and killed and reaped when the
// object goes. `url()` is its endpoint; the constructor waits (at most 20 s) until it accepts
// connections.
class EverythingHttpServer {
public:
    EverythingHttpServer() : port_(free_loopback_port()) { start(); }
    ~EverythingHttpServer() { stop(); }
    // Kills the server and starts a new one on the same port (it knows no session).
    void restart() {
        stop();
        start();
    }
    EverythingHttpServer(const EverythingHttpServer&) = delete;
    EverythingHttpServer& operator=(const EverythingHttpServer&) = delete;

    [[nodiscard]] std::string url() const {
        return "http://127.0.0.1:" + std::to_string(port_) + "/mcp";
    }

private:
    void start() {
        pid_ = spawn_quiet(
            {node_program(), mcp_reference_server("everything"), "streamableHttp"},
            {"PORT=" + std::to_string(port_), std::string("PATH=") + std::getenv("PATH")});
        REQUIRE(pid_ > 0);
        REQUIRE(wait_until_accepting(port_, std::chrono::seconds(20)));
    }
    void stop() {
        ::kill(pid_, SIGKILL);
        int status = 0;
        ::waitpid(pid_, &status, 0);
    }

    int port_ = 0;
    pid_t pid_ = -1;
};

// How many descriptors this process has open.
inline int open_descriptor_count() {
    int count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
        ++count;
    return count - 1;  // the iterator's own
}

// How many processes (zombies included) have this process as their parent.
inline int child_process_count() {
    int count = 0;
    const std::string self = std::to_string(::getpid());
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream stat(entry.path() / "stat");
        std::string line;
        if (!std::getline(stat, line)) continue;
        const auto close_paren = line.rfind(')');
        if (close_paren == std::string::npos) continue;
        std::istringstream fields(line.substr(close_paren + 2));
        std::string state;
        std::string parent;
        fields >> state >> parent;
        if (parent == self) ++count;
    }
    return count;
}

// Checks that a scope leaves no more descriptors and child processes than it found. Fewer is
// no leak: what an earlier test let go of may be closed meanwhile (a client's transport and
// its connections go when its last async call has completed, on the callback thread).
class NoLeaks {
public:
    NoLeaks() : descriptors_(open_descriptor_count()), children_(child_process_count()) {}
    // Waits (up to 3 s) for what other threads let go of, then checks.
    ~NoLeaks() {
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
        while ((open_descriptor_count() > descriptors_ || child_process_count() > children_) &&
               std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        CHECK(open_descriptor_count() <= descriptors_);
        CHECK(child_process_count() <= children_);
    }
    NoLeaks(const NoLeaks&) = delete;
    NoLeaks& operator=(const NoLeaks&) = delete;

private:
    int descriptors_;
    int children_;
};

}  // namespace ullm::test
