#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <algorithm>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/fixtures.hpp"
#include "support/openapi_checker.hpp"

namespace openai_chat_test {

using ullm::json;
namespace fs = std::filesystem;

using ullm::test::error_code_of;

namespace {

ullm::ChatRequest request_for(std::string model = "gpt-4o") {
    ullm::ChatRequest request;
    request.model = std::move(model);
    return request;
}

ullm::HttpResponse body_response(std::string body, int status = 200) {
    ullm::HttpResponse response;
    response.status = status;
    response.body = std::move(body);
    return response;
}

std::string wire_of(const fs::path& path) {
    const std::string text = ullm::test::read_file(path);
    if (path.extension() != ".txt" || ullm::test::looks_like_sse_wire(text)) return text;
    return ullm::test::frame_chunks_as_sse(text, ullm::test::Framing::chat_completions);
}

struct Decoded {
    std::vector<ullm::StreamEvent> events;
    ullm::ChatResponse response;
};

Decoded decode_stream(const ullm::Provider& provider, std::string_view wire, std::size_t chunk,
                      const std::string& model = "gpt-4o") {
    auto decoder = provider.stream_decoder(request_for(model));
    Decoded out;
    for (std::size_t at = 0; at < wire.size(); at += chunk) {
        decoder->feed(wire.substr(at, chunk), out.events);
    }
    decoder->finish(out.events);
    const auto done = std::count_if(out.events.begin(), out.events.end(), [](const auto& event) {
        return event.type == ullm::StreamEvent::Type::done;
    });
    REQUIRE(done == 1);
    REQUIRE(out.events.back().type == ullm::StreamEvent::Type::done);
    out.response = *out.events.back().response;
    return out;
}

std::string joined(const std::vector<ullm::StreamEvent>& events, ullm::StreamEvent::Type type) {
    std::string out;
    for (const auto& event : events) {
        if (event.type == type) out += event.delta;
    }
    return out;
}

fs::path fixture(const std::string& relative) {
    return ullm::test::fixtures_dir() / relative;
}

struct Expected {
    std::string file;
    std::string provider = "openai";
    std::string text;  // exact text, or a prefix when `text_prefix` is set
    bool text_prefix = false;
    std::vector<std::pair<std::string, json>> tool_calls;
    ullm::FinishReason finish = ullm::FinishReason::stop;
    std::int64_t input = 0;
    std::int64_t output = 0;
    std::int64_t cached = 0;
    std::int64_t reasoning = 0;
    bool has_reasoning_text = false;
};

void check(const ullm::ChatResponse& response, const Expected& expected) {
    INFO(expected.file);
    if (expected.text_prefix) {
        CHECK(response.text.rfind(expected.text, 0) == 0);
    } else {
        CHECK(response.text == expected.text);
    }
    REQUIRE(response.tool_calls.size() == expected.tool_calls.size());
    for (std::size_t i = 0; i < expected.tool_calls.size(); ++i) {
        CHECK(response.tool_calls[i].name == expected.tool_calls[i].first);
        CHECK(response.tool_calls[i].arguments == expected.tool_calls[i].second);
        CHECK_FALSE(response.tool_calls[i].id.empty());
    }
    CHECK(response.finish_reason == expected.finish);
    CHECK(response.usage.input_tokens == expected.input);
    CHECK(response.usage.output_tokens == expected.output);
    CHECK(response.usage.cached_read_tokens == expected.cached);
    CHECK(response.usage.reasoning_tokens == expected.reasoning);
    CHECK(response.reasoning_text.empty() == !expected.has_reasoning_text);
    CHECK(response.provider == expected.provider);
}

const json sf = {{"location", "San Francisco"}};

}  // namespace

TEST_CASE("curated Chat Completions bodies decode exactly", "[openai_chat][conformance]") {
    const std::vector<Expected> cases = {
        {"openai-chat/openai-text.json",
         "openai",
         "**Holiday Name:** Galaxy Day",
         true,
         {},
         ullm::FinishReason::stop,
         16,
         363,
         0,
         0},
        {"openai-chat/issue-8132-long-tool-call-id.json",
         "openai",
         "OpenAI API Documentation",
         false,
         {},
         ullm::FinishReason::stop,
         72,
         4,
         0,
         0},
        {"openai-chat/qwen-plus-normalized-replayed-tool-arguments-success.json",
         "qwen",
         "",
         false,
         {{"set_cell_range", {{"label", "A1"}}}},
         ullm::FinishReason::tool_call,
         203,
         21},
        {"openai-compatible/alibaba-tool-call.json",
         "qwen",
         "",
         false,
         {{"weather", sf}},
         ullm::FinishReason::tool_call,
         295,
         22},
        {"openai-compatible/alibaba-reasoning.json",
         "qwen",
         "The word **\"strawberry\"**",
         true,
         {},
         ullm::FinishReason::stop,
         24,
         1668,
         0,
         1353,
         true},
        {"openai-compatible/deepseek-reasoning.json",
         "deepseek",
         "There are **3** \xE2\x80\x9Cr\xE2\x80\x9Ds in **\xE2\x80\x9Cstrawberry\xE2\x80\x9D**.",
         false,
         {},
         ullm::FinishReason::stop,
         97,
         131,
         0,
         113,
         true},
        {"openai-compatible/deepseek-tool-call.json",
         "deepseek",
         "",
         false,
         {{"weather", sf}},
         ullm::FinishReason::tool_call,
         374,
         60,
         0,
         16,
         true},
        {"openai-compatible/groq-json-tool-call.json",
         "groq",
         "",
         false,
         {{"json", {{"value", "Sparkle Day"}}}},
         ullm::FinishReason::tool_call,
         45,
         20},
        {"openai-compatible/groq-reasoning.json",
         "groq",
         "The word \"strawberry\" contains **3**",
         true,
         {},
         ullm::FinishReason::stop,
         17,
         649,
         0,
         570,
         true},
        {"openai-compatible/groq-tool-call.json",
         "groq",
         "",
         false,
         {{"weather", json::object()}},
         ullm::FinishReason::tool_call,
         218,
         15},
        {"openai-compatible/moonshotai-text.json",
         "moonshot",
         "Hello, world!",
         false,
         {},
         ullm::FinishReason::stop,
         9,
         5},
        {"openai-compatible/moonshotai-tool-call.json",
         "moonshot",
         "",
         false,
         {{"get_weather", {{"city", "Paris"}}}},
         ullm::FinishReason::tool_call,
         30,
         12},
        {"openai-compatible/moonshotai-reasoning.json",
         "moonshot",
         "There are three.",
         false,
         {},
         ullm::FinishReason::stop,
         20,
         30,
         10,
         22,
         true},
        // xAI counts reasoning outside completion_tokens; canonical output includes it.
        {"openai-compatible/xai-tool-call.json",
         "xai",
         "",
         false,
         {{"weather", sf}},
         ullm::FinishReason::tool_call,
         307,
         26 + 255,
         244,
         255,
         true},
        {"openai-compatible/xai__xai-text.json",
         "xai",
         "Hello",
         false,
         {},
         ullm::FinishReason::stop,
         12,
         1 + 228,
         2,
         228,
         true},
        {"openai-compatible/deepseek-json.json",
         "deepseek",
         "{\"location\":\"San Francisco\"",
         true,
         {},
         ullm::FinishReason::stop,
         483,
         16},
    };
    for (const auto& expected : cases) {
        const ullm::OpenAiChatProvider provider({.provider_name = expected.provider});
        const auto body = ullm::test::read_file(fixture(expected.file));
        check(provider.decode(body_response(body), request_for()), expected);
    }
}

TEST_CASE("Mistral's array content splits into reasoning and text", "[openai_chat][conformance]") {
    const ullm::OpenAiChatProvider provider({.provider_name = "mistral"});
    const auto body =
        ullm::test::read_file(fixture("openai-compatible/issue-13703-mistral-thinking.json"));
    const auto response = provider.decode(body_response(body), request_for());
    CHECK_FALSE(response.reasoning_text.empty());
    CHECK_FALSE(response.text.empty());
    CHECK(response.text.find("thinking") == std::string::npos);
    const auto streamed = decode_stream(
        provider, wire_of(fixture("openai-compatible/issue-13703-mistral-thinking.chunks.txt")),
        64);
    CHECK(streamed.response.text == "391");
    CHECK_FALSE(streamed.response.reasoning_text.empty());
}

TEST_CASE("curated Chat Completions streams decode exactly", "[openai_chat][conformance]") {
    const std::vector<Expected> cases = {
        {"openai-chat/openai-text.chunks.txt",
         "openai",
         "**Holiday Name:** Harmony Day",
         true,
         {},
         ullm::FinishReason::stop,
         16,
         300,
         0,
         0},
        {"openai-chat/azure-model-router.1.chunks.txt",
         "azure",
         "Capital of Denmark.",
         false,
         {},
         ullm::FinishReason::stop,
         15,
         78,
         0,
         64},
        {"openai-compatible/alibaba-tool-call.chunks.txt",
         "qwen",
         "",
         false,
         {{"weather", sf}},
         ullm::FinishReason::tool_call,
         295,
         22},
        {"openai-compatible/deepseek-reasoning.chunks.txt",
         "deepseek",
         "There are **3** \xE2\x80\x9Cr\xE2\x80\x9Ds in **\xE2\x80\x9Cstrawberry\xE2\x80\x9D**.",
         false,
         {},
         ullm::FinishReason::stop,
         97,
         106,
         0,
         88,
         true},
        {"openai-compatible/deepseek-tool-call.chunks.txt",
         "deepseek",
         "",
         false,
         {{"weather", sf}},
         ullm::FinishReason::tool_call,
         374,
         61,
         256,
         17,
         true},
        {"openai-compatible/groq-tool-call.chunks.txt",
         "groq",
         "",
         false,
         {{"weather", json::object()}},
         ullm::FinishReason::tool_call,
         210,
         15},
        {"openai-compatible/groq-json-tool-call.chunks.txt",
         "groq",
         "",
         false,
         {{"json", {{"value", "Sparkle Day"}}}},
         ullm::FinishReason::tool_call,
         45,
         20},
        {"openai-compatible/issue-15789-step-1.chunks.txt",
         "openai",
         "PRE_TOOL",
         false,
         {{"weather", json::object()}},
         ullm::FinishReason::tool_call,
         58,
         12},
        {"openai-compatible/issue-15789-step-2.chunks.txt",
         "openai",
         "POST_TOOL",
         false,
         {},
         ullm::FinishReason::stop,
         86,
         2},
        {"openai-compatible/moonshot-cached-tokens.chunks.txt",
         "moonshot",
         "Hello, world!",
         false,
         {},
         ullm::FinishReason::stop,
         100,
         10,
         80},
        {"openai-compatible/moonshotai-stream.chunks.txt",
         "moonshot",
         "Hello!",
         false,
         {},
         ullm::FinishReason::stop,
         9,
         12,
         0,
         7,
         true},
        {"openai-compatible/xai-tool-call.chunks.txt",
         "xai",
         "",
         false,
         {{"weather", sf}},
         ullm::FinishReason::tool_call,
         307,
         26 + 227,
         306,
         227,
         true},
        {"openai-compatible/azure-text.chunks.txt",
         "azure",
         "Hello World",
         false,
         {},
         ullm::FinishReason::stop,
         15,
         5},
        {"openai-compatible/tiny-chunks.chunks.txt",
         "test",
         "Hi there!",
         false,
         {},
         ullm::FinishReason::stop,
         0,
         0,
         0,
         0,
         true},
        {"openai-compatible/alibaba-reasoning.chunks.txt",
         "qwen",
         "The word **\"strawberry\"** contains **3**",
         true,
         {},
         ullm::FinishReason::stop,
         24,
         1355,
         0,
         1084,
         true},
    };
    for (const auto& expected : cases) {
        const ullm::OpenAiChatProvider provider({.provider_name = expected.provider});
        const auto decoded = decode_stream(provider, wire_of(fixture(expected.file)), 97);
        check(decoded.response, expected);
        CHECK(joined(decoded.events, ullm::StreamEvent::Type::text_delta) == decoded.response.text);
        CHECK(joined(decoded.events, ullm::StreamEvent::Type::reasoning_delta) ==
              decoded.response.reasoning_text);
    }
}

TEST_CASE("raw OpenAI SSE bodies decode, parallel tool calls reassembled by index",
          "[openai_chat][conformance]") {
    const ullm::OpenAiChatProvider provider;
    const auto dir = fixture("openai-chat/openai-python-sse");
    const auto parallel = decode_stream(
        provider,
        ullm::test::read_file(
            dir / "f82268f2fefd5cfbc7eeb59c297688be2f6ca0849a6e4f17851b517310841d9b.bin"),
        33);
    check(parallel.response,
          {"f82268",
           "openai",
           "",
           false,
           {{"GetWeatherArgs", {{"city", "Edinburgh"}, {"country", "GB"}, {"units", "c"}}},
            {"get_stock_price", {{"ticker", "AAPL"}, {"exchange", "NASDAQ"}}}},
           ullm::FinishReason::tool_call,
           149,
           60});
    CHECK(parallel.response.tool_calls[0].id == "call_JMW1whyEaYG438VE1OIflxA2");
    CHECK(parallel.response.tool_calls[1].id == "call_DNYTawLBoN8fj3KN6qU9N1Ou");
    std::vector<std::string> ends;
    for (const auto& event : parallel.events) {
        if (event.type == ullm::StreamEvent::Type::tool_call_end)
            ends.push_back(event.tool_call_id);
    }
    CHECK(ends == std::vector<std::string>{"call_JMW1whyEaYG438VE1OIflxA2",
                                           "call_DNYTawLBoN8fj3KN6qU9N1Ou"});

    const auto refusal = decode_stream(
        provider,
        ullm::test::read_file(
            dir / "173417d553406f034f643e5db3f8d591fb691ebac56f5ae39a22cc7d455c5353.bin"),
        50);
    REQUIRE(refusal.response.refusal.has_value());
    CHECK(*refusal.response.refusal == "I'm sorry, I can't assist with that request.");
    CHECK(refusal.response.usage.input_tokens == 79);

    const auto truncated = decode_stream(
        provider,
        ullm::test::read_file(
            dir / "4cc50a6135d254573a502310e6af1246f55edb6ad95fa24059f160996b68866d.bin"),
        50);
    CHECK(truncated.response.finish_reason == ullm::FinishReason::length);
}

TEST_CASE("Chat Completions: a stream that stops before its last chunk is truncated",
          "[openai_chat]") {
    const ullm::OpenAiChatProvider provider;
    const std::string wire =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n";
    auto decoder = provider.stream_decoder(request_for());
    std::vector<ullm::StreamEvent> events;
    decoder->feed(wire, events);
    CHECK(decoder->produced_visible_event());
    CHECK(error_code_of([&] { decoder->finish(events); }) == "stream_truncated");

    auto partial = provider.stream_decoder(request_for());
    partial->feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"con", events);
    CHECK(error_code_of([&] { partial->finish(events); }) == "stream_truncated");
}

