#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/tools/reflect.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/chat_completion_bodies.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace client_structured_output_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::chat_completion_body;
using ullm::test::chat_completion_reply;
using ullm::test::error_code_of;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace structured_test {

enum class Sentiment { positive, neutral, negative };
ULLM_REFLECT_ENUM(Sentiment, positive, neutral, negative)

struct Review {
    std::string product;
    int stars = 0;
    Sentiment sentiment = Sentiment::neutral;
    std::vector<std::string> pros;
    std::optional<std::string> reviewer;
};
ULLM_REFLECT(Review, product, stars, sentiment, pros, reviewer)

// OpenAI strict mode has no `uniqueItems`.
struct Tagged {
    std::set<std::string> tags;
};
ULLM_REFLECT(Tagged, tags)

// Anthropic takes no open-ended map.
struct Scores {
    std::map<std::string, int> by_name;
};
ULLM_REFLECT(Scores, by_name)

// A rule the schema cannot say, enforced by decoding.
struct Slot {
    std::string time;
};
ULLM_REFLECT_SCHEMA(Slot, time)
inline void from_json(const json& in, Slot& out) {
    in.at("time").get_to(out.time);
    if (out.time < "12:00" || out.time > "21:30") {
        throw ullm::ToolArgumentError("/time", "must be between 12:00 and 21:30");
    }
}

}  // namespace structured_test

using structured_test::Review;
using structured_test::Sentiment;

namespace {

const std::string good_review =
    R"({"product": "Kettle", "stars": 4, "sentiment": "positive", "pros": ["fast", "quiet"], "reviewer": null})";

ullm::Client client_of(std::shared_ptr<const ullm::Provider> provider) {
    ullm::RetryPolicy retry;
    retry.initial_backoff = 10ms;
    return ullm::Client(ullm::ClientOptions{.retry = retry, .providers = {std::move(provider)}});
}

ullm::Client openai_client(const TestServer& server, bool json_schema_output = true,
                           const std::string& name = "openai") {
    return client_of(std::make_shared<ullm::OpenAiChatProvider>(
        ullm::OpenAiChatOptions{.api_key = "sk-test",
                                .base_url = server.base_url() + "/v1",
                                .provider_name = name,
                                .json_schema_output = json_schema_output}));
}

ullm::ChatRequest ask(std::string model = "openai/gpt-4o-mini") {
    ullm::ChatRequest request;
    request.model = std::move(model);
    request.messages.push_back(ullm::Message::user("Review: the kettle is fast and quiet. 4/5"));
    return request;
}

json body_of(const TestServer& server, std::size_t index) {
    return json::parse(server.requests().at(index).body);
}

}  // namespace

TEST_CASE("Chat Completions: the schema of T goes out strict and the reply decodes into T",
          "[structured][openai_chat]") {
    TestServer server;
    server.enqueue(chat_completion_reply(good_review));
    const auto client = openai_client(server);
    const auto result = client.complete_object<Review>(ask(), {.name = "review"});
    REQUIRE(result.object);
    CHECK(result.object->product == "Kettle");
    CHECK(result.object->stars == 4);
    CHECK(result.object->sentiment == Sentiment::positive);
    CHECK(result.object->pros == std::vector<std::string>{"fast", "quiet"});
    CHECK_FALSE(result.object->reviewer);
    CHECK(result.get().product == "Kettle");
    CHECK(result.repairs == 0);
    CHECK(result.usage.input_tokens == 10);
    const json format = body_of(server, 0).at("response_format");
    CHECK(format["type"] == "json_schema");
    CHECK(format["json_schema"]["name"] == "review");
    CHECK(format["json_schema"]["strict"] == true);
    CHECK(format["json_schema"]["schema"] == ullm::json_schema_of<Review>());
}

TEST_CASE("a reply that breaks the schema is repaired within max_repairs",
          "[structured][openai_chat]") {
    TestServer server;
    server.enqueue(chat_completion_reply(R"({"product": "Kettle", "stars": 4})"));
    server.enqueue(chat_completion_reply("Sure! Here is the review you asked for."));
    server.enqueue(chat_completion_reply("```json\n" + good_review + "\n```"));
    const auto client = openai_client(server);
    const auto result = client.complete_object<Review>(ask(), {.max_repairs = 2});
    REQUIRE(result.object);
    CHECK(result.object->stars == 4);
    CHECK(result.repairs == 2);
    // Every round counts.
    CHECK(result.usage.input_tokens == 30);
    CHECK(result.usage.output_tokens == 15);
    REQUIRE(server.request_count() == 3);
    // The second request carries the first reply and what was wrong with it.
    const json messages = body_of(server, 1).at("messages");
    REQUIRE(messages.size() == 3);
    CHECK(messages[1]["role"] == "assistant");
    CHECK(messages[1]["content"] == R"({"product": "Kettle", "stars": 4})");
    CHECK(messages[2]["role"] == "user");
    const std::string repair = messages[2]["content"];
    CHECK(repair.find("/sentiment is required but missing") != std::string::npos);
    const std::string second = body_of(server, 2).at("messages")[4]["content"];
    CHECK(second.find("is not JSON") != std::string::npos);
}

