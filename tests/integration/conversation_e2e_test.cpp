// One conversation per provider through the real transport and the test server: a two-round
// tool turn whose replay state (thinking signatures, thought signatures, encrypted reasoning)
// goes back to the provider unchanged, persisted across a restore.

#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>

#include "support/catch.hpp"
#include "support/test_server.hpp"

namespace conversation_e2e_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

ullm::Tool weather_tool(std::atomic<int>& calls) {
    return ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather by city name",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [&calls](const json& args, ullm::ToolContext&) -> json {
             ++calls;
             return {{"city", args["city"]}, {"forecast", "Sunny"}};
         }});
}

// Runs "Weather in Berlin?" through a conversation on `provider`/`model` and returns the
// request bodies the server saw.
std::vector<json> run_weather_turn(const TestServer& server,
                                   std::shared_ptr<const ullm::Provider> provider,
                                   const std::string& model, bool streaming = false) {
    std::atomic<int> calls{0};
    const ullm::Client client({.providers = {std::move(provider)}});
    auto conversation = client.conversation(
        {.system = "Be brief.", .model = model, .tools = {weather_tool(calls)}});
    std::string text;
    if (streaming) {
        auto stream = conversation.send_stream("Weather in Berlin?");
        for (const auto& event : stream) {
            if (const auto* delta = event.text_delta()) text += *delta;
        }
    } else {
        text = conversation.send("Weather in Berlin?").text;
    }
    CHECK(text == "Sunny in Berlin.");
    CHECK(calls == 1);
    CHECK(conversation.history().size() == 4);
    CHECK(conversation.totals().rounds == 2);
    std::vector<json> bodies;
    for (const auto& request : server.requests()) bodies.push_back(json::parse(request.body));
    REQUIRE(bodies.size() == 2);
    return bodies;
}

}  // namespace

TEST_CASE("conversation end to end: OpenAI Chat Completions", "[conversation][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        200,
        json{{"id", "chatcmpl-1"},
             {"object", "chat.completion"},
             {"model", "gpt-4o"},
             {"choices",
              {{{"index", 0},
                {"finish_reason", "tool_calls"},
                {"message",
                 {{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls",
                   {{{"id", "call_1"},
                     {"type", "function"},
                     {"function",
                      {{"name", "lookup_weather"}, {"arguments", "{\"city\":\"Berlin\"}"}}}}}}}}}}},
             {"usage", {{"prompt_tokens", 50}, {"completion_tokens", 10}, {"total_tokens", 60}}}}
            .dump()));
    server.enqueue(ScriptedResponse::json(
        200,
        json{{"id", "chatcmpl-2"},
             {"object", "chat.completion"},
             {"model", "gpt-4o"},
             {"choices",
              {{{"index", 0},
                {"finish_reason", "stop"},
                {"message", {{"role", "assistant"}, {"content", "Sunny in Berlin."}}}}}},
             {"usage", {{"prompt_tokens", 80}, {"completion_tokens", 5}, {"total_tokens", 85}}}}
            .dump()));
    const auto bodies =
        run_weather_turn(server,
                         std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
                             .api_key = "sk-test", .base_url = server.base_url() + "/v1"}),
                         "openai/gpt-4o");
    const auto& messages = bodies[1]["messages"];
    REQUIRE(messages.size() == 4);
    CHECK(messages[0] == json{{"role", "system"}, {"content", "Be brief."}});
    CHECK(messages[2]["tool_calls"][0]["id"] == "call_1");
    CHECK(messages[3]["role"] == "tool");
    CHECK(messages[3]["tool_call_id"] == "call_1");
    CHECK(json::parse(messages[3]["content"].get<std::string>())["forecast"] == "Sunny");
}