TEST_CASE("Chat Completions: an error object inside a 200 stream is surfaced as an error",
          "[openai_chat]") {
    const ullm::OpenAiChatProvider provider({.provider_name = "openrouter"});
    auto decoder = provider.stream_decoder(request_for());
    std::vector<ullm::StreamEvent> events;
    decoder->feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n", events);
    try {
        decoder->feed(
            "data: {\"error\":{\"code\":502,\"message\":\"Upstream provider failed\"}}\n\n",
            events);
        FAIL("no error");
    } catch (const ullm::ProviderError& error) {
        CHECK(error.code() == "provider_error");
        CHECK(error.status() == 502);
        CHECK(error.provider() == "openrouter");
        CHECK(error.message().find("Upstream provider failed") != std::string::npos);
    }
}

TEST_CASE("Chat Completions: a usage chunk with null or empty choices is accepted",
          "[openai_chat]") {
    const ullm::OpenAiChatProvider provider;
    for (const std::string choices : {"[]", "null"}) {
        const std::string wire =
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":"
            "\"stop\"}]}\n\ndata: {\"choices\":" +
            choices +
            ",\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":1,\"prompt_tokens_details\":{"
            "\"cached_tokens\":3}}}\n\ndata: [DONE]\n\n";
        const auto decoded = decode_stream(provider, wire, 7);
        CHECK(decoded.response.text == "ok");
        CHECK(decoded.response.usage.input_tokens == 5);
        CHECK(decoded.response.usage.cached_read_tokens == 3);
    }
}

