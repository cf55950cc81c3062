// The Anthropic Messages adapter: request bodies and headers, capability refusals, replay of
// thinking blocks, error mapping and the stream decoder on hand-written traffic. Recorded
// traffic is covered by anthropic_conformance_test.cpp.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/anthropic.hpp>

#include "support/catch.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace anthropic_test {

namespace {

using ullm::AnthropicOptions;
using ullm::AnthropicProvider;
using ullm::ChatRequest;
using ullm::ChatResponse;
using ullm::DocumentPart;
using ullm::FinishReason;
using ullm::HttpResponse;
using ullm::ImagePart;
using ullm::json;
using ullm::Message;
using ullm::Role;
using ullm::StreamEvent;
using ullm::TextPart;
using ullm::ToolCallPart;
using ullm::ToolChoice;
using ullm::ToolSpec;

const AnthropicProvider& provider() {
    static const AnthropicProvider instance(AnthropicOptions{.api_key = "sk-ant-test-key"});
    return instance;
}

ToolSpec weather_tool() {
    return {"lookup_weather", "Look up the weather by city",
            json{{"type", "object"},
                 {"properties", {{"city", {{"type", "string"}}}}},
                 {"required", {"city"}}}};
}

ToolSpec time_tool() {
    return {"lookup_time", "Look up the local time of a city",
            json{{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}};
}

ChatRequest basic_request(std::string model = "claude-sonnet-4-5") {
    ChatRequest request;
    request.model = std::move(model);
    request.messages = {Message::user("Hello")};
    return request;
}

Message assistant_with_calls(std::vector<ToolCallPart> calls, std::string text = {}) {
    Message message;
    message.role = Role::assistant;
    if (!text.empty()) message.parts.emplace_back(TextPart{std::move(text)});
    for (auto& call : calls) message.parts.emplace_back(std::move(call));
    return message;
}

std::string error_code(const std::function<void()>& run) {
    try {
        run();
    } catch (const ullm::Error& error) {
        return error.code();
    }
    return "ok";
}

ChatResponse decode_body(const json& body, const ChatRequest& request = basic_request()) {
    HttpResponse response;
    response.status = 200;
    response.body = body.dump();
    return provider().decode(response, request);
}

HttpResponse error_response(int status, const json& body, ullm::HttpHeaders headers = {}) {
    HttpResponse response;
    response.status = status;
    response.headers = std::move(headers);
    response.body = body.dump();
    return response;
}

std::string sse(const json& payload) {
    return "event: " + payload["type"].get<std::string>() + "\ndata: " + payload.dump() + "\n\n";
}

std::string message_start(std::string id = "msg_test", std::string model = "claude-sonnet-4-5") {
    return sse({{"type", "message_start"},
                {"message",
                 {{"id", std::move(id)},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", std::move(model)},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"usage",
                   {{"input_tokens", 25},
                    {"cache_read_input_tokens", 100},
                    {"cache_creation_input_tokens", 10},
                    {"output_tokens", 1}}}}}});
}

std::string block_start(int index, const json& block) {
    return sse({{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
}

std::string block_delta(int index, const json& delta) {
    return sse({{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
}

std::string block_stop(int index) {
    return sse({{"type", "content_block_stop"}, {"index", index}});
}

std::string message_end(const std::string& stop_reason, int output_tokens) {
    return sse({{"type", "message_delta"},
                {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", nullptr}}},
                {"usage", {{"output_tokens", output_tokens}}}}) +
           sse({{"type", "message_stop"}});
}

// A thinking tool loop turn: thinking (with signature), text, a tool call.
const char* const thinking_signature = "EqQBCkYIBxgCKkD+signature/with+base64==";

std::string thinking_tool_stream() {
    return message_start() + sse({{"type", "ping"}}) +
           block_start(0, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}) +
           block_delta(0, {{"type", "thinking_delta"}, {"thinking", "The user wants "}}) +
           block_delta(0, {{"type", "thinking_delta"}, {"thinking", "the weather."}}) +
           block_delta(0, {{"type", "signature_delta"}, {"signature", thinking_signature}}) +
           block_stop(0) + block_start(1, {{"type", "redacted_thinking"}, {"data", "opaque=="}}) +
           block_stop(1) + block_start(2, {{"type", "text"}, {"text", ""}}) +
           block_delta(2, {{"type", "text_delta"}, {"text", "Let me check."}}) + block_stop(2) +
           block_start(3, {{"type", "tool_use"},
                           {"id", "toolu_1"},
                           {"name", "lookup_weather"},
                           {"input", json::object()}}) +
           block_delta(3, {{"type", "input_json_delta"}, {"partial_json", ""}}) +
           block_delta(3, {{"type", "input_json_delta"}, {"partial_json", "{\"city\": "}}) +
           block_delta(3, {{"type", "input_json_delta"}, {"partial_json", "\"Berlin\"}"}}) +
           block_stop(3) + sse({{"type", "future_event"}, {"anything", true}}) +
           message_end("tool_use", 42);
}

struct Streamed {
    std::vector<StreamEvent> events;
    ChatResponse response;
    bool visible = false;
};

Streamed run_stream(std::string_view wire, const ChatRequest& request = basic_request(),
                    std::size_t chunk = 5) {
    auto decoder = provider().stream_decoder(request);
    Streamed out;
    for (std::size_t at = 0; at < wire.size(); at += chunk) {
        decoder->feed(wire.substr(at, chunk), out.events);
    }
    decoder->finish(out.events);
    out.visible = decoder->produced_visible_event();
    REQUIRE_FALSE(out.events.empty());
    REQUIRE(out.events.back().type == StreamEvent::Type::done);
    REQUIRE(std::count_if(out.events.begin(), out.events.end(), [](const StreamEvent& event) {
                return event.type == StreamEvent::Type::done;
            }) == 1);
    out.response = *out.events.back().response;
    return out;
}

// A body with the same content as thinking_tool_stream().
json thinking_tool_body() {
    return {{"id", "msg_test"},
            {"type", "message"},
            {"role", "assistant"},
            {"model", "claude-sonnet-4-5"},
            {"content",
             {{{"type", "thinking"},
               {"thinking", "The user wants the weather."},
               {"signature", thinking_signature}},
              {{"type", "redacted_thinking"}, {"data", "opaque=="}},
              {{"type", "text"}, {"text", "Let me check."}},
              {{"type", "tool_use"},
               {"id", "toolu_1"},
               {"name", "lookup_weather"},
               {"input", {{"city", "Berlin"}}}}}},
            {"stop_reason", "tool_use"},
            {"stop_sequence", nullptr},
            {"usage",
             {{"input_tokens", 25},
              {"cache_read_input_tokens", 100},
              {"cache_creation_input_tokens", 10},
              {"output_tokens", 42}}}};
}

// The next request of a tool loop: the assistant turn comes back with the tool result.
ChatRequest next_round(const Message& assistant, std::string model = "claude-sonnet-4-5") {
    ChatRequest request;
    request.model = std::move(model);
    request.tools = {weather_tool()};
    request.messages = {
        Message::user("What is the weather in Berlin?"), assistant,
        Message::tool_results({{"toolu_1", "lookup_weather", json{{"forecast", "sunny"}}, false}})};
    return request;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Requests

TEST_CASE("anthropic: the HTTP request carries the key, version and beta headers", "[anthropic]") {
    AnthropicOptions options;
    options.api_key = "sk-ant-secret";
    options.base_url = "https://proxy.example/v1/";
    options.beta = {"interleaved-thinking-2025-05-14", "", "context-1m-2025-08-07"};
    options.extra_headers = {{"x-trace", "1"}};
    options.idle_timeout = std::chrono::seconds(30);
    const AnthropicProvider custom(options);
    CHECK(custom.name() == "anthropic");

    const auto http = custom.encode(basic_request(), true);
    CHECK(http.method == "POST");
    CHECK(http.url == "https://proxy.example/v1/messages");
    CHECK(ullm::find_header(http.headers, "x-api-key") == "sk-ant-secret");
    CHECK(ullm::find_header(http.headers, "anthropic-version") == "2023-06-01");
    CHECK(ullm::find_header(http.headers, "anthropic-beta") ==
          "interleaved-thinking-2025-05-14,context-1m-2025-08-07");
    CHECK(ullm::find_header(http.headers, "content-type") == "application/json");
    CHECK(ullm::find_header(http.headers, "accept") == "text/event-stream");
    CHECK(ullm::find_header(http.headers, "x-trace") == "1");
    CHECK_FALSE(ullm::find_header(http.headers, "authorization").has_value());
    CHECK(http.secrets == std::vector<std::string>{"sk-ant-secret"});
    CHECK(http.idle_timeout == std::chrono::seconds(30));
    CHECK(json::parse(http.body) == custom.encode_body(basic_request(), true));

    const auto plain = AnthropicProvider().encode(basic_request(), false);
    CHECK_FALSE(ullm::find_header(plain.headers, "x-api-key").has_value());
    CHECK_FALSE(ullm::find_header(plain.headers, "anthropic-beta").has_value());
    CHECK_FALSE(ullm::find_header(plain.headers, "accept").has_value());
    CHECK(plain.url == "https://api.anthropic.com/v1/messages");
}

TEST_CASE("anthropic: the body has a top-level system prompt and required max_tokens",
          "[anthropic]") {
    ChatRequest request = basic_request();
    request.system = "Be brief.";
    request.temperature = 0.2;
    request.stop = {"END"};
    json body = provider().encode_body(request, true);
    CHECK(body["model"] == "claude-sonnet-4-5");
    CHECK(body["system"] == "Be brief.");
    CHECK(body["max_tokens"] == 4096);
    CHECK(body["temperature"] == 0.2);
    CHECK(body["stop_sequences"] == json{"END"});
    CHECK(body["stream"] == true);
    CHECK(body["messages"] ==
          json::parse(R"([{"role":"user","content":[{"type":"text","text":"Hello"}]}])"));
    CHECK_FALSE(body.contains("tools"));
    CHECK_FALSE(body.contains("tool_choice"));

    request.max_tokens = 300;
    CHECK(provider().encode_body(request, false)["max_tokens"] == 300);
    CHECK_FALSE(provider().encode_body(request, false).contains("stream"));

    SECTION("thinking leaves room for the answer, and provider options are merged") {
        ChatRequest thinking = basic_request();
        thinking.provider_options = {{"thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}},
                                     {"top_k", 5},
                                     {"metadata", {{"user_id", "u-1"}}}};
        body = provider().encode_body(thinking, false);
        CHECK(body["max_tokens"] == 4096 + 2048);
        CHECK(body["thinking"] == json{{"type", "enabled"}, {"budget_tokens", 2048}});
        CHECK(body["top_k"] == 5);
        CHECK(body["metadata"]["user_id"] == "u-1");
        thinking.provider_options["max_tokens"] = 9000;
        CHECK(provider().encode_body(thinking, false)["max_tokens"] == 9000);
    }
    SECTION("system messages in the history join the system prompt") {
        request.messages.insert(request.messages.begin(), Message::system("Answer in French."));
        body = provider().encode_body(request, false);
        CHECK(body["system"] == "Be brief.\n\nAnswer in French.");
        CHECK(body["messages"].size() == 1);
    }
}

TEST_CASE("anthropic: tool results open the next user turn and same-role turns merge",
          "[anthropic]") {
    ChatRequest request;
    request.model = "claude-sonnet-4-5";
    request.tools = {weather_tool(), time_tool()};
    request.messages = {
        Message::user("Weather and time in Berlin?"),
        Message::user("Please be quick."),
        assistant_with_calls({{"toolu_a", "lookup_weather", {{"city", "Berlin"}}},
                              {"toolu_b", "lookup_time", json("{\"city\": Berl")}},
                             "Checking both."),
        Message::tool_results({{"toolu_a", "lookup_weather", json{{"forecast", "sunny"}}, false},
                               {"toolu_b", "lookup_time", json("bad arguments"), true}}),
        Message::user("Also, thanks!"),
        Message::assistant("Sunny; I could not get the time."),
        Message::assistant("Anything else?"),
    };
    const json body = provider().encode_body(request, false);
    const json expected = json::parse(R"([
      {"role": "user", "content": [
        {"type": "text", "text": "Weather and time in Berlin?"},
        {"type": "text", "text": "Please be quick."}]},
      {"role": "assistant", "content": [
        {"type": "text", "text": "Checking both."},
        {"type": "tool_use", "id": "toolu_a", "name": "lookup_weather", "input": {"city": "Berlin"}},
        {"type": "tool_use", "id": "toolu_b", "name": "lookup_time", "input": {}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "{\"forecast\":\"sunny\"}"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": "bad arguments",
         "is_error": true},
        {"type": "text", "text": "Also, thanks!"}]},
      {"role": "assistant", "content": [
        {"type": "text", "text": "Sunny; I could not get the time."},
        {"type": "text", "text": "Anything else?"}]}
    ])");
    CHECK(body["messages"] == expected);
    CHECK(body["tools"] == json::parse(R"([
      {"name": "lookup_weather", "description": "Look up the weather by city",
       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]}},
      {"name": "lookup_time", "description": "Look up the local time of a city",
       "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
    ])"));

    SECTION("a tool message after a user message still puts its results first") {
        ChatRequest odd;
        odd.model = "claude-sonnet-4-5";
        odd.messages = {
            assistant_with_calls({{"toolu_a", "lookup_weather", json::object()}}),
            Message::user("By the way"),
            Message::tool_results({{"toolu_a", "lookup_weather", json("sunny"), false}})};
        const json merged = provider().encode_body(odd, false)["messages"];
        REQUIRE(merged.size() == 2);
        CHECK(merged[1]["content"][0]["type"] == "tool_result");
        CHECK(merged[1]["content"][1]["type"] == "text");
    }
}

TEST_CASE("anthropic: tool_choice forms", "[anthropic]") {
    ChatRequest request = basic_request();
    request.tools = {weather_tool()};
    const auto choice = [&](ToolChoice value) {
        request.tool_choice = std::move(value);
        return provider().encode_body(request, false)["tool_choice"];
    };
    CHECK(choice(ToolChoice::automatic()) == json{{"type", "auto"}});
    CHECK(choice(ToolChoice::none()) == json{{"type", "none"}});
    CHECK(choice(ToolChoice::required()) == json{{"type", "any"}});
    CHECK(choice(ToolChoice::tool("lookup_weather")) ==
          json{{"type", "tool"}, {"name", "lookup_weather"}});
    request.tool_choice = ToolChoice::tool("unknown");
    CHECK(error_code([&] { ullm::check_request(request, provider()); }) == "invalid_tool_choice");
    request.tools.clear();
    request.tool_choice = ToolChoice::none();
    CHECK_FALSE(provider().encode_body(request, false).contains("tool_choice"));
}

TEST_CASE("anthropic: cache_control from message metadata and provider options", "[anthropic]") {
    const json ephemeral = {{"type", "ephemeral"}};
    ChatRequest request;
    request.model = "claude-sonnet-4-5";
    request.system = "A long system prompt.";
    request.tools = {weather_tool(), time_tool()};
    Message document = Message::user("A long document.");
    document.parts.emplace_back(TextPart{"Its second part."});
    document.metadata["cache_control"] = {{"type", "ephemeral"}, {"ttl", "1h"}};
    Message results = Message::tool_results({{"toolu_a", "lookup_weather", json("sunny"), false}});
    results.metadata["cache_control"] = ephemeral;
    request.messages = {document,
                        assistant_with_calls({{"toolu_a", "lookup_weather", {{"city", "Oslo"}}}}),
                        results, Message::user("And tomorrow?")};
    request.provider_options = {{"system_cache_control", ephemeral},
                                {"tools_cache_control", ephemeral}};
    const json body = provider().encode_body(request, false);

    CHECK(body["system"] == json::parse(R"([{"type": "text", "text": "A long system prompt.",
                                             "cache_control": {"type": "ephemeral"}}])"));
    CHECK_FALSE(body["tools"][0].contains("cache_control"));
    CHECK(body["tools"][1]["cache_control"] == ephemeral);
    const json& messages = body["messages"];
    CHECK_FALSE(messages[0]["content"][0].contains("cache_control"));
    CHECK(messages[0]["content"][1]["cache_control"] == json{{"type", "ephemeral"}, {"ttl", "1h"}});
    CHECK_FALSE(messages[1]["content"][0].contains("cache_control"));
    // The tool message's last block keeps the breakpoint after merging with the next user turn.
    CHECK(messages[2]["content"][0]["cache_control"] == ephemeral);
    CHECK_FALSE(messages[2]["content"][1].contains("cache_control"));
    // The adapter's own options are consumed, never sent.
    CHECK_FALSE(body.contains("system_cache_control"));
    CHECK_FALSE(body.contains("tools_cache_control"));

    request.messages[0].metadata["cache_control"] = "ephemeral";
    CHECK(error_code([&] { (void)provider().encode_body(request, false); }) ==
          "invalid_cache_control");
    request.messages[0].metadata = json::object();
    request.provider_options["tools_cache_control"] = true;
    CHECK(error_code([&] { (void)provider().encode_body(request, false); }) ==
          "invalid_cache_control");
}

TEST_CASE("anthropic: images and documents", "[anthropic]") {
    ChatRequest request = basic_request();
    Message& message = request.messages[0];
    message.parts.emplace_back(ImagePart{"", "iVBORw0KGgo=", "image/png"});
    message.parts.emplace_back(ImagePart{"data:image/jpeg;base64,/9j/4AAQ", "", ""});
    message.parts.emplace_back(ImagePart{"https://example.com/cat.webp", "", ""});
    message.parts.emplace_back(DocumentPart{"", "JVBERi0xLjQ=", "application/pdf", "report.pdf"});
    message.parts.emplace_back(DocumentPart{"https://example.com/paper.pdf", "", "", ""});
    message.parts.emplace_back(DocumentPart{"", "aGVsbG8gd29ybGQ=", "text/plain", "notes.txt"});
    const json content = provider().encode_body(request, false)["messages"][0]["content"];
    CHECK(content == json::parse(R"([
      {"type": "text", "text": "Hello"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                   "data": "iVBORw0KGgo="}},
      {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                   "data": "/9j/4AAQ"}},
      {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.webp"}},
      {"type": "document", "title": "report.pdf",
       "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQ="}},
      {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}},
      {"type": "document", "title": "notes.txt",
       "source": {"type": "text", "media_type": "text/plain", "data": "hello world"}}
    ])"));

    ChatRequest docx = basic_request();
    docx.messages[0].parts.emplace_back(DocumentPart{"", "UEsDBA==", "application/msword", ""});
    CHECK(error_code([&] { (void)provider().encode_body(docx, false); }) == "unsupported_option");
    ChatRequest broken = basic_request();
    broken.messages[0].parts.emplace_back(DocumentPart{"", "not base64!", "text/plain", ""});
    CHECK(error_code([&] { (void)provider().encode_body(broken, false); }) == "invalid_document");
    ChatRequest url_encoded = basic_request();
    url_encoded.messages[0].parts.emplace_back(ImagePart{"data:image/png,%89PNG", "", ""});
    CHECK(error_code([&] { (void)provider().encode_body(url_encoded, false); }) ==
          "unsupported_option");
}

TEST_CASE("anthropic: structured output goes to output_config", "[anthropic]") {
    ChatRequest request = basic_request("claude-sonnet-4-5-20250929");
    request.response_format = ullm::ResponseFormat{
        "person", {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}}, true};
    const json body = provider().encode_body(request, false);
    // Anthropic wants `additionalProperties: false` on every object: it is added.
    json sent = request.response_format->schema;
    sent["additionalProperties"] = false;
    CHECK(body["output_config"] == json{{"format", {{"type", "json_schema"}, {"schema", sent}}}});
}

TEST_CASE("anthropic: bounds it refuses travel in the description, nested ones too",
          "[anthropic]") {
    ChatRequest request = basic_request("claude-sonnet-4-5-20250929");
    request.response_format = ullm::ResponseFormat{
        "order",
        {{"type", "object"},
         {"properties",
          {{"lines",
            {{"type", "array"},
             {"minItems", 1},
             {"maxItems", 9},
             {"items",
              {{"type", "object"},
               {"properties",
                {{"sku", {{"type", "string"}, {"maxLength", 12}, {"description", "Code"}}}}}}}}}}},
         {"required", {"lines"}}},
        true};
    const json schema = provider().encode_body(request, false)["output_config"]["format"]["schema"];
    const json lines = schema.at("properties").at("lines");
    CHECK(lines.value("minItems", json()) == 1);  // 0 and 1 are taken
    CHECK_FALSE(lines.contains("maxItems"));
    CHECK(lines.value("description", json()) == R"(({"maxItems":9}))");
    const json sku = lines.at("items").at("properties").at("sku");
    CHECK_FALSE(sku.contains("maxLength"));
    CHECK(sku.value("description", json()) == R"(Code ({"maxLength":12}))");
    CHECK(lines.at("items").value("additionalProperties", json()) == false);
}

namespace {

// A structured-output request to a model without native structured output.
ChatRequest older_model_format_request(std::string model = "claude-3-5-haiku-20241022") {
    ChatRequest request = basic_request(std::move(model));
    request.response_format = ullm::ResponseFormat{
        "ticket",
        {{"type", "object"},
         {"properties", {{"title", {{"type", "string"}}}, {"priority", {{"type", "integer"}}}}},
         {"required", {"title", "priority"}}},
        true};
    return request;
}

json result_tool_body(const json& content, const std::string& stop_reason = "tool_use") {
    return {{"id", "msg_result"},
            {"type", "message"},
            {"role", "assistant"},
            {"model", "claude-3-5-haiku-20241022"},
            {"content", content},
            {"stop_reason", stop_reason},
            {"usage", {{"input_tokens", 30}, {"output_tokens", 12}}}};
}

json result_call(const json& input, const std::string& id = "toolu_r") {
    return {{"type", "tool_use"}, {"id", id}, {"name", "ticket"}, {"input", input}};
}

}  // namespace

TEST_CASE("anthropic: before 4.5, structured output is a forced tool named after the format",
          "[anthropic][structured]") {
    ChatRequest request = older_model_format_request();
    ullm::check_request(request, provider());
    json body = provider().encode_body(request, false);
    CHECK_FALSE(body.contains("output_config"));
    REQUIRE(body.at("tools").size() == 1);
    const json& tool = body["tools"][0];
    CHECK(tool.at("name") == "ticket");
    CHECK(tool.at("input_schema").at("properties") ==
          request.response_format->schema.at("properties"));
    CHECK(tool.at("input_schema").at("additionalProperties") == false);
    CHECK(body.at("tool_choice") == json{{"type", "tool"}, {"name", "ticket"}});

    // With the caller's tools, the model must call one of them or answer through the result.
    request.tools = {weather_tool()};
    body = provider().encode_body(request, false);
    REQUIRE(body.at("tools").size() == 2);
    CHECK(body["tools"][0].at("name") == "lookup_weather");
    CHECK(body["tools"][1].at("name") == "ticket");
    CHECK(body.at("tool_choice") == json{{"type", "any"}});
    request.tool_choice = ToolChoice::tool("lookup_weather");
    CHECK(provider().encode_body(request, false).at("tool_choice") ==
          json{{"type", "tool"}, {"name", "lookup_weather"}});
    request.tool_choice = ToolChoice::none();
    CHECK(provider().encode_body(request, false).at("tool_choice") == json{{"type", "none"}});

    // Extended thinking takes no forced tool: the choice is left to the model.
    request = older_model_format_request("claude-3-7-sonnet-20250219");
    request.provider_options = {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
    CHECK(provider().encode_body(request, false).at("tool_choice") == json{{"type", "auto"}});

    // A tool of the request named like the format is refused.
    request = older_model_format_request();
    request.tools = {ToolSpec{"ticket", "Files a ticket", json{{"type", "object"}}}};
    CHECK(error_code([&] { (void)provider().encode_body(request, false); }) ==
          "invalid_response_format");

    // From 4.5 (and for ids it does not know) the native form is used.
    for (const char* model : {"claude-sonnet-4-5", "claude-opus-4-1-20250805", "my-proxy"}) {
        request = older_model_format_request(model);
        body = provider().encode_body(request, false);
        CHECK(body.contains("output_config"));
        CHECK_FALSE(body.contains("tools"));
    }
}

TEST_CASE("anthropic: the result tool's call comes back as the reply text",
          "[anthropic][structured]") {
    const ChatRequest request = older_model_format_request();
    const json input = {{"title", "Login fails"}, {"priority", 2}};
    ChatResponse response =
        decode_body(result_tool_body(json::array({result_call(input)})), request);
    CHECK(json::parse(response.text) == input);
    CHECK(response.tool_calls.empty());
    CHECK(response.message.tool_calls().empty());
    CHECK(response.finish_reason == ullm::FinishReason::stop);
    CHECK(response.raw_finish_reason == "tool_use");
    CHECK_FALSE(response.message.replay);

    // Text beside it is not the answer; a second call is not either.
    response = decode_body(
        result_tool_body({{{"type", "text"}, {"text", "Here it is:"}},
                          result_call(input),
                          result_call({{"title", "other"}, {"priority", 1}}, "toolu_s")}),
        request);
    CHECK(json::parse(response.text) == input);

    // Beside a call of the caller's tool, that call still has to run.
    response = decode_body(result_tool_body({{{"type", "tool_use"},
                                              {"id", "toolu_w"},
                                              {"name", "lookup_weather"},
                                              {"input", {{"city", "Oslo"}}}},
                                             result_call(input)}),
                           request);
    CHECK(response.finish_reason == ullm::FinishReason::tool_call);
    REQUIRE(response.tool_calls.size() == 1);
    CHECK(response.tool_calls[0].name == "lookup_weather");

    // With thinking, the replayed turn carries the answer as text, not an unanswered call.
    response = decode_body(
        result_tool_body(
            {{{"type", "thinking"}, {"thinking", "A ticket."}, {"signature", thinking_signature}},
             {{"type", "text"}, {"text", "Here it is:"}},
             result_call(input)}),
        request);
    REQUIRE(response.message.replay);
    const json& replayed = response.message.replay->data.at("content");
    REQUIRE(replayed.size() == 2);  // the text beside the answer is neither shown nor replayed
    CHECK(json::parse(response.text) == input);
    CHECK(replayed[1].at("type") == "text");
    CHECK(json::parse(replayed[1].at("text").get<std::string>()) == input);

    // Without the format, a tool named so is an ordinary call.
    response = decode_body(result_tool_body(json::array({result_call(input)})),
                           basic_request("claude-3-5-haiku-20241022"));
    CHECK(response.text.empty());
    REQUIRE(response.tool_calls.size() == 1);
    CHECK(response.tool_calls[0].name == "ticket");
}

TEST_CASE("anthropic stream: the result tool's input streams as text, split anywhere",
          "[anthropic][stream][structured]") {
    const ChatRequest request = older_model_format_request();
    const std::string wire =
        message_start("msg_result", "claude-3-5-haiku-20241022") +
        block_start(0, {{"type", "tool_use"},
                        {"id", "toolu_r"},
                        {"name", "ticket"},
                        {"input", json::object()}}) +
        block_delta(0, {{"type", "input_json_delta"}, {"partial_json", "{\"title\": \"Log"}}) +
        block_delta(0, {{"type", "input_json_delta"}, {"partial_json", "in fails\", "}}) +
        block_delta(0, {{"type", "input_json_delta"}, {"partial_json", "\"priority\": 2}"}}) +
        block_stop(0) + message_end("tool_use", 12);
    for (std::size_t chunk = 1; chunk <= wire.size(); chunk += (chunk < 40 ? 1 : 97)) {
        const Streamed streamed = run_stream(wire, request, chunk);
        std::string text;
        for (const auto& event : streamed.events) {
            CHECK(event.type != StreamEvent::Type::tool_call_start);
            CHECK(event.type != StreamEvent::Type::tool_call_end);
            if (event.type == StreamEvent::Type::text_delta) text += event.delta;
        }
        CHECK(text == R"({"title": "Login fails", "priority": 2})");
        CHECK(streamed.response.text == text);
        CHECK(streamed.response.tool_calls.empty());
        CHECK(streamed.response.finish_reason == ullm::FinishReason::stop);
    }
    // A call that arrives whole in its start streams its input at the stop.
    const std::string whole = message_start("msg_result", "claude-3-5-haiku-20241022") +
                              block_start(0, {{"type", "tool_use"},
                                              {"id", "toolu_r"},
                                              {"name", "ticket"},
                                              {"input", {{"title", "x"}, {"priority", 1}}}}) +
                              block_stop(0) + message_end("tool_use", 3);
    const Streamed streamed = run_stream(whole, request);
    CHECK(json::parse(streamed.response.text) == json{{"title", "x"}, {"priority", 1}});
}

TEST_CASE("anthropic: capabilities follow the model generation", "[anthropic]") {
    const auto caps = [](std::string_view model) { return provider().capabilities(model); };
    CHECK_FALSE(caps("claude-3-haiku-20240307").reasoning);
    CHECK_FALSE(caps("claude-3-haiku-20240307").documents);
    CHECK(caps("claude-3-haiku-20240307").images);
    CHECK(caps("claude-3-5-sonnet-20241022").documents);
    CHECK_FALSE(caps("claude-3-5-sonnet-20241022").reasoning);
    CHECK(caps("claude-3-7-sonnet-latest").reasoning);
    // Native from Opus 4.1 and 4.5, through a forced tool before: every generation has it.
    CHECK(caps("claude-3-7-sonnet-latest").structured_output);
    CHECK(caps("claude-sonnet-4-20250514").reasoning);
    CHECK(caps("claude-sonnet-4-20250514").structured_output);
    CHECK(caps("claude-opus-4-1-20250805").structured_output);
    CHECK(caps("claude-haiku-4-5-20251001").structured_output);
    CHECK(caps("claude-opus-4-6").temperature);
    CHECK_FALSE(caps("claude-opus-4-7").temperature);
    CHECK_FALSE(caps("claude-opus-4-7").top_p);
    CHECK_FALSE(caps("claude-sonnet-5").temperature);
    CHECK(caps("us.anthropic.claude-3-5-sonnet-20241022-v2:0").documents);
    CHECK_FALSE(caps("us.anthropic.claude-3-5-sonnet-20241022-v2:0").reasoning);
    CHECK(caps("claude-3-5-sonnet-v2@20241022").documents);
    CHECK_FALSE(caps("claude-2.1").images);
    // Ids that are not recognisable Claude ids: the server decides.
    const auto unknown = caps("my-proxy-model");
    CHECK(unknown.reasoning);
    CHECK(unknown.documents);
    CHECK(unknown.structured_output);
    CHECK(unknown.temperature);
}

TEST_CASE("anthropic: unsupported options are refused, never dropped", "[anthropic]") {
    const auto code = [](ChatRequest request) {
        return error_code([&] {
            ullm::check_request(request, provider());
            (void)provider().encode_body(request, false);
        });
    };
    ChatRequest request = basic_request("claude-3-5-sonnet-20241022");
    request.response_format = ullm::ResponseFormat{};  // {} is no object schema
    CHECK(code(request) == "unsupported_schema_keyword");

    request = basic_request("claude-opus-4-7");
    request.temperature = 0.5;
    CHECK(code(request) == "unsupported_option");
    request.temperature.reset();
    request.top_p = 0.9;
    CHECK(code(request) == "unsupported_option");

    request = basic_request("claude-sonnet-4-5");
    request.temperature = 0.5;
    request.top_p = 0.9;
    CHECK(code(request) == "unsupported_option");
    request.model = "claude-3-5-sonnet-20241022";
    CHECK(code(request) == "ok");

    request = basic_request("claude-3-opus-20240229");
    request.messages[0].parts.emplace_back(DocumentPart{"https://example.com/a.pdf", "", "", ""});
    CHECK(code(request) == "unsupported_option");

    request = basic_request("claude-2.1");
    request.messages[0].parts.emplace_back(ImagePart{"https://example.com/a.png", "", ""});
    CHECK(code(request) == "unsupported_option");

    request = basic_request("claude-3-5-sonnet-20241022");
    request.provider_options = {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
    CHECK(code(request) == "unsupported_option");

    request = basic_request("claude-sonnet-4-5");
    request.tools = {weather_tool()};
    request.tool_choice = ToolChoice::required();
    request.provider_options = {{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}};
    CHECK(code(request) == "unsupported_option");
    request.tool_choice = ToolChoice::automatic();
    CHECK(code(request) == "ok");

    request = basic_request();
    request.max_tokens = 0;
    CHECK(code(request) == "invalid_max_tokens");
    request = basic_request("");
    CHECK(code(request) == "invalid_model");
    request = basic_request();
    request.tools = {ToolSpec{"bad name!", "d", json{{"type", "object"}}}};
    CHECK(code(request) == "invalid_tool_name");
    request = basic_request();
    request.provider_options = json::array();
    CHECK(code(request) == "invalid_provider_options");
}

// ---------------------------------------------------------------------------------------------
// Replay state

TEST_CASE("anthropic: thinking blocks are replayed unmodified and in place to the same model",
          "[anthropic][replay]") {
    const json body = thinking_tool_body();
    const ChatResponse response = decode_body(body);
    CHECK(response.reasoning_text == "The user wants the weather.");
    CHECK(response.text == "Let me check.");
    REQUIRE(response.tool_calls.size() == 1);
    CHECK(response.tool_calls[0].arguments == json{{"city", "Berlin"}});
    REQUIRE(response.message.replay.has_value());
    CHECK(response.message.replay->provider == "anthropic");
    CHECK(response.message.replay->model == "claude-sonnet-4-5");
    // The canonical parts show the visible thinking only; redacted thinking shows nothing.
    REQUIRE(response.message.parts.size() == 3);
    CHECK(std::holds_alternative<ullm::ReasoningPart>(response.message.parts[0]));

    SECTION("same provider and model: the original blocks, byte for byte") {
        const json sent = provider().encode_body(next_round(response.message), false);
        const json& assistant = sent["messages"][1];
        CHECK(assistant["role"] == "assistant");
        CHECK(assistant["content"] == body["content"]);
        CHECK(assistant["content"][0]["signature"].get<std::string>() == thinking_signature);
        CHECK(assistant["content"][1]["data"] == "opaque==");
        CHECK(sent["messages"][2]["content"][0]["tool_use_id"] == "toolu_1");
    }
    SECTION("after a snapshot round trip") {
        const Message restored = ullm::parse_message(ullm::message_to_json(response.message));
        const json sent = provider().encode_body(next_round(restored), false);
        CHECK(sent["messages"][1]["content"] == body["content"]);
    }
    SECTION("another model: only the canonical text and tool calls") {
        const json sent =
            provider().encode_body(next_round(response.message, "claude-opus-4-5"), false);
        CHECK(sent["messages"][1]["content"] == json::parse(R"([
          {"type": "text", "text": "Let me check."},
          {"type": "tool_use", "id": "toolu_1", "name": "lookup_weather",
           "input": {"city": "Berlin"}}])"));
    }
    SECTION("another provider name: the replay is not ours") {
        const AnthropicProvider other(AnthropicOptions{.provider_name = "anthropic-proxy"});
        const json sent = other.encode_body(next_round(response.message), false);
        CHECK(sent["messages"][1]["content"].size() == 2);
    }
    SECTION("an edited message no longer matches its replay") {
        Message edited = response.message;
        std::get<TextPart>(edited.parts[1]).text = "Let me look that up.";
        const json sent = provider().encode_body(next_round(edited), false);
        CHECK(sent["messages"][1]["content"][0] ==
              json{{"type", "text"}, {"text", "Let me look that up."}});
        CHECK(sent["messages"][1]["content"].size() == 2);
    }
    SECTION("the stream gives the same message and replay") {
        const Streamed streamed = run_stream(thinking_tool_stream());
        CHECK(streamed.response.message == response.message);
        CHECK(streamed.response.usage == response.usage);
        const json sent = provider().encode_body(next_round(streamed.response.message), false);
        CHECK(sent["messages"][1]["content"] == body["content"]);
    }
}

TEST_CASE("anthropic: a plain reply carries no replay state", "[anthropic][replay]") {
    const ChatResponse response =
        decode_body({{"id", "msg_1"},
                     {"type", "message"},
                     {"model", "claude-sonnet-4-5"},
                     {"content", {{{"type", "text"}, {"text", "Hi"}}}},
                     {"stop_reason", "end_turn"},
                     {"usage", {{"input_tokens", 3}, {"output_tokens", 1}}}});
    CHECK_FALSE(response.message.replay.has_value());
    CHECK(response.usage == ullm::Usage{3, 1, 0, 0, 0, std::nullopt});
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST_CASE("anthropic: error responses map to the error hierarchy", "[anthropic][errors]") {
    const ChatRequest request = basic_request("claude-sonnet-4-5");
    const auto error_body = [](std::string type, std::string message) {
        return json{{"type", "error"},
                    {"error", {{"type", std::move(type)}, {"message", std::move(message)}}},
                    {"request_id", "req_body"}};
    };
    SECTION("529 overloaded") {
        try {
            (void)provider().decode(
                error_response(529, error_body("overloaded_error", "Overloaded")), request);
            FAIL("no error");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "provider_overloaded");
            CHECK(error.status() == 529);
            CHECK(error.retryable());
            CHECK(error.request_id() == "req_body");
            CHECK(error.provider() == "anthropic");
            CHECK(error.model() == "claude-sonnet-4-5");
        }
    }
    SECTION("429 with Retry-After") {
        try {
            (void)provider().decode(
                error_response(429, error_body("rate_limit_error", "Number of requests exceeded"),
                               {{"retry-after", "7"}, {"request-id", "req_header"}}),
                request);
            FAIL("no error");
        } catch (const ullm::RateLimitError& error) {
            CHECK(error.retry_after() == std::chrono::milliseconds(7000));
            CHECK(error.request_id() == "req_header");
        }
    }
    SECTION("503 and 529 carry Retry-After too") {
        for (const int status : {503, 529}) {
            try {
                (void)provider().decode(error_response(status, error_body("api_error", "Try later"),
                                                       {{"retry-after-ms", "2500"}}),
                                        request);
                FAIL("no error");
            } catch (const ullm::ProviderError& error) {
                CHECK(error.retryable());
                CHECK(error.retry_after() == std::chrono::milliseconds(2500));
            }
        }
    }
    SECTION("401 authentication, never leaking the key") {
        try {
            (void)provider().decode(
                error_response(401, error_body("authentication_error",
                                               "invalid x-api-key sk-ant-api03-abcdefghijklmnop")),
                request);
            FAIL("no error");
        } catch (const ullm::AuthenticationError& error) {
            CHECK(error.code() == "authentication_failed");
            CHECK(std::string(error.what()).find("abcdefghijklmnop") == std::string::npos);
        }
    }
    SECTION("400 prompt is too long") {
        CHECK(error_code([&] {
                  (void)provider().decode(
                      error_response(400, error_body("invalid_request_error",
                                                     "prompt is too long: 208310 tokens > 200000 "
                                                     "maximum")),
                      request);
              }) == "context_length_exceeded");
        CHECK(error_code([&] {
                  (void)provider().decode(
                      error_response(400, error_body("invalid_request_error", "messages: bad")),
                      request);
              }) == "invalid_request");
    }
    SECTION("5xx and bodies that are not JSON") {
        CHECK(error_code([&] {
                  (void)provider().decode(error_response(500, error_body("api_error", "Internal")),
                                          request);
              }) == "provider_error");
        HttpResponse html;
        html.status = 502;
        html.body = "<html>Bad gateway</html>";
        CHECK(error_code([&] { (void)provider().decode(html, request); }) == "provider_error");
    }
    SECTION("2xx bodies that are not messages") {
        HttpResponse response;
        response.status = 200;
        response.body = "{\"type\": \"message\", \"content\": [";
        CHECK(error_code([&] { (void)provider().decode(response, request); }) ==
              "invalid_provider_response");
        for (const json& body :
             {json{{"type", "message"}, {"content", "text"}}, json{{"type", "completion"}},
              json{{"type", "message"}, {"content", {42}}},
              json{{"type", "message"}, {"content", {{{"text", "no type"}}}}},
              json{{"type", "message"}, {"content", {{{"type", "tool_use"}, {"input", {}}}}}},
              json::array()}) {
            INFO(body.dump());
            CHECK(error_code([&] { (void)decode_body(body); }) == "invalid_provider_response");
        }
        CHECK(error_code([&] {
                  (void)decode_body(error_body("overloaded_error", "Overloaded"));
              }) == "provider_overloaded");
    }
}

// ---------------------------------------------------------------------------------------------
// Streams

TEST_CASE("anthropic stream: events, usage and the single done", "[anthropic][stream]") {
    const Streamed streamed = run_stream(thinking_tool_stream());
    CHECK(streamed.visible);
    std::vector<std::string> kinds;
    for (const auto& event : streamed.events) kinds.emplace_back(ullm::to_string(event.type));
    CHECK(kinds == std::vector<std::string>{"usage-update", "reasoning-delta", "reasoning-delta",
                                            "text-delta", "tool-call-start", "tool-call-delta",
                                            "tool-call-delta", "tool-call-end", "usage-update",
                                            "done"});
    CHECK(streamed.events[0].usage == ullm::Usage{135, 1, 100, 10, 0, std::nullopt});
    CHECK(streamed.events[4].tool_call_id == "toolu_1");
    CHECK(streamed.events[4].tool_name == "lookup_weather");
    REQUIRE(streamed.events[7].tool_call.has_value());
    CHECK(streamed.events[7].tool_call->arguments == json{{"city", "Berlin"}});
    for (const auto& event : streamed.events) {
        CHECK(event.delta.find("signature") == std::string::npos);
        CHECK(event.delta.find("opaque") == std::string::npos);
    }
    const ChatResponse& response = streamed.response;
    CHECK(response.finish_reason == FinishReason::tool_call);
    CHECK(response.usage == ullm::Usage{135, 42, 100, 10, 0, std::nullopt});
    CHECK(response.request_id == "msg_test");
    CHECK(response.model == "claude-sonnet-4-5");

    SECTION("every chunk size gives the same events") {
        const std::string wire = thinking_tool_stream();
        for (std::size_t chunk = 1; chunk <= wire.size(); chunk += chunk < 64 ? 1 : 37) {
            const Streamed split = run_stream(wire, basic_request(), chunk);
            REQUIRE(split.events.size() == streamed.events.size());
            CHECK(split.response.message == response.message);
        }
    }
}

TEST_CASE("anthropic stream: a mid-stream error event throws the mapped error",
          "[anthropic][stream]") {
    const std::string overloaded =
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"details\":null,\"type\":"
        "\"overloaded_error\",\"message\":\"Overloaded\"},\"request_id\":\"req_mid\"}\n\n";
    SECTION("after visible text") {
        auto decoder = provider().stream_decoder(basic_request());
        std::vector<StreamEvent> events;
        decoder->feed(message_start() + block_start(0, {{"type", "text"}, {"text", ""}}) +
                          block_delta(0, {{"type", "text_delta"}, {"text", "Hel"}}),
                      events);
        CHECK(decoder->produced_visible_event());
        try {
            decoder->feed(overloaded, events);
            FAIL("no error");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "provider_overloaded");
            CHECK(error.status() == 529);
            CHECK(error.retryable());
            CHECK(error.request_id() == "req_mid");
        }
    }
    SECTION("before anything visible, so the stream may be retried") {
        auto decoder = provider().stream_decoder(basic_request());
        std::vector<StreamEvent> events;
        decoder->feed(message_start(), events);
        CHECK_FALSE(decoder->produced_visible_event());  // usage updates are not visible
        CHECK(error_code([&] { decoder->feed(overloaded, events); }) == "provider_overloaded");
    }
    SECTION("other error types") {
        const auto code_of = [](std::string type) {
            auto decoder = provider().stream_decoder(basic_request());
            std::vector<StreamEvent> events;
            return error_code([&] {
                decoder->feed(message_start() +
                                  sse({{"type", "error"},
                                       {"error", {{"type", std::move(type)}, {"message", "m"}}}}),
                              events);
            });
        };
        CHECK(code_of("rate_limit_error") == "rate_limited");
        CHECK(code_of("api_error") == "provider_error");
        CHECK(code_of("invalid_request_error") == "invalid_request");
    }
}

TEST_CASE("anthropic stream: truncated and malformed streams", "[anthropic][stream]") {
    const auto code_of = [](const std::string& wire) {
        auto decoder = provider().stream_decoder(basic_request());
        std::vector<StreamEvent> events;
        return error_code([&] {
            decoder->feed(wire, events);
            decoder->finish(events);
        });
    };
    const std::string text_start =
        message_start() + block_start(0, {{"type", "text"}, {"text", ""}});
    CHECK(code_of("") == "stream_truncated");
    CHECK(code_of(text_start) == "stream_truncated");
    CHECK(code_of(text_start + "event: message_stop\ndata: {\"type\":\"message_st") ==
          "stream_truncated");
    CHECK(code_of(text_start + message_end("end_turn", 2).substr(0, 40)) == "stream_truncated");
    CHECK(code_of(text_start + "data: {not json}\n\n") == "invalid_provider_response");
    CHECK(code_of(message_start() + block_delta(3, {{"type", "text_delta"}, {"text", "x"}})) ==
          "invalid_provider_response");
    CHECK(code_of(text_start +
                  block_delta(0, {{"type", "input_json_delta"}, {"partial_json", "{"}})) ==
          "invalid_provider_response");
    CHECK(code_of(text_start + block_start(0, {{"type", "text"}, {"text", ""}})) ==
          "invalid_provider_response");
    CHECK(code_of(text_start + block_stop(0) +
                  block_delta(0, {{"type", "text_delta"}, {"text", "late"}})) ==
          "invalid_provider_response");
    CHECK(code_of(message_start() + block_start(0, {{"type", "tool_use"}, {"input", {}}})) ==
          "invalid_provider_response");
    CHECK(code_of(text_start + sse({{"type", "content_block_delta"}, {"delta", {}}})) ==
          "invalid_provider_response");
    CHECK(code_of(message_start("msg_a") + message_start("msg_b")) == "stream_truncated");
    CHECK(code_of(text_start + message_end("end_turn", 2)) == "ok");
}

TEST_CASE("anthropic stream: unknown events and deltas are ignored, blocks kept for replay",
          "[anthropic][stream]") {
    const std::string wire =
        message_start() + sse({{"type", "ping"}}) +
        block_start(0, {{"type", "server_tool_use"},
                        {"id", "srvtoolu_1"},
                        {"name", "web_search"},
                        {"input", json::object()}}) +
        block_delta(0, {{"type", "input_json_delta"}, {"partial_json", "{\"query\":\"x\"}"}}) +
        block_stop(0) +
        block_start(1, {{"type", "web_search_tool_result"},
                        {"tool_use_id", "srvtoolu_1"},
                        {"content", json::array()}}) +
        block_stop(1) +
        block_start(2, {{"type", "text"}, {"text", ""}, {"citations", json::array()}}) +
        block_delta(2,
                    {{"type", "citations_delta"}, {"citation", {{"url", "https://a.example"}}}}) +
        block_delta(2, {{"type", "text_delta"}, {"text", "Found it."}}) +
        block_delta(2, {{"type", "sparkle_delta"}, {"sparkle", true}}) + block_stop(2) +
        sse({{"type", "brand_new_event"}}) + message_end("end_turn", 9);
    const Streamed streamed = run_stream(wire);
    CHECK(streamed.response.text == "Found it.");
    CHECK(streamed.response.tool_calls.empty());
    CHECK(streamed.response.finish_reason == FinishReason::stop);
    REQUIRE(streamed.response.message.replay.has_value());
    const json& blocks = streamed.response.message.replay->data["content"];
    CHECK(blocks[0]["input"] == json{{"query", "x"}});
    CHECK(blocks[2]["citations"] == json::parse(R"([{"url": "https://a.example"}])"));
    for (const auto& event : streamed.events) {
        CHECK(event.type != StreamEvent::Type::tool_call_start);
    }
}

TEST_CASE("anthropic stream: arguments that are not a JSON object stay verbatim",
          "[anthropic][stream]") {
    const std::string wire =
        message_start() +
        block_start(0, {{"type", "tool_use"},
                        {"id", "toolu_x"},
                        {"name", "lookup_weather"},
                        {"input", json::object()}}) +
        block_delta(0, {{"type", "input_json_delta"}, {"partial_json", "{\"city\": Ber"}}) +
        block_stop(0) + message_end("tool_use", 5);
    const Streamed streamed = run_stream(wire);
    REQUIRE(streamed.response.tool_calls.size() == 1);
    CHECK(streamed.response.tool_calls[0].arguments == json("{\"city\": Ber"));
    CHECK(streamed.response.finish_reason == FinishReason::tool_call);
    // Sent back, such a call has an empty input: the API accepts only objects.
    ChatRequest next = next_round(streamed.response.message);
    next.messages[2] = Message::tool_results(
        {{"toolu_x", "lookup_weather", json("arguments are not valid JSON"), true}});
    const json sent = provider().encode_body(next, false);
    CHECK(sent["messages"][1]["content"][0]["input"] == json::object());
}

TEST_CASE("anthropic stream: a refusal with no content", "[anthropic][stream]") {
    const std::string wire =
        message_start() +
        sse({{"type", "message_delta"},
             {"delta",
              {{"stop_reason", "refusal"},
               {"stop_details", {{"type", "refusal"}, {"explanation", "Blocked by policy."}}}}},
             {"usage", {{"output_tokens", 3}}}}) +
        sse({{"type", "message_stop"}});
    const Streamed streamed = run_stream(wire);
    CHECK(streamed.response.finish_reason == FinishReason::content_filter);
    CHECK(streamed.response.refusal == "Blocked by policy.");
    CHECK(streamed.response.text.empty());
}

TEST_CASE("anthropic stream: a start that repeats a finished block's index opens the next one",
          "[anthropic][stream]") {
    // As recorded from the API with code execution skills.
    const std::string wire =
        message_start() +
        block_start(0, {{"type", "server_tool_use"},
                        {"id", "srvtoolu_1"},
                        {"name", "bash_code_execution"},
                        {"input", json::object()}}) +
        block_stop(0) +
        block_start(1, {{"type", "bash_code_execution_tool_result"},
                        {"tool_use_id", "srvtoolu_1"},
                        {"content", {{"type", "bash_code_execution_result"}}}}) +
        block_stop(1) + block_start(1, {{"type", "text"}, {"text", ""}}) +
        block_delta(2, {{"type", "text_delta"}, {"text", "Done."}}) + block_stop(2) +
        message_end("end_turn", 4);
    const Streamed streamed = run_stream(wire);
    CHECK(streamed.response.text == "Done.");
    REQUIRE(streamed.response.message.replay.has_value());
    const json& blocks = streamed.response.message.replay->data["content"];
    REQUIRE(blocks.size() == 3);
    CHECK(blocks[1]["type"] == "bash_code_execution_tool_result");
    CHECK(blocks[2] == json{{"type", "text"}, {"text", "Done."}});
}

}  // namespace anthropic_test