TEST_CASE("without repairs left, the problem is a StructuredOutputError with its path",
          "[structured][openai_chat]") {
    TestServer server;
    server.enqueue(
        chat_completion_reply(R"({"product": "Kettle", "stars": "four", "sentiment": "positive",
                               "pros": [], "reviewer": null})"));
    const auto client = openai_client(server);
    try {
        (void)client.complete_object<Review>(ask());
        FAIL("a reply that breaks the schema was taken");
    } catch (const ullm::StructuredOutputError& error) {
        CHECK(error.code() == "structured_output_invalid");
        CHECK(error.path() == "/stars");
        CHECK(error.raw_text().find("\"four\"") != std::string::npos);
        CHECK(error.usage().input_tokens == 10);
        CHECK(error.retryable());
    }
    server.enqueue(chat_completion_reply("I think the kettle is great"));
    try {
        (void)client.complete_object<Review>(ask());
        FAIL("prose was taken for JSON");
    } catch (const ullm::StructuredOutputError& error) {
        CHECK(error.code() == "structured_output_not_json");
        CHECK(error.path().empty());
        CHECK(error.raw_text() == "I think the kettle is great");
    }
    server.enqueue(
        chat_completion_reply(R"({"product": "Kettle", "stars": 4, "sentiment": "positive",
                               "pros": [], "reviewer": null, "extra": 1})"));
    CHECK(error_code_of([&] { (void)client.complete_object<Review>(ask()); }) ==
          "structured_output_invalid");
}

TEST_CASE("a value the schema allows but from_json refuses is repaired like a schema error",
          "[structured][openai_chat]") {
    TestServer server;
    server.enqueue(chat_completion_reply(R"({"time": "09:00"})"));
    server.enqueue(chat_completion_reply(R"({"time": "19:30"})"));
    const auto client = openai_client(server);
    const auto result = client.complete_object<structured_test::Slot>(ask(), {.max_repairs = 1});
    REQUIRE(result.object);
    CHECK(result.object->time == "19:30");
    const std::string repair = body_of(server, 1).at("messages")[2]["content"];
    CHECK(repair.find("/time must be between 12:00 and 21:30") != std::string::npos);
}

TEST_CASE("a refusal is its own outcome and a cut-off reply is not repaired",
          "[structured][openai_chat]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        200,
        chat_completion_body(
            {{"role", "assistant"}, {"content", nullptr}, {"refusal", "I can't help with that."}})
            .dump()));
    const auto client = openai_client(server);
    const auto refused = client.complete_object<Review>(ask(), {.max_repairs = 3});
    CHECK(refused.refused());
    CHECK(*refused.refusal == "I can't help with that.");
    CHECK_FALSE(refused.object);
    CHECK(server.request_count() == 1);
    CHECK(error_code_of([&] { (void)refused.get(); }) == "structured_output_refused");

    server.enqueue(chat_completion_reply(R"({"product": "Ket)", "length"));
    CHECK(error_code_of([&] { (void)client.complete_object<Review>(ask(), {.max_repairs = 3}); }) ==
          "structured_output_truncated");
    CHECK(server.request_count() == 2);
}

TEST_CASE("the json-schema form validates against the schema it is given",
          "[structured][openai_chat]") {
    TestServer server;
    server.enqueue(chat_completion_reply(R"({"city": "Oslo"})"));
    const auto client = openai_client(server);
    const json schema = {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}}}}},
                         {"required", {"city"}},
                         {"additionalProperties", false}};
    const auto result = client.complete_object(ask(), schema);
    REQUIRE(result.object);
    CHECK(*result.object == json{{"city", "Oslo"}});
    CHECK(result.value == json{{"city", "Oslo"}});
}

