// Round-trip figures of McpClient against the reference server-everything (pinned in
// tests/mcp): `tools/call echo` from this process to the node server and back, over stdio and
// over Streamable HTTP; `tools/list` plus the `mcp_tools` conversion, also of 10,000 tools from
// the fixture server. Prints percentiles; not part of ctest.
//
// Usage: ullm_bench_mcp [CALLS]   (default 2000, after 200 calls of warm-up)

#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>

#include <fmt/core.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
}

void report(const char* what, std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const auto at = [&](double q) {
        return samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))];
    };
    fmt::print("{:<34} n={:<6} p50 {:>9.1f} us  p95 {:>9.1f} us  p99 {:>9.1f} us\n", what,
               samples.size(), at(0.50), at(0.95), at(0.99));
}

// server-everything in Streamable HTTP mode on `port`, killed when `stop` runs.
pid_t start_http_server(const std::string& script, int port) {
    std::vector<std::string> arguments = {ULLM_BENCH_NODE, script, "streamableHttp"};
    std::vector<std::string> environment = {"PORT=" + std::to_string(port),
                                            std::string("PATH=") + std::getenv("PATH")};
    std::vector<char*> argv;
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& variable : environment) envp.push_back(variable.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    return pid;
}

bool accepts(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    const int calls = argc > 1 ? std::atoi(argv[1]) : 2000;
    const std::string server =
        std::string(ULLM_BENCH_MCP_DIR) +
        "/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    const auto spawn_started = Clock::now();
    auto client = ullm::McpClient::spawn({.command = {ULLM_BENCH_NODE, server, "stdio"}});
    fmt::print("spawn + initialize: {:.1f} ms\n", micros(Clock::now() - spawn_started) / 1000);

    for (int i = 0; i < 200; ++i) (void)client.call_tool("echo", {{"message", "warm"}});
    std::vector<double> echo;
    for (int i = 0; i < calls; ++i) {
        const auto started = Clock::now();
        const auto result = client.call_tool("echo", {{"message", "ping"}});
        echo.push_back(micros(Clock::now() - started));
        if (result.is_error) return 1;
    }
    report("tools/call echo (stdio)", echo);

    std::vector<double> listing;
    std::vector<double> converting;
    std::size_t tools = 0;
    for (int i = 0; i < 200; ++i) {
        auto started = Clock::now();
        const auto listed = client.list_tools();
        listing.push_back(micros(Clock::now() - started));
        started = Clock::now();
        tools = ullm::mcp_tools(client).tools.size();
        converting.push_back(micros(Clock::now() - started));
        tools = std::max(tools, listed.size());
    }
    report("tools/list", listing);
    report(fmt::format("mcp_tools ({} tools, list included)", tools).c_str(), converting);

    // The same echo over Streamable HTTP (libcurl, answers as event streams).
    const int port = 38000 + static_cast<int>(::getpid() % 1000);
    const pid_t http_server = start_http_server(server, port);
    for (int i = 0; i < 400 && !accepts(port); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    {
        auto http =
            ullm::McpClient::connect({.url = "http://127.0.0.1:" + std::to_string(port) + "/mcp"});
        for (int i = 0; i < 100; ++i) (void)http.call_tool("echo", {{"message", "warm"}});
        std::vector<double> http_echo;
        for (int i = 0; i < calls; ++i) {
            const auto started = Clock::now();
            (void)http.call_tool("echo", {{"message", "ping"}});
            http_echo.push_back(micros(Clock::now() - started));
        }
        report("tools/call echo (Streamable HTTP)", http_echo);
    }
    ::kill(http_server, SIGKILL);
    int status = 0;
    ::waitpid(http_server, &status, 0);

    // 10,000 tools in 100 pages, from the fixture server of the fault tests.
    auto many = ullm::McpClient::spawn(
        {.command = {ULLM_BENCH_NODE, std::string(ULLM_BENCH_MCP_DIR) + "/misbehaving_server.mjs",
                     "many-tools"}});
    std::vector<double> many_listing;
    std::vector<double> many_converting;
    for (int i = 0; i < 5; ++i) {
        auto started = Clock::now();
        tools = many.list_tools().size();
        many_listing.push_back(micros(Clock::now() - started));
        started = Clock::now();
        tools = ullm::mcp_tools(many).tools.size();
        many_converting.push_back(micros(Clock::now() - started));
    }
    report(fmt::format("tools/list of {} tools (100 pages)", tools).c_str(), many_listing);
    report("mcp_tools of them (list included)", many_converting);
    return 0;
}
