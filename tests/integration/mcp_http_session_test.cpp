// McpClient over Streamable HTTP against a scripted server (the in-process HTTP server of
// tests/support) for what the reference server cannot be made to do on cue: an answer's event
// stream broken off and resumed with Last-Event-ID, a session the server forgets (404), the GET
// stream of the server's own messages, and failures of single requests.

#include <ullm/core/error.hpp>
#include <ullm/mcp/mcp_client.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace mcp_http_session_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::error_code_of;
using ullm::test::RecordedRequest;
using ullm::test::ScriptedResponse;

namespace {

// An MCP server scripted per method: initialize hands out sessions "s1", "s2", ...;
// notifications get 202; GET gets 405 unless `on_get` says otherwise; other requests go to
// `on_request` (a tools/call echo by default). Everything it received is in `server`.
class ScriptedMcpServer {
public:
    using Handler = std::function<ScriptedResponse(const RecordedRequest&, const json&)>;

    ScriptedMcpServer() {
        server.set_handler([this](const RecordedRequest& request) { return answer(request); });
    }

    [[nodiscard]] std::string url() const { return server.base_url() + "/mcp"; }

    // An SSE event carrying `message`, with an id when `id` is not empty.
    static std::string event(const json& message, const std::string& id = {}) {
        std::string out;
        if (!id.empty()) out += "id: " + id + "\n";
        return out + "data: " + message.dump() + "\n\n";
    }
    static json result_for(const json& request, json result) {
        return {{"jsonrpc", "2.0"}, {"id", request["id"]}, {"result", std::move(result)}};
    }
    static json text_result(const std::string& text) {
        return {{"content", json::array({{{"type", "text"}, {"text", text}}})}};
    }
    static ScriptedResponse sse(std::vector<std::string> events, bool disconnect = false,
                                bool stall = false) {
        return {.status = 200,
                .headers = {{"Content-Type", "text/event-stream"}},
                .chunks = std::move(events),
                .stall = stall,
                .disconnect = disconnect};
    }

    // The methods of the POSTs received, with the session id each carried ("-" for none).
    [[nodiscard]] std::vector<std::string> posts() const {
        std::vector<std::string> out;
        for (const auto& request : server.requests()) {
            if (request.method != "POST") continue;
            const json body = json::parse(request.body);
            const std::string session =
                request.has_header("mcp-session-id") ? request.header("mcp-session-id") : "-";
            out.push_back(body.value("method", "(answer)") + " " + session);
        }
        return out;
    }
    [[nodiscard]] std::vector<RecordedRequest> gets() const {
        std::vector<RecordedRequest> out;
        for (const auto& request : server.requests()) {
            if (request.method == "GET") out.push_back(request);
        }
        return out;
    }

    using GetHandler = std::function<ScriptedResponse(const RecordedRequest&)>;
    void on_request(Handler handler) {
        std::lock_guard lock(mutex_);
        on_request_ = std::move(handler);
    }
    void on_get(GetHandler handler) {
        std::lock_guard lock(mutex_);
        on_get_ = std::move(handler);
    }

    std::atomic<int> sessions{0};
    ullm::test::TestServer server;

private:
    std::mutex mutex_;
    Handler on_request_;  // guarded by mutex_
    GetHandler on_get_;   // guarded by mutex_

    ScriptedResponse answer(const RecordedRequest& request) {
        if (request.method == "DELETE") return {.status = 200};
        if (request.method == "GET") {
            GetHandler get;
            {
                std::lock_guard lock(mutex_);
                get = on_get_;
            }
            return get ? get(request) : ScriptedResponse{.status = 405};
        }
        const json message = json::parse(request.body);
        if (message.value("method", "") == "initialize") {
            const std::string session = "s" + std::to_string(++sessions);
            return ScriptedResponse::json(
                200,
                result_for(message, {{"protocolVersion", "2025-06-18"},
                                     {"capabilities", {{"tools", json::object()}}},
                                     {"serverInfo", {{"name", "scripted"}, {"version", "1"}}}})
                    .dump(),
                {{"Mcp-Session-Id", session}});
        }
        if (!message.contains("id") || !message.contains("method")) return {.status = 202};
        Handler handler;
        {
            std::lock_guard lock(mutex_);
            handler = on_request_;
        }
        if (handler) return handler(request, message);
        return ScriptedResponse::json(200, result_for(message, text_result("ok")).dump());
    }
};

}  // namespace