TEST_CASE("Chat Completions: error bodies map to the error hierarchy", "[openai_chat]") {
    const ullm::OpenAiChatProvider provider;
    auto status_error = [&](int status, const std::string& body, ullm::HttpHeaders headers = {}) {
        auto response = body_response(body, status);
        response.headers = std::move(headers);
        response.headers.emplace_back("x-request-id", "req_abc");
        try {
            (void)provider.decode(response, request_for("gpt-4o"));
        } catch (const ullm::Error& error) {
            CHECK(error.request_id() == "req_abc");
            CHECK(error.model() == "gpt-4o");
            return error.code();
        }
        return std::string("no error");
    };
    const auto legacy =
        ullm::test::read_file(fixture("openai-chat/reasoning-model-legacy-parameter-error.json"));
    CHECK(status_error(400, legacy) == "invalid_request");
    CHECK(
        status_error(
            401,
            R"({"error":{"message":"Incorrect API key provided: sk-abc...","type":"invalid_request_error","code":"invalid_api_key"}})") ==
        "authentication_failed");
    CHECK(
        status_error(
            429,
            R"({"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}})",
            {{"retry-after", "3"}}) == "rate_limited");
    CHECK(
        status_error(
            400,
            R"({"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}})") ==
        "context_length_exceeded");
    CHECK(status_error(
              500, R"({"error":{"message":"The server had an error","type":"server_error"}})") ==
          "provider_error");
    CHECK(status_error(
              503,
              R"({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})") ==
          "provider_error");
    CHECK(status_error(502, "<html>Bad gateway</html>") == "provider_error");
    CHECK(status_error(200, R"({"error":"upstream failed"})") == "provider_error");
    CHECK(status_error(200, R"({"error":{"code":429,"message":"upstream rate limit"}})") ==
          "rate_limited");
    CHECK(status_error(200, "{not json") == "invalid_provider_response");
    CHECK(status_error(200, R"({"choices":[]})") == "invalid_provider_response");
    CHECK(status_error(200, "[1,2]") == "invalid_provider_response");

    try {
        auto response = body_response(R"({"error":{"message":"slow down"}})", 429);
        response.headers = {{"retry-after-ms", "1500"}};
        (void)provider.decode(response, request_for());
    } catch (const ullm::RateLimitError& error) {
        REQUIRE(error.retry_after().has_value());
        CHECK(error.retry_after()->count() == 1500);
    }
}