TEST_CASE("conversation end to end: OpenAI Chat Completions streamed",
          "[conversation][integration]") {
    const auto chunk = [](const json& delta, const json& finish) {
        return "data: " +
               json{{"id", "c"},
                    {"object", "chat.completion.chunk"},
                    {"model", "gpt-4o"},
                    {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}}
                   .dump() +
               "\n\n";
    };
    const auto usage = [](int in, int out) {
        return "data: " +
               json{{"id", "c"},
                    {"object", "chat.completion.chunk"},
                    {"model", "gpt-4o"},
                    {"choices", json::array()},
                    {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}}}}
                   .dump() +
               "\n\ndata: [DONE]\n\n";
    };
    TestServer server;
    server.enqueue(ScriptedResponse::sse(
        chunk({{"role", "assistant"},
               {"tool_calls",
                {{{"index", 0},
                  {"id", "call_s"},
                  {"type", "function"},
                  {"function", {{"name", "lookup_weather"}, {"arguments", "{\"ci"}}}}}}},
              nullptr) +
            chunk({{"tool_calls",
                    {{{"index", 0}, {"function", {{"arguments", "ty\":\"Berlin\"}"}}}}}}},
                  nullptr) +
            chunk(json::object(), "tool_calls") + usage(50, 10),
        17));
    server.enqueue(ScriptedResponse::sse(chunk({{"content", "Sunny in "}}, nullptr) +
                                             chunk({{"content", "Berlin."}}, nullptr) +
                                             chunk(json::object(), "stop") + usage(80, 5),
                                         17));
    const auto bodies =
        run_weather_turn(server,
                         std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
                             .api_key = "sk-test", .base_url = server.base_url() + "/v1"}),
                         "openai/gpt-4o", true);
    CHECK(bodies[0]["stream"] == true);
    CHECK(bodies[1]["messages"][3]["tool_call_id"] == "call_s");
}

TEST_CASE("conversation end to end: OpenAI Responses replays encrypted reasoning",
          "[conversation][integration]") {
    const json reasoning = {{"type", "reasoning"},
                            {"id", "rs_1"},
                            {"summary", json::array()},
                            {"encrypted_content", "gAAAAB-opaque-reasoning=="}};
    TestServer server;
    server.enqueue(
        ScriptedResponse::json(200, json{{"id", "resp_1"},
                                         {"object", "response"},
                                         {"status", "completed"},
                                         {"model", "gpt-5"},
                                         {"output",
                                          {reasoning,
                                           {{"type", "function_call"},
                                            {"id", "fc_1"},
                                            {"call_id", "call_r"},
                                            {"name", "lookup_weather"},
                                            {"arguments", "{\"city\":\"Berlin\"}"},
                                            {"status", "completed"}}}},
                                         {"usage",
                                          {{"input_tokens", 50},
                                           {"output_tokens", 30},
                                           {"output_tokens_details", {{"reasoning_tokens", 20}}}}}}
                                        .dump()));
    server.enqueue(
        ScriptedResponse::json(200, json{{"id", "resp_2"},
                                         {"object", "response"},
                                         {"status", "completed"},
                                         {"model", "gpt-5"},
                                         {"output",
                                          {{{"type", "message"},
                                            {"id", "msg_1"},
                                            {"role", "assistant"},
                                            {"status", "completed"},
                                            {"content",
                                             {{{"type", "output_text"},
                                               {"text", "Sunny in Berlin."},
                                               {"annotations", json::array()}}}}}}},
                                         {"usage", {{"input_tokens", 90}, {"output_tokens", 5}}}}
                                        .dump()));
    const auto bodies =
        run_weather_turn(server,
                         std::make_shared<ullm::OpenAiResponsesProvider>(
                             ullm::OpenAiResponsesOptions{.api_key = "sk-test",
                                                          .base_url = server.base_url() + "/v1",
                                                          .provider_name = "openai-responses"}),
                         "openai-responses/gpt-5");
    const auto& input = bodies[1]["input"];
    CHECK(bodies[1]["store"] == false);
    // The reasoning item goes back first and unchanged, then the call, then its output.
    bool found_reasoning = false;
    for (const auto& item : input) {
        if (item.value("type", "") == "reasoning") {
            found_reasoning = true;
            CHECK(item["encrypted_content"] == reasoning["encrypted_content"]);
        }
    }
    CHECK(found_reasoning);
    CHECK(input.back()["type"] == "function_call_output");
    CHECK(input.back()["call_id"] == "call_r");
}

