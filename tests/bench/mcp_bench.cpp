// Round-trip figures of McpClient against the reference server-everything (pinned in
// tests/mcp): `tools/call echo` from this process to the node server and back, over stdio and
// over Streamable HTTP; `tools/list` plus the `mcp_tools` conversion, also of 10,000 tools from
// the fixture server. Prints percentiles; not part of ctest.
//
// Usage: ullm_bench_mcp [CALLS]   (default 2000, after 200 calls of warm-up)

#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>

#include <fmt/core.h>

#include "support/server_process.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
    const int port = ullm::test::free_loopback_port();
    const pid_t http_server = ullm::test::spawn_quiet(
        {ULLM_BENCH_NODE, server, "streamableHttp"},
        {"PORT=" + std::to_string(port), std::string("PATH=") + std::getenv("PATH")});
    if (http_server < 0 || !ullm::test::wait_until_accepting(port, std::chrono::seconds(20))) {
        fmt::print(stderr, "server-everything (Streamable HTTP) did not start\n");
        return 1;
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
