#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_responses.hpp>

#include "support/catch.hpp"
#include "support/test_server.hpp"

namespace client_gemini_responses_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

ullm::ChatRequest weather_request(std::string model) {
    ullm::ChatRequest request;
    request.model = std::move(model);
    request.messages = {ullm::Message::user("Weather in Berlin?")};
    request.tools = {{"lookup_weather",
                      "Look up the weather",
                      {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}}}}},
                       {"required", {"city"}}}}};
    return request;
}

ullm::ChatResponse drain(ullm::ChatStream& stream) {
    for (const auto& event : stream) (void)event;
    REQUIRE(stream.response().has_value());
    return *stream.response();
}

// One round of the tool loop: the tool's result appended after the model's message.
void answer_tool_calls(ullm::ChatRequest& request, const ullm::ChatResponse& response) {
    request.messages.push_back(response.message);
    std::vector<ullm::ToolResultPart> results;
    for (const auto& call : response.tool_calls) {
        results.push_back({call.id, call.name, json{{"forecast", "Sunny"}}, false});
    }
    request.messages.push_back(ullm::Message::tool_results(results));
}

std::string typed(const json& data) {
    return "event: " + data["type"].get<std::string>() + "\ndata: " + data.dump() + "\n\n";
}

}  // namespace

TEST_CASE("Gemini: a thought signature travels back on its part, and ids are mapped back",
          "[client][integration][gemini]") {
    TestServer server;
    const std::string signature = "CiQB0e2Kb3+thought/signature==";
    const json call_chunk = {
        {"candidates",
         {{{"content",
            {{"role", "model"},
             {"parts",
              {{{"functionCall", {{"name", "lookup_weather"}, {"args", {{"city", "Berlin"}}}}},
                {"thoughtSignature", signature}}}}}},
           {"finishReason", "STOP"},
           {"index", 0}}}},
        {"usageMetadata",
         {{"promptTokenCount", 30}, {"candidatesTokenCount", 5}, {"thoughtsTokenCount", 20}}},
        {"modelVersion", "gemini-2.5-flash"},
        {"responseId", "resp_1"}};
    const json text_chunk = {
        {"candidates",
         {{{"content", {{"role", "model"}, {"parts", {{{"text", "Sunny in Berlin."}}}}}},
           {"finishReason", "STOP"}}}},
        {"usageMetadata", {{"promptTokenCount", 60}, {"candidatesTokenCount", 4}}}};
    server.enqueue(ScriptedResponse::sse("data: " + call_chunk.dump() + "\r\n\r\n", 29));
    server.enqueue(ScriptedResponse::sse("data: " + text_chunk.dump() + "\r\n\r\n", 29));
    auto provider = std::make_shared<ullm::GeminiProvider>(
        ullm::GeminiOptions{.api_key = "AIza-secret", .base_url = server.base_url() + "/v1beta"});
    const ullm::Client client({.providers = {provider}});

    auto request = weather_request("gemini-2.5-flash");
    auto first_stream = client.stream(request);
    const auto first = drain(first_stream);
    REQUIRE(first.tool_calls.size() == 1);
    CHECK(first.finish_reason == ullm::FinishReason::tool_call);  // Gemini said STOP
    CHECK(first.usage.output_tokens == 25);                       // thoughts billed as output
    CHECK_FALSE(first.tool_calls[0].id.empty());                  // synthesised
    CHECK(ullm::message_to_json(first.message, false).dump().find(signature) == std::string::npos);

    answer_tool_calls(request, first);
    auto second_stream = client.stream(request);
    CHECK(drain(second_stream).text == "Sunny in Berlin.");

    const auto requests = server.requests();
    CHECK(requests[0].target == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    CHECK(requests[0].header("x-goog-api-key") == "AIza-secret");
    const auto sent = json::parse(requests[1].body);
    const auto& model_turn = sent["contents"][1];
    CHECK(model_turn["role"] == "model");
    CHECK(model_turn["parts"][0]["thoughtSignature"] == signature);
    CHECK(model_turn["parts"][0]["functionCall"]["name"] == "lookup_weather");
    const auto& results = sent["contents"][2];
    CHECK(results["parts"][0]["functionResponse"]["name"] == "lookup_weather");
    CHECK(results["parts"][0]["functionResponse"]["response"] == json{{"forecast", "Sunny"}});
}

TEST_CASE("Responses: reasoning items are replayed in order with their encrypted content",
          "[client][integration][openai_responses]") {
    TestServer server;
    const json reasoning = {{"type", "reasoning"},
                            {"id", "rs_1"},
                            {"summary", json::array()},
                            {"encrypted_content", "gAAAAB+encrypted/reasoning=="}};
    const json call = {{"type", "function_call"},
                       {"id", "fc_1"},
                       {"call_id", "call_1"},
                       {"name", "lookup_weather"},
                       {"arguments", "{\"city\":\"Berlin\"}"},
                       {"status", "completed"}};
    const json usage = {{"input_tokens", 40},
                        {"input_tokens_details", {{"cached_tokens", 0}}},
                        {"output_tokens", 30},
                        {"output_tokens_details", {{"reasoning_tokens", 20}}}};
    const json first_response = {{"id", "resp_1"},
                                 {"object", "response"},
                                 {"status", "completed"},
                                 {"model", "o4-mini-2025-04-16"},
                                 {"output", {reasoning, call}},
                                 {"usage", usage}};
    const std::string first_wire =
        typed({{"type", "response.created"},
               {"response", {{"id", "resp_1"}, {"status", "in_progress"}}}}) +
        typed({{"type", "response.output_item.done"}, {"output_index", 0}, {"item", reasoning}}) +
        typed({{"type", "response.output_item.done"}, {"output_index", 1}, {"item", call}}) +
        typed({{"type", "response.completed"}, {"response", first_response}});
    const json message = {
        {"type", "message"},
        {"id", "msg_1"},
        {"role", "assistant"},
        {"status", "completed"},
        {"content",
         {{{"type", "output_text"}, {"text", "Sunny."}, {"annotations", json::array()}}}}};
    const json second_response = {{"id", "resp_2"},        {"object", "response"},
                                  {"status", "completed"}, {"model", "o4-mini-2025-04-16"},
                                  {"output", {message}},   {"usage", usage}};
    const std::string second_wire =
        typed({{"type", "response.output_text.delta"},
               {"output_index", 0},
               {"content_index", 0},
               {"delta", "Sunny."}}) +
        typed({{"type", "response.completed"}, {"response", second_response}});
    server.enqueue(ScriptedResponse::sse(first_wire, 53));
    server.enqueue(ScriptedResponse::sse(second_wire, 53));

    auto provider = std::make_shared<ullm::OpenAiResponsesProvider>(ullm::OpenAiResponsesOptions{
        .api_key = "sk-secret", .base_url = server.base_url() + "/v1"});
    const ullm::Client client({.providers = {provider}});
    auto request = weather_request("o4-mini");
    auto first_stream = client.stream(request);
    const auto first = drain(first_stream);
    REQUIRE(first.tool_calls.size() == 1);
    CHECK(first.tool_calls[0].id == "call_1");
    CHECK(first.usage.reasoning_tokens == 20);

    answer_tool_calls(request, first);
    auto second_stream = client.stream(request);
    CHECK(drain(second_stream).text == "Sunny.");

    const auto body1 = json::parse(server.requests().at(0).body);
    CHECK(body1["store"] == false);
    CHECK(body1["include"] == json::array({"reasoning.encrypted_content"}));
    const auto body2 = json::parse(server.requests().at(1).body);
    const auto& input = body2["input"];
    REQUIRE(input.size() == 4);
    CHECK(input[1]["type"] == "reasoning");
    CHECK(input[1]["encrypted_content"] == "gAAAAB+encrypted/reasoning==");
    CHECK(input[2]["type"] == "function_call");
    CHECK(input[2]["call_id"] == "call_1");
    CHECK(input[3] == json{{"type", "function_call_output"},
                           {"call_id", "call_1"},
                           {"output", "{\"forecast\":\"Sunny\"}"}});
}

}  // namespace client_gemini_responses_test