TEST_CASE("conversation end to end: Anthropic replays the signed thinking block",
          "[conversation][integration]") {
    const std::string signature = "EqQBCgIYAhIM+signature/with==";
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        200, json{{"id", "msg_1"},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", "claude-sonnet-4-5"},
                  {"content",
                   {{{"type", "thinking"}, {"thinking", "Look it up."}, {"signature", signature}},
                    {{"type", "tool_use"},
                     {"id", "toolu_1"},
                     {"name", "lookup_weather"},
                     {"input", {{"city", "Berlin"}}}}}},
                  {"stop_reason", "tool_use"},
                  {"usage", {{"input_tokens", 50}, {"output_tokens", 30}}}}
                 .dump()));
    server.enqueue(ScriptedResponse::json(
        200, json{{"id", "msg_2"},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", "claude-sonnet-4-5"},
                  {"content", {{{"type", "text"}, {"text", "Sunny in Berlin."}}}},
                  {"stop_reason", "end_turn"},
                  {"usage", {{"input_tokens", 90}, {"output_tokens", 5}}}}
                 .dump()));
    const auto bodies =
        run_weather_turn(server,
                         std::make_shared<ullm::AnthropicProvider>(ullm::AnthropicOptions{
                             .api_key = "sk-ant-test", .base_url = server.base_url() + "/v1"}),
                         "anthropic/claude-sonnet-4-5");
    CHECK(bodies[1]["system"].dump().find("Be brief.") != std::string::npos);
    const auto& messages = bodies[1]["messages"];
    REQUIRE(messages.size() == 3);
    CHECK(messages[1]["content"][0] ==
          json{{"type", "thinking"}, {"thinking", "Look it up."}, {"signature", signature}});
    CHECK(messages[2]["content"][0]["type"] == "tool_result");
    CHECK(messages[2]["content"][0]["tool_use_id"] == "toolu_1");
}

TEST_CASE("conversation end to end: Gemini replays the thought signature on its part",
          "[conversation][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        200,
        json{{"candidates",
              {{{"content",
                 {{"role", "model"},
                  {"parts",
                   {{{"functionCall", {{"name", "lookup_weather"}, {"args", {{"city", "Berlin"}}}}},
                     {"thoughtSignature", "c2lnbmF0dXJl"}}}}}},
                {"finishReason", "STOP"}}}},
             {"usageMetadata",
              {{"promptTokenCount", 50}, {"candidatesTokenCount", 10}, {"thoughtsTokenCount", 20}}},
             {"modelVersion", "gemini-2.5-flash"}}
            .dump()));
    server.enqueue(ScriptedResponse::json(
        200, json{{"candidates",
                   {{{"content", {{"role", "model"}, {"parts", {{{"text", "Sunny in Berlin."}}}}}},
                     {"finishReason", "STOP"}}}},
                  {"usageMetadata", {{"promptTokenCount", 90}, {"candidatesTokenCount", 5}}},
                  {"modelVersion", "gemini-2.5-flash"}}
                 .dump()));
    const auto bodies =
        run_weather_turn(server,
                         std::make_shared<ullm::GeminiProvider>(ullm::GeminiOptions{
                             .api_key = "AIza-test", .base_url = server.base_url() + "/v1beta"}),
                         "gemini/gemini-2.5-flash");
    const auto& contents = bodies[1]["contents"];
    REQUIRE(contents.size() == 3);
    CHECK(contents[1]["parts"][0]["thoughtSignature"] == "c2lnbmF0dXJl");
    CHECK(contents[1]["parts"][0]["functionCall"]["name"] == "lookup_weather");
    CHECK(contents[2]["parts"][0]["functionResponse"]["name"] == "lookup_weather");
}