TEST_CASE("every Chat Completions fixture decodes or fails with a stable code",
          "[openai_chat][conformance]") {
    const ullm::OpenAiChatProvider provider;
    std::size_t decoded = 0;
    std::size_t failed = 0;
    for (const std::string dir : {"openai-chat", "openai-compatible"}) {
        for (const auto& path : ullm::test::fixture_files(dir, "")) {
            INFO(path.string());
            const auto name = path.filename().string();
            const bool stream = path.extension() == ".txt" || path.extension() == ".bin" ||
                                path.extension() == ".sse";
            if (!stream && path.extension() != ".json") continue;
            if (path.string().find("ollama-docs") != std::string::npos) continue;
            const std::string code = error_code_of([&] {
                if (stream) {
                    (void)decode_stream(provider, wire_of(path), 211);
                } else {
                    (void)provider.decode(body_response(ullm::test::read_file(path)),
                                          request_for());
                }
            });
            if (code == "no error") {
                ++decoded;
            } else {
                ++failed;
                CHECK((code == "invalid_provider_response" || code == "invalid_request" ||
                       code == "authentication_failed" || code == "rate_limited" ||
                       code == "context_length_exceeded" || code == "provider_error" ||
                       code == "stream_truncated"));
            }
        }
    }
    CHECK(decoded >= 40);
    CHECK(failed >= 4);
}