TEST_CASE("bad options and schemas a provider cannot take are refused before sending",
          "[structured]") {
    TestServer server;
    const auto client = openai_client(server);
    CHECK(error_code_of([&] {
              (void)client.complete_object<Review>(ask(), {.max_repairs = 11});
          }) == "invalid_max_repairs");
    CHECK(error_code_of([&] {
              (void)client.complete_object<Review>(ask(), {.max_repairs = -1});
          }) == "invalid_max_repairs");
    CHECK(error_code_of([&] { (void)client.complete_object<Review>(ask(), {.name = "a b"}); }) ==
          "invalid_response_format");
    auto preset = ask();
    preset.response_format = ullm::ResponseFormat{};
    CHECK(error_code_of([&] { (void)client.complete_object<Review>(preset); }) ==
          "invalid_response_format");
    // OpenAI strict: no uniqueItems, every property required, additionalProperties false.
    try {
        (void)client.complete_object<structured_test::Tagged>(ask());
        FAIL("uniqueItems went to OpenAI in strict mode");
    } catch (const ullm::ProviderCapabilityError& error) {
        CHECK(error.code() == "unsupported_schema_keyword");
        CHECK(error.message().find("`uniqueItems` at #/properties/tags") != std::string::npos);
    }
    const json loose = {{"type", "object"},
                        {"properties", {{"a", {{"type", "string"}}}, {"b", {{"type", "string"}}}}},
                        {"required", {"a"}},
                        {"additionalProperties", false}};
    CHECK(error_code_of([&] { (void)client.complete_object(ask(), loose); }) ==
          "unsupported_schema_keyword");
    CHECK(error_code_of([&] {
              (void)client.complete_object(
                  ask(), json{{"type", "array"}, {"items", {{"type", "string"}}}});
          }) == "unsupported_schema_keyword");
    // A schema the validator refuses.
    CHECK(error_code_of([&] {
              (void)client.complete_object(ask(), json{{"type", "object"}, {"if", true}});
          }) == "unsupported_schema_keyword");
    CHECK(server.request_count() == 0);
    // Without strict mode, OpenAI takes the schema as it is.
    server.enqueue(chat_completion_reply(R"({"a": "x"})"));
    const auto result = client.complete_object(ask(), loose, {.strict = false});
    CHECK(*result.object == json{{"a", "x"}});
    CHECK(body_of(server, 0)["response_format"]["json_schema"]["strict"] == false);
}

TEST_CASE("a server with JSON mode only gets json_object and the schema in the system prompt",
          "[structured][openai_compatible]") {
    TestServer server;
    server.enqueue(chat_completion_reply(R"({"tags": ["b", "a"]})"));
    const auto client = openai_client(server, false, "deepseek");
    auto request = ask("deepseek/deepseek-chat");
    request.system = "You read reviews.";
    // Not OpenAI's strict rules: a compatible server takes any schema ullm validates.
    const auto result = client.complete_object<structured_test::Tagged>(request);
    const json body = body_of(server, 0);
    CHECK(body["response_format"] == json{{"type", "json_object"}});
    const std::string system = body["messages"][0]["content"];
    CHECK(system.rfind("You read reviews.\n\nReply with only a JSON value", 0) == 0);
    CHECK(system.find("\"uniqueItems\":true") != std::string::npos);
    REQUIRE(result.object);
    CHECK(result.object->tags == std::set<std::string>{"a", "b"});
    // Checked locally all the same: a repeated tag breaks uniqueItems.
    server.enqueue(chat_completion_reply(R"({"tags": ["a", "a"]})"));
    CHECK(error_code_of([&] { (void)client.complete_object<structured_test::Tagged>(request); }) ==
          "structured_output_invalid");
}

namespace {

ScriptedResponse anthropic_reply(const std::string& text, const std::string& stop = "end_turn") {
    return ScriptedResponse::json(
        200, json{{"id", "msg_1"},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", "claude-sonnet-4-5"},
                  {"content", json::array({{{"type", "text"}, {"text", text}}})},
                  {"stop_reason", stop},
                  {"usage", {{"input_tokens", 12}, {"output_tokens", 6}}}}
                 .dump());
}

ScriptedResponse gemini_reply(const std::string& text, const std::string& finish = "STOP") {
    return ScriptedResponse::json(
        200, json{{"candidates",
                   json::array({{{"content",
                                  {{"role", "model"}, {"parts", json::array({{{"text", text}}})}}},
                                 {"finishReason", finish}}})},
                  {"usageMetadata",
                   {{"promptTokenCount", 9}, {"candidatesTokenCount", 4}, {"totalTokenCount", 13}}},
                  {"modelVersion", "gemini-2.5-flash"}}
                 .dump());
}

ScriptedResponse responses_reply(const json& content) {
    return ScriptedResponse::json(
        200, json{{"id", "resp_1"},
                  {"object", "response"},
                  {"status", "completed"},
                  {"model", "gpt-4o"},
                  {"output", json::array({{{"type", "message"},
                                           {"id", "msg_1"},
                                           {"role", "assistant"},
                                           {"status", "completed"},
                                           {"content", content}}})},
                  {"usage", {{"input_tokens", 10}, {"output_tokens", 5}, {"total_tokens", 15}}}}
                 .dump());
}

// A Chat Completions stream whose content arrives in `pieces`.
std::string chat_stream(const std::vector<std::string>& pieces) {
    std::string wire;
    for (const auto& piece : pieces) {
        wire += "data: " +
                json{{"id", "c1"},
                     {"object", "chat.completion.chunk"},
                     {"model", "gpt-4o-mini"},
                     {"choices", json::array({{{"index", 0},
                                               {"delta", {{"content", piece}}},
                                               {"finish_reason", nullptr}}})}}
                    .dump() +
                "\n\n";
    }
    wire +=
        "data: " +
        json{{"id", "c1"},
             {"object", "chat.completion.chunk"},
             {"model", "gpt-4o-mini"},
             {"choices",
              json::array({{{"index", 0}, {"delta", json::object()}, {"finish_reason", "stop"}}})}}
            .dump() +
        "\n\n";
    wire += "data: " +
            json{{"id", "c1"},
                 {"object", "chat.completion.chunk"},
                 {"model", "gpt-4o-mini"},
                 {"choices", json::array()},
                 {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}, {"total_tokens", 15}}}}
                .dump() +
            "\n\n";
    return wire + "data: [DONE]\n\n";
}

}  // namespace

