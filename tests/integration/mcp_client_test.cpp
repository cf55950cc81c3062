// McpClient against the real MCP reference server `@modelcontextprotocol/server-everything`
// over stdio (pinned in tests/mcp): the handshake, tools and their result kinds, progress,
// cancellation and timeouts, resources and prompts.

#include <ullm/core/error.hpp>
#include <ullm/mcp/mcp_client.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/mcp_servers.hpp"

namespace mcp_client_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::error_code_of;

namespace {

bool has_tool(const std::vector<ullm::McpToolInfo>& tools, const std::string& name) {
    return std::any_of(tools.begin(), tools.end(),
                       [&](const auto& tool) { return tool.name == name; });
}

}  // namespace

TEST_CASE("McpClient negotiates 2025-06-18 with server-everything and calls its tools", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(ullm::test::everything_server());
    CHECK(client.protocol_version() == "2025-06-18");
    CHECK(client.server_info()["name"] == "mcp-servers/everything");
    CHECK(client.alias() == "mcp-servers/everything");
    CHECK(client.server_capabilities()["tools"]["listChanged"] == true);
    CHECK_FALSE(client.instructions().empty());
    CHECK(client.pid() > 0);

    const auto tools = client.list_tools();
    CHECK(has_tool(tools, "echo"));
    CHECK(has_tool(tools, "get-sum"));
    CHECK(has_tool(tools, "get-tiny-image"));

    const auto echo = client.call_tool("echo", {{"message", "hi"}});
    CHECK_FALSE(echo.is_error);
    CHECK(echo.text() == "Echo: hi");

    CHECK(client.call_tool("get-sum", {{"a", 2}, {"b", 3.5}}).text().find("5.5") !=
          std::string::npos);

    const auto image = client.call_tool("get-tiny-image");
    const auto image_block = std::find_if(image.content.begin(), image.content.end(),
                                          [](const json& b) { return b["type"] == "image"; });
    REQUIRE(image_block != image.content.end());
    CHECK((*image_block)["mimeType"] == "image/png");
    CHECK_FALSE((*image_block)["data"].get<std::string>().empty());

    const auto links = client.call_tool("get-resource-links", {{"count", 2}});
    CHECK(std::count_if(links.content.begin(), links.content.end(),
                        [](const json& b) { return b["type"] == "resource_link"; }) == 2);

    const auto structured = client.call_tool("get-structured-content", {{"location", "Chicago"}});
    REQUIRE(structured.structured_content.is_object());
    CHECK(structured.structured_content.contains("temperature"));

    // A tool the server does not know: the SDK answers with an isError result.
    CHECK(client.call_tool("no-such-tool").is_error);
    client.close();
    client.close();  // idempotent
    CHECK(error_code_of([&] {
              (void)client.call_tool("echo", {{"message", "x"}});
          }) == "mcp_server_exited");
}

TEST_CASE("McpClient negotiates 2025-03-26 when it offers it", "[mcp]") {
    auto options = ullm::test::everything_server();
    options.protocol_version = "2025-03-26";
    auto client = ullm::McpClient::spawn(options);
    CHECK(client.protocol_version() == "2025-03-26");
    CHECK(client.call_tool("echo", {{"message", "old"}}).text() == "Echo: old");
}

TEST_CASE("McpClient surfaces progress, cancels through a stop token and times out", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(ullm::test::everything_server());

    std::mutex mutex;
    std::vector<double> progress;
    ullm::McpCallOptions with_progress;
    with_progress.on_progress = [&](const ullm::McpProgress& update) {
        std::lock_guard lock(mutex);
        progress.push_back(update.progress);
        CHECK(update.total == 4);
    };
    const auto done = client.call_tool("trigger-long-running-operation",
                                       {{"duration", 0.4}, {"steps", 4}}, with_progress);
    CHECK_FALSE(done.is_error);
    {
        std::lock_guard lock(mutex);
        CHECK(progress == std::vector<double>{1, 2, 3, 4});
    }

    // Cancelled after the first progress: the call ends at once, the next one works.
    std::stop_source stop;
    ullm::McpCallOptions cancellable;
    cancellable.stop_token = stop.get_token();
    cancellable.on_progress = [&](const ullm::McpProgress&) { stop.request_stop(); };
    const auto started = std::chrono::steady_clock::now();
    CHECK(error_code_of([&] {
              (void)client.call_tool("trigger-long-running-operation",
                                     {{"duration", 30}, {"steps", 30}}, cancellable);
          }) == "cancelled");
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK(client.call_tool("echo", {{"message", "after cancel"}}).text() == "Echo: after cancel");

    // A deadline: mcp_timeout, and the connection stays usable.
    ullm::McpCallOptions soon;
    soon.deadline = std::chrono::steady_clock::now() + 300ms;
    try {
        (void)client.call_tool("trigger-long-running-operation", {{"duration", 30}, {"steps", 30}},
                               soon);
        FAIL("no timeout");
    } catch (const ullm::McpError& error) {
        CHECK(error.code() == "mcp_timeout");
        CHECK(error.status() == 504);
    }
    CHECK(client.call_tool("echo", {{"message", "after timeout"}}).text() == "Echo: after timeout");
}

TEST_CASE("McpClient lists and reads resources and prompts of server-everything", "[mcp]") {
    auto client = ullm::McpClient::spawn(ullm::test::everything_server());
    const json resources = client.list_resources();
    REQUIRE(resources.is_array());
    CHECK_FALSE(resources.empty());
    const std::string uri = resources[0]["uri"];
    const json read = client.read_resource(uri);
    REQUIRE(read["contents"].is_array());
    CHECK(read["contents"][0]["uri"] == uri);

    const json prompts = client.list_prompts();
    CHECK(std::any_of(prompts.begin(), prompts.end(),
                      [](const json& p) { return p["name"] == "args-prompt"; }));
    const json prompt = client.get_prompt("args-prompt", {{"city", "Paris"}});
    REQUIRE(prompt["messages"].is_array());
    CHECK(prompt["messages"].dump().find("Paris") != std::string::npos);

    // A JSON-RPC error answer: mcp_server_error with the server's code.
    try {
        (void)client.get_prompt("no-such-prompt");
        FAIL("no error");
    } catch (const ullm::McpError& error) {
        CHECK(error.code() == "mcp_server_error");
        CHECK(error.rpc_code() == -32602);
    }
    // The connection survives it.
    CHECK(client.call_tool("echo", {{"message", "still"}}).text() == "Echo: still");
}

}  // namespace mcp_client_test
