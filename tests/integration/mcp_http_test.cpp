// McpClient over Streamable HTTP against the real server-everything (pinned in tests/mcp) in
// its streamableHttp mode on 127.0.0.1: the session, answers as event streams, progress,
// cancellation, and its tools in a conversation.

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/mcp_servers.hpp"
#include "support/scripted_client.hpp"

namespace mcp_http_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::error_code_of;

TEST_CASE("McpClient talks to server-everything over Streamable HTTP", "[mcp]") {
    ullm::test::EverythingHttpServer server;
    ullm::test::NoLeaks no_leaks;  // the client's own descriptors and threads, not the server's
    auto client = ullm::McpClient::connect({.url = server.url()});
    CHECK(client.protocol_version() == "2025-06-18");
    CHECK(client.server_info()["name"] == "mcp-servers/everything");
    CHECK(client.pid() == -1);

    // Every later request carries the session id: the server refuses one without it (400).
    CHECK(client.call_tool("echo", {{"message", "over http"}}).text() == "Echo: over http");
    CHECK(client.list_tools().size() >= 10);
    CHECK(client.read_resource(client.list_resources()[0]["uri"])["contents"].is_array());

    std::atomic<int> progress{0};
    ullm::McpCallOptions with_progress;
    with_progress.on_progress = [&](const ullm::McpProgress&) { ++progress; };
    CHECK_FALSE(client
                    .call_tool("trigger-long-running-operation", {{"duration", 0.3}, {"steps", 3}},
                               with_progress)
                    .is_error);
    CHECK(progress == 3);

    // Cancelled: the request's stream is closed here; the next call works.
    std::stop_source stop;
    ullm::McpCallOptions cancellable;
    cancellable.stop_token = stop.get_token();
    cancellable.on_progress = [&](const ullm::McpProgress&) { stop.request_stop(); };
    CHECK(error_code_of([&] {
              (void)client.call_tool("trigger-long-running-operation",
                                     {{"duration", 30}, {"steps", 30}}, cancellable);
          }) == "cancelled");
    CHECK(client.call_tool("echo", {{"message", "again"}}).text() == "Echo: again");

    // In a conversation.
    ullm::test::ScriptedClient s;
    s.provider->push_tool_call("get-sum", {{"a", 20}, {"b", 22}}, "", "call_h");
    s.provider->push_text("42.");
    auto conversation = s.client.conversation({.tools = ullm::mcp_tools(client)});
    CHECK(conversation.send("add").text == "42.");
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].result.get<std::string>().find("42") != std::string::npos);
    client.close();
}

TEST_CASE("an HTTP error status answers the request with mcp_server_error", "[mcp]") {
    ullm::test::EverythingHttpServer server;
    // No such endpoint: the initialize POST gets 404.
    std::string url = server.url();
    url.replace(url.size() - 4, 4, "/nope");
    try {
        (void)ullm::McpClient::connect({.url = url});
        FAIL("no error");
    } catch (const ullm::McpError& error) {
        CHECK(error.code() == "mcp_server_error");
        CHECK(error.message().find("HTTP 404") != std::string::npos);
    }
}

TEST_CASE("server-everything restarted: the client starts a new session and goes on", "[mcp]") {
    ullm::test::EverythingHttpServer server;
    auto client = ullm::McpClient::connect({.url = server.url()});
    CHECK(client.call_tool("echo", {{"message", "one"}}).text() == "Echo: one");
    server.restart();  // the new process knows no session: it answers 400 naming the session
    CHECK(client.call_tool("echo", {{"message", "two"}}).text() == "Echo: two");
    client.close();
}

TEST_CASE("server-everything's log lines arrive on the GET stream", "[mcp]") {
    ullm::test::EverythingHttpServer server;
    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<json> log_lines;
    ullm::McpHttpOptions options{.url = server.url()};
    options.on_notification = [&](const std::string& method, const json& params) {
        if (method != "notifications/message") return;
        std::lock_guard lock(mutex);
        log_lines.push_back(params);
        arrived.notify_all();
    };
    auto client = ullm::McpClient::connect(options);
    // Every level is wanted (the tool picks one at random).
    (void)client.request("logging/setLevel", {{"level", "debug"}});
    // The tool starts a log line at once and one every 5 s, sent on the session's GET stream
    // (no request of ours is open to carry them).
    CHECK_FALSE(client.call_tool("toggle-simulated-logging").is_error);
    {
        std::unique_lock lock(mutex);
        CHECK(arrived.wait_for(lock, 15s, [&] { return !log_lines.empty(); }));
        if (!log_lines.empty()) CHECK(log_lines[0]["data"].is_string());
    }
    CHECK_FALSE(client.call_tool("toggle-simulated-logging").is_error);
    client.close();
}

}  // namespace mcp_http_test