TEST_CASE("Anthropic: output_config.format with the bounds it refuses said in words",
          "[structured][anthropic]") {
    TestServer server;
    const auto client = client_of(std::make_shared<ullm::AnthropicProvider>(
        ullm::AnthropicOptions{.api_key = "sk-ant-test", .base_url = server.base_url() + "/v1"}));
    server.enqueue(anthropic_reply(good_review));
    const auto result = client.complete_object<Review>(ask("anthropic/claude-sonnet-4-5"));
    REQUIRE(result.object);
    CHECK(result.object->product == "Kettle");
    const json format = body_of(server, 0).at("output_config").at("format");
    CHECK(format["type"] == "json_schema");
    // `int` has bounds Anthropic refuses: they move into the description.
    const json stars = format["schema"]["properties"]["stars"];
    CHECK_FALSE(stars.contains("minimum"));
    CHECK_FALSE(stars.contains("maximum"));
    CHECK(stars["description"] == R"(({"maximum":2147483647,"minimum":-2147483648}))");
    CHECK(format["schema"]["additionalProperties"] == false);

    // The bounds are still checked here, and a breach is repaired.
    const json bounded = {{"type", "object"},
                          {"properties", {{"stars", {{"type", "integer"}, {"maximum", 5}}}}},
                          {"required", {"stars"}}};
    server.enqueue(anthropic_reply(R"({"stars": 7})"));
    server.enqueue(anthropic_reply(R"({"stars": 5})"));
    const auto repaired =
        client.complete_object(ask("anthropic/claude-sonnet-4-5"), bounded, {.max_repairs = 1});
    CHECK(*repaired.object == json{{"stars", 5}});
    CHECK(repaired.repairs == 1);
    CHECK(body_of(server, 1)["output_config"]["format"]["schema"]["additionalProperties"] == false);

    // A refusal, a cut-off reply, a map Anthropic cannot take.
    server.enqueue(anthropic_reply("", "refusal"));
    CHECK(client.complete_object<Review>(ask("anthropic/claude-sonnet-4-5")).refused());
    server.enqueue(anthropic_reply(R"({"product": "Ke)", "max_tokens"));
    CHECK(error_code_of([&] {
              (void)client.complete_object<Review>(ask("anthropic/claude-sonnet-4-5"));
          }) == "structured_output_truncated");
    const std::size_t sent = server.request_count();
    CHECK(error_code_of([&] {
              (void)client.complete_object<structured_test::Scores>(
                  ask("anthropic/claude-sonnet-4-5"));
          }) == "unsupported_schema_keyword");
    CHECK(server.request_count() == sent);
}

namespace {

// An older Claude model's answer through the result tool.
ScriptedResponse anthropic_result_call(const json& input) {
    return ScriptedResponse::json(200, json{{"id", "msg_2"},
                                            {"type", "message"},
                                            {"role", "assistant"},
                                            {"model", "claude-3-5-haiku-20241022"},
                                            {"content", json::array({{{"type", "tool_use"},
                                                                      {"id", "toolu_1"},
                                                                      {"name", "review"},
                                                                      {"input", input}}})},
                                            {"stop_reason", "tool_use"},
                                            {"usage", {{"input_tokens", 12}, {"output_tokens", 6}}}}
                                           .dump());
}

std::string anthropic_sse(const json& payload) {
    return "event: " + payload.at("type").get<std::string>() + "\ndata: " + payload.dump() + "\n\n";
}

}  // namespace

TEST_CASE("Anthropic before 4.5: the answer comes through a forced tool, streamed or not",
          "[structured][anthropic]") {
    TestServer server;
    const auto client = client_of(std::make_shared<ullm::AnthropicProvider>(
        ullm::AnthropicOptions{.api_key = "sk-ant-test", .base_url = server.base_url() + "/v1"}));
    // The first call leaves out a field and is repaired; the second is good.
    server.enqueue(anthropic_result_call({{"product", "Kettle"}}));
    server.enqueue(anthropic_result_call(json::parse(good_review)));
    const auto result = client.complete_object<Review>(ask("anthropic/claude-3-5-haiku-20241022"),
                                                       {.name = "review", .max_repairs = 1});
    REQUIRE(result.object);
    CHECK(result.object->stars == 4);
    CHECK(result.repairs == 1);
    const json first = body_of(server, 0);
    CHECK_FALSE(first.contains("output_config"));
    CHECK(first.at("tool_choice") == json{{"type", "tool"}, {"name", "review"}});
    CHECK(first.at("tools").at(0).at("name") == "review");
    // The refused answer went back as text, with the repair request after it.
    const json second = body_of(server, 1);
    const json& messages = second.at("messages");
    REQUIRE(messages.size() == 3);
    CHECK(messages[1].at("role") == "assistant");
    CHECK(messages[1].at("content").dump().find("tool_use") == std::string::npos);
    CHECK(messages[1].at("content").dump().find("Kettle") != std::string::npos);

    // Streamed: the tool's input arrives as partial values.
    std::string wire =
        anthropic_sse({{"type", "message_start"},
                       {"message",
                        {{"id", "msg_3"},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", "claude-3-5-haiku-20241022"},
                         {"content", json::array()},
                         {"usage", {{"input_tokens", 12}, {"output_tokens", 1}}}}}}) +
        anthropic_sse({{"type", "content_block_start"},
                       {"index", 0},
                       {"content_block",
                        {{"type", "tool_use"},
                         {"id", "toolu_2"},
                         {"name", "review"},
                         {"input", json::object()}}}});
    for (std::size_t at = 0; at < good_review.size(); at += 16) {
        wire += anthropic_sse(
            {{"type", "content_block_delta"},
             {"index", 0},
             {"delta",
              {{"type", "input_json_delta"}, {"partial_json", good_review.substr(at, 16)}}}});
    }
    wire += anthropic_sse({{"type", "content_block_stop"}, {"index", 0}}) +
            anthropic_sse({{"type", "message_delta"},
                           {"delta", {{"stop_reason", "tool_use"}}},
                           {"usage", {{"output_tokens", 20}}}}) +
            anthropic_sse({{"type", "message_stop"}});
    server.enqueue(ScriptedResponse::sse(wire, 7));
    auto stream = client.stream_object<Review>(ask("anthropic/claude-3-5-haiku-20241022"),
                                               {.name = "review"});
    int partials = 0;
    while (auto event = stream.next()) {
        if (event->type == ullm::ObjectStreamEvent::Type::partial) ++partials;
    }
    CHECK(partials > 3);
    REQUIRE(stream.result());
    REQUIRE(stream.result()->object);
    CHECK(stream.result()->object->pros == std::vector<std::string>{"fast", "quiet"});
}

TEST_CASE("Gemini: responseJsonSchema, and its finish reasons as outcomes",
          "[structured][gemini]") {
    TestServer server;
    const auto client = client_of(std::make_shared<ullm::GeminiProvider>(
        ullm::GeminiOptions{.api_key = "gm-test", .base_url = server.base_url() + "/v1beta"}));
    server.enqueue(gemini_reply(good_review));
    const auto result = client.complete_object<Review>(ask("gemini/gemini-2.5-flash"));
    REQUIRE(result.object);
    CHECK(result.object->pros.size() == 2);
    const json generation = body_of(server, 0).at("generationConfig");
    CHECK(generation["responseMimeType"] == "application/json");
    CHECK(generation["responseJsonSchema"]["required"] ==
          ullm::json_schema_of<Review>()["required"]);
    // Gemini takes maps (any schema ullm validates).
    server.enqueue(gemini_reply(R"({"by_name": {"ada": 3}})"));
    const auto scores =
        client.complete_object<structured_test::Scores>(ask("gemini/gemini-2.5-flash"));
    CHECK(scores.object->by_name.at("ada") == 3);
    server.enqueue(gemini_reply(R"({"product": )", "MAX_TOKENS"));
    CHECK(error_code_of([&] {
              (void)client.complete_object<Review>(ask("gemini/gemini-2.5-flash"));
          }) == "structured_output_truncated");
    server.enqueue(gemini_reply("", "SAFETY"));
    const auto refused = client.complete_object<Review>(ask("gemini/gemini-2.5-flash"));
    CHECK(refused.refused());

    // Before 2.5, the OpenAPI subset in responseSchema; the reply is checked the same way.
    server.enqueue(gemini_reply(good_review));
    const std::size_t before = server.request_count();
    const auto older = client.complete_object<Review>(ask("gemini/gemini-2.0-flash"));
    REQUIRE(older.object);
    CHECK(older.object->sentiment == Sentiment::positive);
    const json sent = body_of(server, before).at("generationConfig");
    CHECK_FALSE(sent.contains("responseJsonSchema"));
    const json& properties = sent.at("responseSchema").at("properties");
    CHECK(properties.at("sentiment").at("enum") ==
          json::array({"positive", "neutral", "negative"}));
    CHECK(properties.at("reviewer").at("nullable") == true);
    // A map cannot be said there: refused before sending.
    CHECK(error_code_of([&] {
              (void)client.complete_object<structured_test::Scores>(ask("gemini/gemini-2.0-flash"));
          }) == "unsupported_schema_keyword");
    CHECK(server.request_count() == before + 1);
}

TEST_CASE("Responses: text.format, and a refusal part", "[structured][openai_responses]") {
    TestServer server;
    const auto client = client_of(std::make_shared<ullm::OpenAiResponsesProvider>(
        ullm::OpenAiResponsesOptions{.api_key = "sk-test", .base_url = server.base_url() + "/v1"}));
    server.enqueue(responses_reply(json::array(
        {{{"type", "output_text"}, {"text", good_review}, {"annotations", json::array()}}})));
    const auto result = client.complete_object<Review>(ask("openai/gpt-4o"), {.name = "review"});
    REQUIRE(result.object);
    CHECK(result.object->stars == 4);
    const json format = body_of(server, 0).at("text").at("format");
    CHECK(format["type"] == "json_schema");
    CHECK(format["name"] == "review");
    CHECK(format["strict"] == true);
    server.enqueue(responses_reply(json::array({{{"type", "refusal"}, {"refusal", "No."}}})));
    const auto refused = client.complete_object<Review>(ask("openai/gpt-4o"));
    REQUIRE(refused.refused());
    CHECK(*refused.refusal == "No.");
    CHECK(error_code_of([&] {
              (void)client.complete_object<structured_test::Tagged>(ask("openai/gpt-4o"));
          }) == "unsupported_schema_keyword");
}

TEST_CASE("stream_object yields growing partial values and ends with the decoded object",
          "[structured][stream]") {
    TestServer server;
    // Delivered one byte at a time on the wire, and split inside the JSON text too.
    server.enqueue(ScriptedResponse::sse(
        chat_stream({R"({"product": "Ket)", R"(tle", "stars": 4, "sentiment": "posi)",
                     R"(tive", "pros": ["fast")", R"(, "quiet"], "reviewer": null})"}),
        1));
    const auto client = openai_client(server);
    auto stream = client.stream_object<Review>(ask());
    std::vector<json> partials;
    int done = 0;
    while (auto event = stream.next()) {
        if (event->type == ullm::ObjectStreamEvent::Type::partial) {
            REQUIRE(event->partial != nullptr);
            partials.push_back(*event->partial);
        } else if (event->type == ullm::ObjectStreamEvent::Type::done) {
            ++done;
        }
    }
    CHECK(done == 1);
    REQUIRE(partials.size() >= 4);
    CHECK(partials.front() == json{{"product", "Ket"}});
    CHECK(partials[1]["product"] == "Kettle");
    CHECK(partials.back() == json::parse(good_review));
    REQUIRE(stream.result());
    REQUIRE(stream.result()->object);
    CHECK(stream.result()->object->pros == std::vector<std::string>{"fast", "quiet"});
    CHECK(stream.result()->usage.output_tokens == 5);
    CHECK_FALSE(stream.next());
}