TEST_CASE("an answer's event stream that breaks off is resumed with Last-Event-ID", "[mcp]") {
    ScriptedMcpServer mcp;
    std::atomic<json*> call{nullptr};
    json first_call;
    mcp.on_request([&](const RecordedRequest&, const json& message) {
        first_call = message;
        call = &first_call;
        const json progress = {{"jsonrpc", "2.0"},
                               {"method", "notifications/progress"},
                               {"params", {{"progressToken", message["id"]}, {"progress", 1}}}};
        // A priming event (an id, no data), a progress notification, then the connection
        // drops before the answer.
        return ScriptedMcpServer::sse(
            {"retry: 20\nid: e1\ndata:\n\n", ScriptedMcpServer::event(progress, "e2")}, true);
    });
    int gets = 0;
    mcp.on_get([&](const RecordedRequest& request) {
        // The session's own GET stream has no Last-Event-ID: nothing for it here.
        if (!request.has_header("last-event-id")) return ScriptedResponse{.status = 405};
        // The first resume drops again before the answer; the second gets it.
        if (++gets == 1) {
            return ScriptedMcpServer::sse({"id: e3\n: still working\n\n"}, true);
        }
        return ScriptedMcpServer::sse({ScriptedMcpServer::event(
            ScriptedMcpServer::result_for(*call.load(), ScriptedMcpServer::text_result("done")),
            "e4")});
    });
    auto client = ullm::McpClient::connect({.url = mcp.url()});
    std::atomic<int> progress{0};
    ullm::McpCallOptions options;
    options.on_progress = [&](const ullm::McpProgress&) { ++progress; };
    CHECK(client.call_tool("slow", {}, options).text() == "done");
    CHECK(progress == 1);

    std::vector<std::string> resumed_from;
    for (const auto& get : mcp.gets()) {
        if (!get.has_header("last-event-id")) continue;
        resumed_from.push_back(get.header("last-event-id"));
        CHECK(get.header("mcp-session-id") == "s1");
        CHECK(get.header("accept") == "text/event-stream");
    }
    // The comment-only event "e3" has no data but its id counts: the second resume is from it.
    CHECK(resumed_from == std::vector<std::string>{"e2", "e3"});
    // The request itself went once.
    CHECK(mcp.posts() == std::vector<std::string>{"initialize -", "notifications/initialized s1",
                                                  "tools/call s1"});
    client.close();
}

TEST_CASE("an answer that is lost fails the request with mcp_connection_failed", "[mcp]") {
    ScriptedMcpServer mcp;
    auto client = ullm::McpClient::connect({.url = mcp.url()});

    SECTION("the stream ends before the answer, with no event id to resume by") {
        mcp.on_request([](const RecordedRequest&, const json&) {
            return ScriptedMcpServer::sse({": nothing\n\n"});
        });
        try {
            (void)client.call_tool("slow");
            FAIL("no error");
        } catch (const ullm::McpError& error) {
            CHECK(error.code() == "mcp_connection_failed");
            CHECK(error.message().find("no event id") != std::string::npos);
        }
    }
    SECTION("resuming gets 404: the answer is lost, and the request is not sent again") {
        mcp.on_request([](const RecordedRequest&, const json&) {
            return ScriptedMcpServer::sse({"retry: 10\nid: e1\ndata:\n\n"}, true);
        });
        mcp.on_get([](const RecordedRequest& request) {
            return ScriptedResponse{.status = request.has_header("last-event-id") ? 404 : 405};
        });
        try {
            (void)client.call_tool("slow");
            FAIL("no error");
        } catch (const ullm::McpError& error) {
            CHECK(error.code() == "mcp_connection_failed");
            CHECK(error.message().find("HTTP 404") != std::string::npos);
        }
        CHECK(mcp.sessions == 1);
    }
    SECTION("the server stops answering resumes: five attempts, then mcp_connection_failed") {
        mcp.on_request([](const RecordedRequest&, const json&) {
            return ScriptedMcpServer::sse({"retry: 5\nid: e1\ndata:\n\n"}, true);
        });
        mcp.on_get([](const RecordedRequest& request) {
            if (!request.has_header("last-event-id")) return ScriptedResponse{.status = 405};
            return ScriptedMcpServer::sse({}, true);
        });
        CHECK(error_code_of([&] { (void)client.call_tool("slow"); }) == "mcp_connection_failed");
        int resumes = 0;
        for (const auto& get : mcp.gets()) resumes += get.has_header("last-event-id") ? 1 : 0;
        CHECK(resumes == 5);
    }
    // The client goes on.
    mcp.on_request(nullptr);
    CHECK(client.call_tool("echo").text() == "ok");
    client.close();
}