TEST_CASE("conversation end to end: Gemini streamed replays the signature and never shows it",
          "[conversation][integration]") {
    const auto event = [](const json& value) { return "data: " + value.dump() + "\r\n\r\n"; };
    TestServer server;
    server.enqueue(ScriptedResponse::sse(
        event(
            {{"candidates",
              {{{"content",
                 {{"role", "model"},
                  {"parts",
                   {{{"functionCall", {{"name", "lookup_weather"}, {"args", {{"city", "Berlin"}}}}},
                     {"thoughtSignature", "c2lnbmF0dXJl"}}}}}}}}},
             {"modelVersion", "gemini-2.5-flash"}}) +
            event({{"candidates",
                    {{{"content", {{"role", "model"}, {"parts", json::array({{{"text", ""}}})}}},
                      {"finishReason", "STOP"}}}},
                   {"usageMetadata",
                    {{"promptTokenCount", 50},
                     {"candidatesTokenCount", 10},
                     {"thoughtsTokenCount", 20}}},
                   {"modelVersion", "gemini-2.5-flash"}}),
        23));
    server.enqueue(ScriptedResponse::sse(
        event({{"candidates",
                {{{"content", {{"role", "model"}, {"parts", {{{"text", "Sunny "}}}}}}}}},
               {"modelVersion", "gemini-2.5-flash"}}) +
            event({{"candidates",
                    {{{"content", {{"role", "model"}, {"parts", {{{"text", "in Berlin."}}}}}},
                      {"finishReason", "STOP"}}}},
                   {"usageMetadata", {{"promptTokenCount", 90}, {"candidatesTokenCount", 5}}},
                   {"modelVersion", "gemini-2.5-flash"}}),
        17));
    std::atomic<int> calls{0};
    const ullm::Client client(
        {.providers = {std::make_shared<ullm::GeminiProvider>(ullm::GeminiOptions{
             .api_key = "AIza-test", .base_url = server.base_url() + "/v1beta"})}});
    auto conversation =
        client.conversation({.model = "gemini/gemini-2.5-flash", .tools = {weather_tool(calls)}});
    std::string text;
    std::string shown;  // everything the events show the caller
    auto stream = conversation.send_stream("Weather in Berlin?");
    for (const auto& streamed : stream) {
        if (const auto* delta = streamed.text_delta()) text += *delta;
        shown += streamed.delta;
        if (streamed.tool_call)
            shown +=
                ullm::message_to_json(
                    ullm::Message{
                        ullm::Role::assistant, {*streamed.tool_call}, json::object(), std::nullopt})
                    .dump();
        if (streamed.response) shown += ullm::message_to_json(streamed.response->message).dump();
    }
    CHECK(text == "Sunny in Berlin.");
    CHECK(calls == 1);
    CHECK(shown.find("c2lnbmF0dXJl") == std::string::npos);
    REQUIRE(server.requests().size() == 2);
    CHECK(server.requests()[0].target.find(":streamGenerateContent?alt=sse") != std::string::npos);
    const auto second = json::parse(server.requests()[1].body);
    const auto& contents = second["contents"];
    REQUIRE(contents.size() == 3);
    CHECK(contents[1]["parts"][0]["thoughtSignature"] == "c2lnbmF0dXJl");
    CHECK(contents[1]["parts"][0]["functionCall"]["name"] == "lookup_weather");
    CHECK(contents[2]["parts"][0]["functionResponse"]["name"] == "lookup_weather");
    // The history keeps the signature for the next request, and hides it unless asked.
    CHECK(conversation.history(true)[1].replay.has_value());
    CHECK_FALSE(conversation.history()[1].replay.has_value());
}

}  // namespace conversation_e2e_test