TEST_CASE("stream_object repairs a bad reply in a second stream", "[structured][stream]") {
    TestServer server;
    server.enqueue(ScriptedResponse::sse(chat_stream({R"({"product": "Kettle"})"}), 7));
    server.enqueue(ScriptedResponse::sse(chat_stream({good_review}), 0));
    const auto client = openai_client(server);
    auto stream = client.stream_object<Review>(ask(), {.max_repairs = 1});
    std::vector<std::string> kinds;
    std::string problem;
    while (auto event = stream.next()) {
        switch (event->type) {
            case ullm::ObjectStreamEvent::Type::partial:
                kinds.push_back("partial");
                break;
            case ullm::ObjectStreamEvent::Type::repair:
                kinds.push_back("repair");
                problem = event->problem;
                break;
            case ullm::ObjectStreamEvent::Type::done:
                kinds.push_back("done");
                break;
        }
    }
    REQUIRE(kinds.size() >= 3);
    CHECK(kinds.back() == "done");
    CHECK(std::count(kinds.begin(), kinds.end(), std::string("repair")) == 1);
    CHECK(problem.find("/stars is required but missing") != std::string::npos);
    REQUIRE(stream.result());
    CHECK(stream.result()->repairs == 1);
    CHECK(stream.result()->usage.input_tokens == 20);
    CHECK(stream.result()->object->product == "Kettle");

    // Without repairs, the error comes from next().
    server.enqueue(ScriptedResponse::sse(chat_stream({"not json at all"}), 0));
    auto failing = client.stream_object<Review>(ask());
    CHECK(error_code_of([&] {
              while (failing.next()) {
              }
          }) == "structured_output_not_json");
    // Options are checked when the stream is made.
    CHECK(error_code_of([&] { (void)client.stream_object<Review>(ask(), {.max_repairs = 99}); }) ==
          "invalid_max_repairs");
}