TEST_CASE("a session the server forgot is started anew and the request sent again", "[mcp]") {
    ScriptedMcpServer mcp;
    auto client = ullm::McpClient::connect({.url = mcp.url()});
    CHECK(client.call_tool("echo").text() == "ok");

    SECTION("404: the specification's answer") {
        mcp.on_request([&](const RecordedRequest& request, const json& message) {
            if (request.header("mcp-session-id") == "s1") return ScriptedResponse{.status = 404};
            return ScriptedResponse::json(
                200, ScriptedMcpServer::result_for(
                         message, ScriptedMcpServer::text_result(request.header("mcp-session-id")))
                         .dump());
        });
        CHECK(client.call_tool("echo").text() == "s2");
        CHECK(client.call_tool("echo").text() == "s2");
        CHECK(mcp.posts() == std::vector<std::string>{
                                 "initialize -", "notifications/initialized s1", "tools/call s1",
                                 "tools/call s1", "initialize -", "notifications/initialized s2",
                                 "tools/call s2", "tools/call s2"});
    }
    SECTION("400 naming the session, as servers built on the SDK's example answer") {
        mcp.on_request([&](const RecordedRequest& request, const json& message) {
            if (request.header("mcp-session-id") == "s1") {
                return ScriptedResponse::json(
                    400,
                    R"({"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null})");
            }
            return ScriptedResponse::json(
                200, ScriptedMcpServer::result_for(message, ScriptedMcpServer::text_result("again"))
                         .dump());
        });
        CHECK(client.call_tool("echo").text() == "again");
        CHECK(mcp.sessions == 2);
    }
    SECTION("a 400 that is not about the session is the server's error, not sent again") {
        mcp.on_request([](const RecordedRequest&, const json&) {
            return ScriptedResponse::json(
                400, R"({"jsonrpc":"2.0","error":{"code":-32602,"message":"bad params"},"id":2})");
        });
        try {
            (void)client.call_tool("echo");
            FAIL("no error");
        } catch (const ullm::McpError& error) {
            CHECK(error.code() == "mcp_server_error");
            CHECK(error.rpc_code() == -32602);
            CHECK(error.message().find("HTTP 400") != std::string::npos);
        }
        CHECK(mcp.sessions == 1);
    }
    SECTION("the new session is forgotten too: mcp_session_expired, and the client goes on") {
        mcp.on_request(
            [](const RecordedRequest&, const json&) { return ScriptedResponse{.status = 404}; });
        CHECK(error_code_of([&] { (void)client.call_tool("echo"); }) == "mcp_session_expired");
        CHECK(mcp.sessions == 2);
        mcp.on_request(nullptr);
        CHECK(client.call_tool("echo").text() == "ok");
    }
    SECTION("many calls meet the expired session at once: one new session") {
        mcp.on_request([&](const RecordedRequest& request, const json& message) {
            if (request.header("mcp-session-id") == "s1") {
                std::this_thread::sleep_for(20ms);  // so that the calls overlap
                return ScriptedResponse{.status = 404};
            }
            return ScriptedResponse::json(
                200, ScriptedMcpServer::result_for(message, ScriptedMcpServer::text_result("fine"))
                         .dump());
        });
        std::vector<std::thread> callers;
        std::atomic<int> fine{0};
        for (int i = 0; i < 4; ++i) {
            callers.emplace_back([&] {
                if (client.call_tool("echo").text() == "fine") ++fine;
            });
        }
        for (auto& caller : callers) caller.join();
        CHECK(fine == 4);
        CHECK(mcp.sessions == 2);
    }
    client.close();
}

