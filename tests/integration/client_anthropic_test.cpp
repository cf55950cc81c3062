#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>

#include "support/catch.hpp"
#include "support/test_server.hpp"

namespace client_anthropic_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

std::string event(const json& data) {
    return "event: " + data["type"].get<std::string>() + "\ndata: " + data.dump() + "\n\n";
}

std::string message_start(int input_tokens) {
    return event({{"type", "message_start"},
                  {"message",
                   {{"id", "msg_1"},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", "claude-sonnet-4-5"},
                    {"content", json::array()},
                    {"stop_reason", nullptr},
                    {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 1}}}}}});
}

std::string block_delta(int index, const json& delta) {
    return event({{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
}

std::string finish(const std::string& stop_reason, int output_tokens) {
    return event({{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop_reason}}},
                  {"usage", {{"output_tokens", output_tokens}}}}) +
           event({{"type", "message_stop"}});
}

const std::string signature = "EqQBCgIYAhIMkXq3+signature/with==";

// Round 1: visible thinking with a signature, then a tool call whose input arrives in pieces.
const std::string tool_round =
    message_start(50) +
    event({{"type", "content_block_start"},
           {"index", 0},
           {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}}) +
    block_delta(0, {{"type", "thinking_delta"}, {"thinking", "I should look up the weather."}}) +
    block_delta(0, {{"type", "signature_delta"}, {"signature", signature}}) +
    event({{"type", "content_block_stop"}, {"index", 0}}) + event({{"type", "ping"}}) +
    event({{"type", "content_block_start"},
           {"index", 1},
           {"content_block",
            {{"type", "tool_use"},
             {"id", "toolu_1"},
             {"name", "lookup_weather"},
             {"input", json::object()}}}}) +
    block_delta(1, {{"type", "input_json_delta"}, {"partial_json", "{\"city\": \"Ber"}}) +
    block_delta(1, {{"type", "input_json_delta"}, {"partial_json", "lin\"}"}}) +
    event({{"type", "content_block_stop"}, {"index", 1}}) + finish("tool_use", 40);

const std::string answer_round =
    message_start(120) +
    event({{"type", "content_block_start"},
           {"index", 0},
           {"content_block", {{"type", "text"}, {"text", ""}}}}) +
    block_delta(0, {{"type", "text_delta"}, {"text", "Sunny in Berlin."}}) +
    event({{"type", "content_block_stop"}, {"index", 0}}) + finish("end_turn", 6);

ullm::Client client_for(const TestServer& server) {
    auto provider = std::make_shared<ullm::AnthropicProvider>(
        ullm::AnthropicOptions{.api_key = "sk-ant-secret", .base_url = server.base_url() + "/v1"});
    ullm::RetryPolicy retry;
    retry.initial_backoff = 10ms;
    return ullm::Client({.retry = retry, .providers = {provider}});
}

ullm::ChatRequest weather_request() {
    ullm::ChatRequest request;
    request.model = "claude-sonnet-4-5";
    request.messages = {ullm::Message::user("Weather in Berlin?")};
    request.tools = {{"lookup_weather",
                      "Look up the weather",
                      {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}}}}},
                       {"required", {"city"}}}}};
    request.provider_options = {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
    return request;
}

ullm::ChatResponse drain(ullm::ChatStream& stream) {
    for (const auto& event : stream) (void)event;
    REQUIRE(stream.response().has_value());
    return *stream.response();
}

}  // namespace