namespace {

// One provider as a structured-output call meets it: how to build its client and its answers.
struct ProviderCase {
    std::string name;
    std::string model;
    std::function<ullm::Client(const TestServer&)> client;
    std::function<ScriptedResponse(const std::string& text)> reply;      // a finished answer
    std::function<ScriptedResponse(const std::string& text)> truncated;  // cut off at the limit
    std::function<ScriptedResponse()> refusal;
};

ScriptedResponse anthropic_tool_reply(const std::string& text, const std::string& stop) {
    const json parsed = json::parse(text, nullptr, false);
    return ScriptedResponse::json(
        200,
        json{{"id", "msg_9"},
             {"type", "message"},
             {"role", "assistant"},
             {"model", "claude-3-5-haiku-20241022"},
             {"content", json::array({{{"type", "tool_use"},
                                       {"id", "toolu_9"},
                                       {"name", "ticket"},
                                       {"input", parsed.is_discarded() ? json(text) : parsed}}})},
             {"stop_reason", stop},
             {"usage", {{"input_tokens", 12}, {"output_tokens", 6}}}}
            .dump());
}

ScriptedResponse responses_incomplete(const std::string& text) {
    return ScriptedResponse::json(
        200, json{{"id", "resp_2"},
                  {"object", "response"},
                  {"status", "incomplete"},
                  {"incomplete_details", {{"reason", "max_output_tokens"}}},
                  {"model", "gpt-4o"},
                  {"output",
                   json::array({{{"type", "message"},
                                 {"id", "msg_2"},
                                 {"role", "assistant"},
                                 {"status", "incomplete"},
                                 {"content", json::array({{{"type", "output_text"},
                                                           {"text", text},
                                                           {"annotations", json::array()}}})}}})},
                  {"usage", {{"input_tokens", 10}, {"output_tokens", 5}, {"total_tokens", 15}}}}
                 .dump());
}

std::vector<ProviderCase> provider_cases() {
    const auto output_text = [](const std::string& text) {
        return json::array(
            {{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}});
    };
    // One client factory per provider; its variants differ by model.
    const auto anthropic = [](const TestServer& server) {
        return client_of(std::make_shared<ullm::AnthropicProvider>(ullm::AnthropicOptions{
            .api_key = "sk-ant-test", .base_url = server.base_url() + "/v1"}));
    };
    const auto gemini = [](const TestServer& server) {
        return client_of(std::make_shared<ullm::GeminiProvider>(
            ullm::GeminiOptions{.api_key = "gm-test", .base_url = server.base_url() + "/v1beta"}));
    };
    return {
        {"Chat Completions", "openai/gpt-4o-mini",
         [](const TestServer& server) { return openai_client(server); },
         [](const std::string& text) { return chat_completion_reply(text); },
         [](const std::string& text) { return chat_completion_reply(text, "length"); },
         [] {
             return ScriptedResponse::json(
                 200, chat_completion_body(
                          {{"role", "assistant"}, {"content", nullptr}, {"refusal", "No."}})
                          .dump());
         }},
        {"Responses", "openai/gpt-4o",
         [](const TestServer& server) {
             return client_of(
                 std::make_shared<ullm::OpenAiResponsesProvider>(ullm::OpenAiResponsesOptions{
                     .api_key = "sk-test", .base_url = server.base_url() + "/v1"}));
         },
         [output_text](const std::string& text) { return responses_reply(output_text(text)); },
         [](const std::string& text) { return responses_incomplete(text); },
         [] {
             return responses_reply(json::array({{{"type", "refusal"}, {"refusal", "No."}}}));
         }},
        {"Anthropic", "anthropic/claude-sonnet-4-5", anthropic,
         [](const std::string& text) { return anthropic_reply(text); },
         [](const std::string& text) { return anthropic_reply(text, "max_tokens"); },
         [] { return anthropic_reply("", "refusal"); }},
        {"Anthropic through a tool", "anthropic/claude-3-5-haiku-20241022", anthropic,
         [](const std::string& text) { return anthropic_tool_reply(text, "tool_use"); },
         [](const std::string& text) { return anthropic_tool_reply(text, "max_tokens"); },
         [] { return anthropic_reply("", "refusal"); }},
        {"Gemini", "gemini/gemini-2.5-flash", gemini,
         [](const std::string& text) { return gemini_reply(text); },
         [](const std::string& text) { return gemini_reply(text, "MAX_TOKENS"); },
         [] { return gemini_reply("", "SAFETY"); }},
        {"Gemini 2.0", "gemini/gemini-2.0-flash", gemini,
         [](const std::string& text) { return gemini_reply(text); },
         [](const std::string& text) { return gemini_reply(text, "MAX_TOKENS"); },
         [] { return gemini_reply("", "SAFETY"); }},
    };
}

}  // namespace