TEST_CASE("the GET stream carries the server's notifications and requests", "[mcp]") {
    ScriptedMcpServer mcp;
    const json changed = {{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}};
    const json log = {{"jsonrpc", "2.0"},
                      {"method", "notifications/message"},
                      {"params", {{"level", "info"}, {"data", "hello"}}}};
    const json ping = {{"jsonrpc", "2.0"}, {"id", "srv-1"}, {"method", "ping"}};
    std::atomic<int> get_count{0};
    mcp.on_get([&](const RecordedRequest&) {
        if (++get_count == 1) {
            // Then the stream ends: the client comes back with the last id.
            return ScriptedMcpServer::sse({"retry: 10\n" + ScriptedMcpServer::event(log, "g1"),
                                           ScriptedMcpServer::event(ping, "g2")});
        }
        return ScriptedMcpServer::sse({ScriptedMcpServer::event(changed, "g3")}, false, true);
    });
    std::mutex mutex;
    std::vector<std::string> notes;
    std::atomic<bool> tools_changed{false};
    ullm::McpHttpOptions options{.url = mcp.url()};
    options.on_notification = [&](const std::string& method, const json& params) {
        std::lock_guard lock(mutex);
        notes.push_back(method + (params.contains("data") ? " " + params["data"].dump() : ""));
    };
    options.on_tools_changed = [&] { tools_changed = true; };
    auto client = ullm::McpClient::connect(options);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!tools_changed && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
    }
    CHECK(tools_changed);
    CHECK(client.tools_changed());
    {
        std::lock_guard lock(mutex);
        CHECK(notes == std::vector<std::string>{"notifications/message \"hello\"",
                                                "notifications/tools/list_changed"});
    }
    const auto gets = mcp.gets();
    REQUIRE(gets.size() >= 2);
    CHECK_FALSE(gets[0].has_header("last-event-id"));
    CHECK(gets[1].header("last-event-id") == "g2");
    // The server's ping was answered with a POST of its own.
    bool pong = false;
    for (const auto& request : mcp.server.requests()) {
        if (request.method != "POST") continue;
        const json body = json::parse(request.body);
        if (body.value("id", json()) == "srv-1" && body.contains("result")) pong = true;
    }
    CHECK(pong);
    client.close();
}

TEST_CASE("server_stream = false opens no GET stream", "[mcp]") {
    ScriptedMcpServer mcp;
    mcp.on_get(
        [](const RecordedRequest&) { return ScriptedMcpServer::sse({": open\n\n"}, false, true); });
    auto client = ullm::McpClient::connect({.url = mcp.url(), .server_stream = false});
    CHECK(client.call_tool("echo").text() == "ok");
    client.close();
    CHECK(mcp.gets().empty());
}

TEST_CASE("an MCP server that cannot be reached is mcp_connection_failed", "[mcp]") {
    CHECK(error_code_of([] {
              (void)ullm::McpClient::connect({.url = "http://127.0.0.1:1/mcp"});
          }) == "mcp_connection_failed");
    auto mcp = std::make_unique<ScriptedMcpServer>();
    auto client = ullm::McpClient::connect({.url = mcp->url()});
    mcp.reset();  // the server goes away
    CHECK(error_code_of([&] { (void)client.call_tool("echo"); }) == "mcp_connection_failed");
    client.close();
}

}  // namespace mcp_http_session_test