TEST_CASE("Anthropic: a two-round tool loop sends the thinking block back byte-identical",
          "[client][integration][anthropic]") {
    TestServer server;
    server.enqueue(ScriptedResponse::sse(tool_round, 37));
    server.enqueue(ScriptedResponse::sse(answer_round, 37));
    const auto client = client_for(server);

    auto request = weather_request();
    auto first_stream = client.stream(request);
    const auto first = drain(first_stream);
    REQUIRE(first.tool_calls.size() == 1);
    CHECK(first.tool_calls[0].arguments == json{{"city", "Berlin"}});
    CHECK(first.reasoning_text == "I should look up the weather.");
    // The signature is replay state: never in the visible message or its events.
    CHECK(ullm::message_to_json(first.message, false).dump().find(signature) == std::string::npos);

    request.messages.push_back(first.message);
    request.messages.push_back(ullm::Message::tool_results(
        {{"toolu_1", "lookup_weather", json{{"forecast", "Sunny"}}, false}}));
    auto second_stream = client.stream(request);
    CHECK(drain(second_stream).text == "Sunny in Berlin.");

    const auto sent = json::parse(server.requests().at(1).body);
    const auto& assistant = sent["messages"][1];
    CHECK(assistant["role"] == "assistant");
    CHECK(assistant["content"][0] == json{{"type", "thinking"},
                                          {"thinking", "I should look up the weather."},
                                          {"signature", signature}});
    CHECK(assistant["content"][1]["type"] == "tool_use");
    CHECK(assistant["content"][1]["id"] == "toolu_1");
    const auto& results = sent["messages"][2];
    CHECK(results["role"] == "user");
    CHECK(results["content"][0]["type"] == "tool_result");
    CHECK(results["content"][0]["tool_use_id"] == "toolu_1");
    CHECK(server.requests().at(1).header("x-api-key") == "sk-ant-secret");
}

TEST_CASE("Anthropic: a 529 before the stream is retried; one mid-stream is surfaced",
          "[client][integration][anthropic]") {
    const std::string overloaded =
        R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_529"})";
    {
        TestServer server;
        server.enqueue(ScriptedResponse::json(529, overloaded));
        server.enqueue(ScriptedResponse::sse(answer_round, 64));
        auto stream = client_for(server).stream(weather_request());
        std::vector<std::string> retries;
        for (const auto& event : stream) {
            if (event.type == ullm::StreamEvent::Type::retry) retries.push_back(event.error_code);
        }
        CHECK(retries == std::vector<std::string>{"provider_overloaded"});
        CHECK(stream.response()->text == "Sunny in Berlin.");
    }
    // In one write (the text and the error decoded from the same bytes) and in pieces.
    for (const std::size_t chunk_size : {std::size_t{0}, std::size_t{50}}) {
        TestServer server;
        const std::string broken = message_start(10) +
                                   event({{"type", "content_block_start"},
                                          {"index", 0},
                                          {"content_block", {{"type", "text"}, {"text", ""}}}}) +
                                   block_delta(0, {{"type", "text_delta"}, {"text", "Partial"}}) +
                                   "event: error\ndata: " + overloaded + "\n\n";
        server.enqueue(ScriptedResponse::sse(broken, chunk_size));
        auto stream = client_for(server).stream(weather_request());
        std::string text;
        try {
            for (const auto& event : stream) {
                if (const auto* delta = event.text_delta()) text += *delta;
            }
            FAIL("the mid-stream error was swallowed");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "provider_overloaded");
            CHECK(error.retryable());
            CHECK(error.provider() == "anthropic");
        }
        CHECK(text == "Partial");
        CHECK(server.request_count() == 1);
    }
}

TEST_CASE("Anthropic: 429 with Retry-After then success, non-streaming",
          "[client][integration][anthropic]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        429, R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down"}})",
        {{"retry-after", "0"}}));
    server.enqueue(ScriptedResponse::json(
        200,
        R"({"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":8,"output_tokens":2,"cache_read_input_tokens":4}})"));
    auto request = weather_request();
    request.provider_options = json::object();
    const auto response = client_for(server).complete(request);
    CHECK(response.text == "Hi");
    CHECK(response.usage.input_tokens == 12);
    CHECK(response.usage.cached_read_tokens == 4);
    REQUIRE(response.usage.cost_usd.has_value());
    CHECK(server.request_count() == 2);
}

}  // namespace client_anthropic_test