TEST_CASE("every provider: not JSON, a missing field, a refusal, a cut-off reply and a repair",
          "[structured][providers]") {
    const json schema = {
        {"type", "object"},
        {"properties", {{"title", {{"type", "string"}}}, {"priority", {{"type", "integer"}}}}},
        {"required", json::array({"title", "priority"})},
        {"additionalProperties", false}};
    const ullm::StructuredOutputOptions once{.name = "ticket"};
    for (const auto& provider : provider_cases()) {
        INFO(provider.name);
        TestServer server;
        const auto client = provider.client(server);
        const auto ask_it = [&] {
            ullm::ChatRequest request;
            request.model = provider.model;
            request.messages.push_back(ullm::Message::user("File: login fails, priority 2"));
            return request;
        };
        const auto failure = [&](const std::function<void()>& run) {
            try {
                run();
            } catch (const ullm::StructuredOutputError& error) {
                return error.code() + " " + error.path();
            }
            return std::string("no StructuredOutputError");
        };
        server.enqueue(provider.reply("Sure, here it is"));
        CHECK(failure([&] { (void)client.complete_object(ask_it(), schema, once); }) ==
              "structured_output_not_json ");
        server.enqueue(provider.reply(R"({"title": "Login fails"})"));
        CHECK(failure([&] { (void)client.complete_object(ask_it(), schema, once); }) ==
              "structured_output_invalid /priority");
        server.enqueue(provider.refusal());
        const auto refused = client.complete_object(ask_it(), schema, once);
        CHECK(refused.refused());
        CHECK_FALSE(refused.object);
        server.enqueue(provider.truncated(R"({"title": "Login f)"));
        CHECK(failure([&] {
                  (void)client.complete_object(ask_it(), schema,
                                               {.name = "ticket", .max_repairs = 2});
              }) == "structured_output_truncated ");
        // A repair round: the problem goes back, the second answer is taken.
        const std::size_t before = server.request_count();
        server.enqueue(provider.reply(R"({"title": "Login fails", "priority": "high"})"));
        server.enqueue(provider.reply(R"({"title": "Login fails", "priority": 2})"));
        const auto repaired =
            client.complete_object(ask_it(), schema, {.name = "ticket", .max_repairs = 1});
        REQUIRE(repaired.object);
        CHECK(*repaired.object == json{{"title", "Login fails"}, {"priority", 2}});
        CHECK(repaired.repairs == 1);
        REQUIRE(server.request_count() == before + 2);
        const std::string second = server.requests().at(before + 1).body;
        CHECK(second.find("Your reply could not be used") != std::string::npos);
        CHECK(second.find("/priority") != std::string::npos);
    }
}

TEST_CASE(
    "a reply that only calls a tool goes back without the call, and a failed stream stays "
    "failed",
    "[structured][openai_chat]") {
    TestServer server;
    const auto client = openai_client(server);
    const json call = {{"id", "call_1"},
                       {"type", "function"},
                       {"function", {{"name", "lookup"}, {"arguments", "{}"}}}};
    server.enqueue(ScriptedResponse::json(
        200, chat_completion_body(
                 {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}},
                 "tool_calls")
                 .dump()));
    server.enqueue(chat_completion_reply(good_review));
    auto request = ask();
    request.tools = {{"lookup", "Looks a product up", json{{"type", "object"}}}};
    const auto result = client.complete_object<Review>(request, {.max_repairs = 1});
    REQUIRE(result.object);
    CHECK(result.repairs == 1);
    // The call is not run, so it is not sent back unanswered: the assistant turn says what it did.
    const json second = body_of(server, 1);
    const json& messages = second.at("messages");
    REQUIRE(messages.size() == 3);
    CHECK(messages[1].at("role") == "assistant");
    CHECK_FALSE(messages[1].contains("tool_calls"));
    CHECK(messages[1].at("content").dump().find("called the tool") != std::string::npos);

    // A streamed call whose reply cannot be used throws, and throws again: nothing more is sent.
    server.enqueue(ScriptedResponse::sse(chat_stream({"not ", "JSON"}), 0));
    auto stream = client.stream_object<Review>(ask());
    CHECK(error_code_of([&] {
              while (stream.next()) {
              }
          }) == "structured_output_not_json");
    const std::size_t sent = server.request_count();
    CHECK(error_code_of([&] { (void)stream.next(); }) == "structured_output_not_json");
    CHECK(server.request_count() == sent);
    CHECK_FALSE(stream.result());
}

}  // namespace client_structured_output_test