TEST_CASE("Chat Completions request bodies validate against the OpenAPI spec",
          "[openai_chat][spec]") {
    const ullm::OpenAiChatProvider provider;
    ullm::ChatRequest request = request_for("gpt-4o");
    request.system = "Be brief.";
    request.messages = {
        ullm::Message{ullm::Role::user,
                      {ullm::TextPart{"What is in this image, and the weather there?"},
                       ullm::ImagePart{"", "aGVsbG8=", "image/png"},
                       ullm::DocumentPart{"", "JVBERi0=", "application/pdf", "notes.pdf"}},
                      json::object(),
                      std::nullopt},
        ullm::Message{ullm::Role::assistant,
                      {ullm::TextPart{"Let me check."},
                       ullm::ToolCallPart{"call_1", "lookup_weather", {{"city", "Berlin"}}}},
                      json::object(),
                      std::nullopt},
        ullm::Message::tool_results({{"call_1", "lookup_weather", {{"forecast", "Sunny"}}, false}}),
    };
    request.tools = {{"lookup_weather",
                      "Look up the weather",
                      {{"type", "object"},
                       {"properties", {{"city", {{"type", "string"}}}}},
                       {"required", {"city"}},
                       {"additionalProperties", false}}}};
    request.tool_choice = ullm::ToolChoice::tool("lookup_weather");
    request.max_tokens = 300;
    request.temperature = 0.2;
    request.top_p = 0.9;
    request.stop = {"END"};
    request.response_format = ullm::ResponseFormat{
        "answer", {{"type", "object"}, {"properties", {{"text", {{"type", "string"}}}}}}, true};
    for (const bool stream : {false, true}) {
        const json body = provider.encode_body(request, stream);
        const auto top_level =
            ullm::test::spec().properties(ullm::test::spec().schema("CreateChatCompletionRequest"));
        for (const auto& item : body.items()) {
            INFO(item.key());
            CHECK(top_level.count(item.key()) == 1);
        }
        for (const auto& message : body.at("messages")) {
            INFO(message.dump());
            CHECK(ullm::test::spec().check(message, "ChatCompletionRequestMessage").empty());
        }
        const std::string why = ullm::test::spec().check(body, "CreateChatCompletionRequest");
        INFO(why);
        CHECK(why.empty());
    }
    for (const auto& choice :
         {ullm::ToolChoice::automatic(), ullm::ToolChoice::none(), ullm::ToolChoice::required()}) {
        request.tool_choice = choice;
        CHECK(ullm::test::spec().check(provider.encode_body(request, false),
                                       "CreateChatCompletionRequest") == "");
    }
    // The checker is not vacuous: an invented field and a wrong type are refused.
    json bogus = provider.encode_body(request, false);
    bogus["temperature"] = "hot";
    CHECK_FALSE(ullm::test::spec().check(bogus, "CreateChatCompletionRequest").empty());
    bogus = provider.encode_body(request, false);
    bogus["messages"][0]["speaker"] = "system";
    CHECK_FALSE(ullm::test::spec().check(bogus, "CreateChatCompletionRequest").empty());
}

}  // namespace openai_chat_test
