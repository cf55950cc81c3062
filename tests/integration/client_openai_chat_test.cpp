#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <future>
#include <thread>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace client_openai_chat_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

using ullm::test::error_code_of;

namespace {

ullm::Client client_for(const TestServer& server, ullm::RetryPolicy retry = {}) {
    retry.initial_backoff = 10ms;
    auto provider = std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
        .api_key = "sk-test-secret", .base_url = server.base_url() + "/v1"});
    return ullm::Client({.retry = retry, .providers = {provider}});
}

ullm::ChatRequest ask(std::string text = "Hi") {
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    request.messages = {ullm::Message::user(std::move(text))};
    return request;
}

std::string chunk(const std::string& delta_json, const std::string& finish = "null") {
    return "data: {\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":" + delta_json +
           ",\"finish_reason\":" + finish + "}]}\n\n";
}

const std::string ok_body =
    R"({"id":"chatcmpl-1","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}})";

}  // namespace

TEST_CASE("complete() goes through the real transport to a Chat Completions server",
          "[client][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, ok_body, {{"x-request-id", "req_1"}}));
    const auto response = client_for(server).complete(ask());
    CHECK(response.text == "Hello!");
    CHECK(response.request_id == "req_1");
    CHECK(response.usage.input_tokens == 5);
    const auto sent = server.requests().at(0);
    CHECK(sent.target == "/v1/chat/completions");
    CHECK(sent.header("authorization") == "Bearer sk-test-secret");
    const auto body = json::parse(sent.body);
    CHECK(body["model"] == "gpt-4o");
    CHECK(body["messages"][0] == json{{"role", "user"}, {"content", "Hi"}});
}

TEST_CASE("a 429 with Retry-After is retried after the delay, then succeeds",
          "[client][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        429,
        R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})",
        {{"Retry-After", "1"}}));
    server.enqueue(ScriptedResponse::json(200, ok_body));
    const auto started = std::chrono::steady_clock::now();
    const auto response = client_for(server).complete(ask());
    CHECK(response.text == "Hello!");
    CHECK(server.request_count() == 2);
    CHECK(std::chrono::steady_clock::now() - started >= 1s);
}

TEST_CASE("a 503 with Retry-After waits as asked rather than the short backoff",
          "[client][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"Service unavailable"}})",
                                          {{"retry-after-ms", "400"}}));
    server.enqueue(ScriptedResponse::json(200, ok_body));
    const auto started = std::chrono::steady_clock::now();
    CHECK(client_for(server).complete(ask()).text == "Hello!");
    CHECK(server.request_count() == 2);
    CHECK(std::chrono::steady_clock::now() - started >= 400ms);
}

TEST_CASE("400, 401 and 403 are never retried; 5xx is, up to the attempt limit",
          "[client][integration]") {
    for (const int status : {400, 401, 403}) {
        TestServer server;
        server.enqueue(ScriptedResponse::json(status, R"({"error":{"message":"no"}})"));
        server.enqueue(ScriptedResponse::json(200, ok_body));
        CHECK(error_code_of([&] { (void)client_for(server).complete(ask()); }) !=
              std::string("no error"));
        CHECK(server.request_count() == 1);
    }
    TestServer server;
    for (int i = 0; i < 3; ++i) {
        server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"overloaded"}})"));
    }
    CHECK(error_code_of([&] { (void)client_for(server).complete(ask()); }) == "provider_error");
    CHECK(server.request_count() == 3);
}

TEST_CASE("a connection failure is retried", "[client][integration]") {
    TestServer server;
    server.enqueue({.status = 200, .chunks = {"{\"partial"}, .disconnect = true});
    server.enqueue(ScriptedResponse::json(200, ok_body));
    CHECK(client_for(server).complete(ask()).text == "Hello!");
    CHECK(server.request_count() == 2);
}

TEST_CASE("a stream is retried before its first visible event, with a retry event",
          "[client][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy"}})"));
    server.enqueue(ScriptedResponse::sse(chunk(R"({"content":"Hel"})") +
                                             chunk(R"({"content":"lo"})") +
                                             chunk("{}", "\"stop\"") + "data: [DONE]\n\n",
                                         20));
    auto stream = client_for(server).stream(ask());
    std::string text;
    std::vector<ullm::StreamEvent> retries;
    for (const auto& event : stream) {
        if (event.type == ullm::StreamEvent::Type::retry) retries.push_back(event);
        if (const auto* delta = event.text_delta()) text += *delta;
    }
    CHECK(text == "Hello");
    REQUIRE(retries.size() == 1);
    CHECK(retries[0].attempt == 2);
    CHECK(retries[0].error_code == "provider_error");
    CHECK(server.request_count() == 2);
    CHECK(json::parse(server.requests()[0].body)["stream_options"]["include_usage"] == true);
}

TEST_CASE("a stream that fails after visible events is not retried", "[client][integration]") {
    TestServer server;
    server.enqueue({.status = 200,
                    .headers = {{"Content-Type", "text/event-stream"}},
                    .chunks = {chunk(R"({"content":"Hel"})")},
                    .disconnect = true});
    server.enqueue(ScriptedResponse::sse(chunk(R"({"content":"never"})"), 0));
    auto stream = client_for(server).stream(ask());
    std::string text;
    const auto code = error_code_of([&] {
        for (const auto& event : stream) {
            if (const auto* delta = event.text_delta()) text += *delta;
        }
    });
    CHECK(text == "Hel");
    CHECK(code == "connection_failed");
    CHECK(server.request_count() == 1);
}

TEST_CASE("cancelling a stream mid-way aborts the transfer", "[client][integration]") {
    TestServer server;
    server.enqueue({.status = 200,
                    .headers = {{"Content-Type", "text/event-stream"}},
                    .chunks = {chunk(R"({"content":"Hel"})")},
                    .stall = true});
    auto stream = client_for(server).stream(ask());
    auto first = stream.next();
    REQUIRE(first.has_value());
    CHECK(first->delta == "Hel");
    std::thread canceller([&] {
        std::this_thread::sleep_for(30ms);
        stream.cancel();
    });
    CHECK(error_code_of([&] {
              while (stream.next()) {
              }
          }) == "cancelled");
    canceller.join();
    CHECK(server.wait_for_client_aborts(1, 2s));
}

TEST_CASE("cancelling a retry wait ends the request promptly", "[client][integration]") {
    TestServer server;
    server.enqueue(
        ScriptedResponse::json(429, R"({"error":{"message":"wait"}})", {{"Retry-After", "30"}}));
    std::stop_source stop;
    const auto client = client_for(server);
    auto pending =
        std::async(std::launch::async, [&] { return client.complete(ask(), stop.get_token()); });
    REQUIRE(server.wait_for_requests(1, 2s));
    std::this_thread::sleep_for(20ms);
    stop.request_stop();
    REQUIRE(pending.wait_for(2s) == std::future_status::ready);
    CHECK_THROWS_AS(pending.get(), ullm::CancelledError);
}

}  // namespace client_openai_chat_test
