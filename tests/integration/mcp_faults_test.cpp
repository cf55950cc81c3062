// McpClient against servers that misbehave (tests/mcp/misbehaving_server.mjs): each fault is
// a stable error code after a bounded wait, and leaves no zombie and no open descriptor.

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <stop_token>
#include <string>
#include <thread>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/mcp_servers.hpp"
#include "support/scripted_client.hpp"

namespace mcp_faults_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::error_code_of;
using ullm::test::misbehaving_server;

namespace {

// The McpError a call to `tool` throws.
ullm::McpError call_error(ullm::McpClient& client, const std::string& tool = "fast",
                          const ullm::McpCallOptions& options = {}) {
    try {
        (void)client.call_tool(tool, json::object(), options);
    } catch (const ullm::McpError& error) {
        return error;
    }
    FAIL("no McpError");
    throw;
}

}  // namespace

TEST_CASE("a server that cannot be started is mcp_spawn_failed", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    ullm::McpStdioOptions options;
    options.command = {"/nonexistent/ullm-mcp-server"};
    CHECK(error_code_of([&] { (void)ullm::McpClient::spawn(options); }) == "mcp_spawn_failed");
    options.command = {};
    CHECK(error_code_of([&] { (void)ullm::McpClient::spawn(options); }) == "mcp_spawn_failed");
}

TEST_CASE("a server that exits mid-call is mcp_server_exited with its status and stderr", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    {
        auto client = ullm::McpClient::spawn(misbehaving_server("exit-mid-call"));
        const auto error = call_error(client);
        CHECK(error.code() == "mcp_server_exited");
        CHECK(error.message().find("exit status 3") != std::string::npos);
        CHECK(error.message().find("crashing on purpose") != std::string::npos);
        // Every later call fails the same way, at once.
        CHECK(call_error(client).code() == "mcp_server_exited");
    }
    {
        // In a conversation: the model sees the failure, and the conversation goes on.
        auto client = ullm::McpClient::spawn(misbehaving_server("exit-mid-call"));
        ullm::test::ScriptedClient s;
        s.provider->push_tool_call("fast", json::object());
        s.provider->push_text("The server is gone.");
        s.provider->push_text("Still here.");
        auto conversation = s.client.conversation({.tools = ullm::mcp_tools(client)});
        CHECK(conversation.send("call it").text == "The server is gone.");
        const auto results = conversation.history()[2].tool_results();
        REQUIRE(results.size() == 1);
        CHECK(results[0].is_error);
        CHECK(results[0].result.get<std::string>().find("exit status 3") != std::string::npos);
        CHECK(conversation.send("next").text == "Still here.");
        client.close();
    }
}

TEST_CASE("a server that writes non-JSON to stdout is mcp_protocol_error", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(misbehaving_server("non-json"));
    const auto error = call_error(client);
    CHECK(error.code() == "mcp_protocol_error");
    CHECK(error.message().find("this is not JSON") != std::string::npos);
}

TEST_CASE("a server that never answers initialize is mcp_timeout after the bounded wait", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto options = misbehaving_server("silent");
    options.initialize_timeout = 500ms;
    const auto started = std::chrono::steady_clock::now();
    CHECK(error_code_of([&] { (void)ullm::McpClient::spawn(options); }) == "mcp_timeout");
    CHECK(std::chrono::steady_clock::now() - started < 5s);
}

TEST_CASE("a 10 MB message over the configured cap is mcp_message_too_large", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto options = misbehaving_server("huge");
    options.max_message_bytes = 1 << 20;
    auto client = ullm::McpClient::spawn(options);
    CHECK(call_error(client).code() == "mcp_message_too_large");
    // The default cap (16 MiB) admits it; not run here, to keep the suite fast under sanitizers.
}

TEST_CASE("a server that ignores cancellation: its late answer is dropped", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(misbehaving_server("ignore-cancel"));
    ullm::McpCallOptions soon;
    soon.deadline = std::chrono::steady_clock::now() + 200ms;
    CHECK(call_error(client, "slow", soon).code() == "mcp_timeout");

    std::stop_source stop;
    ullm::McpCallOptions cancellable;
    cancellable.stop_token = stop.get_token();
    std::thread canceller([&] {
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
    });
    CHECK(error_code_of([&] { (void)client.call_tool("slow", json::object(), cancellable); }) ==
          "cancelled");
    canceller.join();
    CHECK(client.call_tool("fast").text() == "answer of fast");
    std::this_thread::sleep_for(1600ms);  // both late answers arrive now, and are dropped
    CHECK(client.call_tool("fast").text() == "answer of fast");
}

TEST_CASE("a server that offers only an old protocol version is refused", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    try {
        (void)ullm::McpClient::spawn(misbehaving_server("old-version"));
        FAIL("no error");
    } catch (const ullm::McpError& error) {
        CHECK(error.code() == "mcp_unsupported_protocol_version");
        CHECK(error.message().find("2024-11-05") != std::string::npos);
    }
}

TEST_CASE("McpClient answers a server's ping and refuses its other requests; accepts a batch",
          "[mcp]") {
    auto client = ullm::McpClient::spawn(misbehaving_server("pinging"));
    json answers;
    ullm::test::wait_until([&] {
        answers = json::parse(client.call_tool("fast").text());
        return answers.size() == 2;
    });
    CHECK(answers[0] == json{{"jsonrpc", "2.0"}, {"id", "p1"}, {"result", json::object()}});
    CHECK(answers[1]["id"] == "p2");
    CHECK(answers[1]["error"]["code"] == -32601);
}

TEST_CASE("close kills a server that ignores end of input and SIGTERM, and its children", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(misbehaving_server("stubborn"));
    const int group = client.pid();
    std::this_thread::sleep_for(200ms);  // let it start its child
    client.close();
    // Every process of its group is gone (an orphaned grandchild is reaped by init).
    ullm::test::wait_until([&] { return ::kill(-group, 0) == -1 && errno == ESRCH; });
}

TEST_CASE("10,000 tools in 100 pages are all listed; a cursor that repeats is refused", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    {
        auto client = ullm::McpClient::spawn(misbehaving_server("many-tools"));
        const auto tools = client.list_tools();
        REQUIRE(tools.size() == 10'000);
        CHECK(tools.back().name == "tool_9999");
        // Converting them all with mcp_tools is measured by tests/bench/mcp_bench.cpp (about
        // 30 s under TSan here, too slow for the suite).
    }
    {
        auto client = ullm::McpClient::spawn(misbehaving_server("loop-cursor"));
        try {
            (void)client.list_tools();
            FAIL("no error");
        } catch (const ullm::McpError& error) {
            CHECK(error.code() == "mcp_protocol_error");
            CHECK(error.message().find("repeated the cursor") != std::string::npos);
        }
        // Only the listing failed: the connection goes on.
        CHECK(client.call_tool("tool_1").text() == "answer of tool_1");
    }
}

}  // namespace mcp_faults_test
