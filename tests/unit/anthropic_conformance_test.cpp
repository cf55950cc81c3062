// Conformance of the Anthropic adapter with the recorded traffic in ../shared/fixtures/anthropic:
// every file decodes (or fails with the right error code), a curated set of transcripts gives
// exactly the recorded text, tool calls, finish reason and usage, stream and body decodes agree,
// and no chunking of a stream changes its events.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/anthropic.hpp>

#include "support/catch.hpp"
#include "support/fixtures.hpp"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anthropic_conformance_test {

namespace {

using ullm::AnthropicProvider;
using ullm::ChatRequest;
using ullm::ChatResponse;
using ullm::FinishReason;
using ullm::HttpResponse;
using ullm::json;
using ullm::StreamEvent;
using ullm::ToolCallPart;
using ullm::Usage;
namespace fs = std::filesystem;

const AnthropicProvider& provider() {
    static const AnthropicProvider instance;
    return instance;
}

std::string anthropic_path(std::string_view name) {
    return (ullm::test::fixtures_dir() / "anthropic" / std::string(name)).string();
}

std::string read_fixture(std::string_view name) {
    return ullm::test::read_file(anthropic_path(name));
}

/// The wire bytes of a stream file: `*.chunks.txt` payload lines are framed as typed events
/// unless the file already is an SSE body.
std::string stream_wire(std::string_view name) {
    std::string text = read_fixture(name);
    if (ullm::test::looks_like_sse_wire(text)) return text;
    return ullm::test::frame_chunks_as_sse(text, ullm::test::Framing::typed_events);
}

struct Decoded {
    std::vector<StreamEvent> events;
    ChatResponse response;
};

/// Feeds `wire` in chunks of `chunk` bytes, then finishes; checks that exactly one `done` ends
/// the events.
Decoded decode_stream(std::string_view wire, std::size_t chunk = 61,
                      const ChatRequest& request = {}) {
    auto decoder = provider().stream_decoder(request);
    Decoded decoded;
    for (std::size_t at = 0; at < wire.size(); at += chunk) {
        decoder->feed(wire.substr(at, chunk), decoded.events);
    }
    decoder->finish(decoded.events);
    REQUIRE_FALSE(decoded.events.empty());
    const auto dones = std::count_if(
        decoded.events.begin(), decoded.events.end(),
        [](const StreamEvent& event) { return event.type == StreamEvent::Type::done; });
    REQUIRE(dones == 1);
    REQUIRE(decoded.events.back().type == StreamEvent::Type::done);
    REQUIRE(decoded.events.back().response.has_value());
    decoded.response = *decoded.events.back().response;
    return decoded;
}

ChatResponse decode_body(std::string body, int status = 200, ullm::HttpHeaders headers = {},
                         const ChatRequest& request = {}) {
    HttpResponse response;
    response.status = status;
    response.headers = std::move(headers);
    response.body = std::move(body);
    return provider().decode(response, request);
}

/// "ok", or the code of the ullm::Error that `run` threw. Any other exception fails the test.
std::string outcome(const std::function<void()>& run) {
    try {
        run();
        return "ok";
    } catch (const ullm::Error& error) {
        return error.code();
    }
}

ToolCallPart call(std::string id, std::string name, json arguments) {
    return {std::move(id), std::move(name), std::move(arguments)};
}

Usage usage(std::int64_t input, std::int64_t output, std::int64_t cached_read = 0,
            std::int64_t cached_write = 0, std::int64_t reasoning = 0) {
    return {input, output, cached_read, cached_write, reasoning, std::nullopt};
}

struct Expected {
    std::string text;
    std::string reasoning;
    std::vector<ToolCallPart> tool_calls;
    FinishReason finish = FinishReason::stop;
    std::string raw_finish;
    Usage usage;
    std::string model;
    std::string request_id;
};

void check_response(const ChatResponse& response, const Expected& expected) {
    CHECK(response.text == expected.text);
    CHECK(response.reasoning_text == expected.reasoning);
    CHECK(response.tool_calls == expected.tool_calls);
    CHECK(response.message.tool_calls() == expected.tool_calls);
    CHECK(response.finish_reason == expected.finish);
    CHECK(response.raw_finish_reason == expected.raw_finish);
    CHECK(response.usage == expected.usage);
    CHECK(response.model == expected.model);
    CHECK(response.request_id == expected.request_id);
    CHECK(response.provider == "anthropic");
    CHECK(response.message.role == ullm::Role::assistant);
}

bool same_response(const ChatResponse& a, const ChatResponse& b) {
    return a.message == b.message && a.text == b.text && a.reasoning_text == b.reasoning_text &&
           a.tool_calls == b.tool_calls && a.finish_reason == b.finish_reason &&
           a.raw_finish_reason == b.raw_finish_reason && a.usage == b.usage && a.model == b.model &&
           a.provider == b.provider && a.request_id == b.request_id && a.refusal == b.refusal;
}

bool same_event(const StreamEvent& a, const StreamEvent& b) {
    if (a.type != b.type || a.delta != b.delta || a.tool_call_id != b.tool_call_id ||
        a.tool_name != b.tool_name || a.tool_call != b.tool_call || a.usage != b.usage ||
        a.response.has_value() != b.response.has_value()) {
        return false;
    }
    return !a.response || same_response(*a.response, *b.response);
}

bool same_events(const std::vector<StreamEvent>& a, const std::vector<StreamEvent>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_event);
}

/// Events of `wire` fed in two pieces split at `cut`, or the error code.
std::string events_split_at(std::string_view wire, std::size_t cut, std::vector<StreamEvent>& out) {
    return outcome([&] {
        auto decoder = provider().stream_decoder({});
        decoder->feed(wire.substr(0, cut), out);
        decoder->feed(wire.substr(cut), out);
        decoder->finish(out);
    });
}

/// Turns a Messages API body into the event stream a server would send for it: blocks start
/// empty and their text, thinking, signature, tool input and compaction content arrive as
/// deltas; everything else comes whole in content_block_start.
std::string stream_from_message(const json& message) {
    std::string wire;
    const auto event = [&wire](const json& payload) {
        wire +=
            "event: " + payload["type"].get<std::string>() + "\ndata: " + payload.dump() + "\n\n";
    };
    json start = message;
    start["content"] = json::array();
    start["stop_reason"] = nullptr;
    event({{"type", "message_start"}, {"message", start}});
    event({{"type", "ping"}});
    std::size_t index = 0;
    for (const auto& original : message["content"]) {
        json block = original;
        std::vector<json> deltas;
        const std::string type = block.value("type", "");
        if (type == "text") {
            deltas.push_back({{"type", "text_delta"}, {"text", block["text"]}});
            block["text"] = "";
        } else if (type == "thinking") {
            deltas.push_back({{"type", "thinking_delta"}, {"thinking", block["thinking"]}});
            block["thinking"] = "";
            if (block.contains("signature")) {
                deltas.push_back({{"type", "signature_delta"}, {"signature", block["signature"]}});
                block["signature"] = "";
            }
        } else if (block.contains("input") && block["input"].is_object()) {
            deltas.push_back({{"type", "input_json_delta"}, {"partial_json", ""}});
            const std::string input = block["input"].dump();
            const std::size_t half = input.size() / 2;
            deltas.push_back(
                {{"type", "input_json_delta"}, {"partial_json", input.substr(0, half)}});
            deltas.push_back({{"type", "input_json_delta"}, {"partial_json", input.substr(half)}});
            block["input"] = json::object();
        } else if (type == "compaction" && block["content"].is_string()) {
            deltas.push_back({{"type", "compaction_delta"}, {"content", block["content"]}});
            block["content"] = nullptr;
        }
        event({{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
        for (const auto& delta : deltas) {
            event({{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
        }
        event({{"type", "content_block_stop"}, {"index", index}});
        ++index;
    }
    json delta = {{"stop_reason", message["stop_reason"]}, {"stop_sequence", nullptr}};
    if (message.contains("stop_details")) delta["stop_details"] = message["stop_details"];
    event({{"type", "message_delta"},
           {"delta", delta},
           {"usage", {{"output_tokens", message["usage"].value("output_tokens", 0)}}}});
    event({{"type", "message_stop"}});
    return wire;
}

/// The streams that intermediaries spliced: a second message starts while the first is open.
bool is_spliced(const std::string& name) {
    return name.find("spliced") != std::string::npos;
}

/// anthropic-sdk-python saved some streams without the blank line that ends the last event.
bool lacks_final_blank_line(std::string_view wire) {
    return wire.size() < 2 || wire.substr(wire.size() - 2) != "\n\n";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Every file

TEST_CASE("anthropic conformance: every recorded file decodes or fails with the right code",
          "[anthropic][fixtures]") {
    const auto files = ullm::test::fixture_files("anthropic", "");
    REQUIRE(files.size() >= 150);
    std::size_t bodies = 0;
    std::size_t streams = 0;
    std::size_t errors = 0;
    for (const auto& file : files) {
        const std::string name =
            file.lexically_relative(ullm::test::fixtures_dir() / "anthropic").generic_string();
        const std::string filename = file.filename().string();
        INFO(name);
        const std::string text = ullm::test::read_file(file);

        if (filename.size() > 11 && filename.substr(filename.size() - 11) == ".chunks.txt") {
            ++streams;
            const std::string wire = stream_wire(name);
            const std::string result = outcome([&] { (void)decode_stream(wire); });
            CHECK(result == (is_spliced(name) ? "stream_truncated" : "ok"));
            continue;
        }
        if (ullm::test::looks_like_sse_wire(text)) {
            // anthropic-sdk-python *.txt and *.sse bodies.
            ++streams;
            if (lacks_final_blank_line(text)) {
                // Strictly the last event (message_stop) never completed.
                CHECK(outcome([&] { (void)decode_stream(text); }) == "stream_truncated");
                CHECK(outcome([&] { (void)decode_stream(text + "\n\n"); }) == "ok");
            } else {
                CHECK(outcome([&] { (void)decode_stream(text); }) == "ok");
            }
            continue;
        }
        REQUIRE(filename.size() > 4);
        const json value = json::parse(text);
        const bool message_body = value.is_object() && value.value("type", "") == "message";
        const bool error_body = value.is_object() && value.value("type", "") == "error";
        ++bodies;
        const std::string raw = outcome([&] { (void)decode_body(text); });
        if (message_body) {
            CHECK(raw == "ok");
        } else if (error_body) {
            ++errors;
            CHECK(raw == "invalid_request");  // both recorded error bodies are 400s
        } else {
            // Recordings that wrap the traffic (request/response pairs, test metadata) are not
            // response bodies.
            CHECK(raw == "invalid_provider_response");
        }

        // The traffic inside wrappers: each recorded response with its recorded status.
        std::vector<json> recordings;
        if (value.is_array()) {
            for (const auto& entry : value) recordings.push_back(entry);
        } else if (value.is_object() && value.contains("response")) {
            recordings.push_back(value);
        }
        for (std::size_t i = 0; i < recordings.size(); ++i) {
            const json& entry = recordings[i];
            INFO("recording #" << i);
            int status = 200;
            ullm::HttpHeaders headers;
            std::string body;
            if (entry.is_string()) {
                body = entry.get<std::string>();
            } else {
                const json& response = entry["response"];
                status = response.value("status_code", response.value("status", 200));
                if (const auto it = response.find("headers");
                    it != response.end() && it->is_object()) {
                    for (const auto& [key, header] : it->items()) {
                        if (header.is_string())
                            headers.emplace_back(key, header.get<std::string>());
                    }
                }
                body = response["body"].is_string() ? response["body"].get<std::string>()
                                                    : response["body"].dump();
            }
            if (ullm::test::looks_like_sse_wire(body)) {
                ++streams;
                CHECK(status == 200);
                CHECK(outcome([&] { (void)decode_stream(body); }) == "ok");
                continue;
            }
            ++bodies;
            const std::string result = outcome([&] { (void)decode_body(body, status, headers); });
            if (status == 429) {
                ++errors;
                CHECK(result == "rate_limited");
            } else if (status == 400) {
                ++errors;
                CHECK(result == "invalid_request");
            } else {
                CHECK(status == 200);
                CHECK(result == "ok");
            }
        }
    }
    INFO(bodies << " bodies, " << streams << " streams, " << errors << " error responses");
    CHECK(bodies >= 90);
    CHECK(streams >= 80);
    CHECK(errors == 8);
}

TEST_CASE("anthropic conformance: recorded error bodies keep status, type and request id",
          "[anthropic][fixtures]") {
    SECTION("429 rate_limit_error before a successful streamed retry") {
        const json recording = json::parse(
            read_fixture("anthropic-sdk-python/a8b7dbb8-2321-4624-abdb-7ba2136b5c38.json"));
        REQUIRE(recording.size() == 3);
        try {
            (void)decode_body(recording[0]["response"]["body"].dump(), 429,
                              {{"content-type", "application/json"}, {"x-should-retry", "true"}},
                              ChatRequest{.model = "claude-sonnet-4-5-20250929"});
            FAIL("no error");
        } catch (const ullm::RateLimitError& error) {
            CHECK(error.code() == "rate_limited");
            CHECK(error.status() == 429);
            CHECK(error.retryable());
            CHECK(error.provider() == "anthropic");
            CHECK(error.model() == "claude-sonnet-4-5-20250929");
            CHECK(error.request_id() == "req_011CYK5n67SytMUxm8WMZUWY");
            CHECK(error.message().find("rate limit of 20,000,000 prompt bytes per hour") !=
                  std::string::npos);
            CHECK_FALSE(error.retry_after().has_value());
        }
        const Decoded retry = decode_stream(recording[2]["response"]["body"].get<std::string>());
        check_response(retry.response, {.text = "[12345,67890]",
                                        .finish = FinishReason::stop,
                                        .raw_finish = "end_turn",
                                        .usage = usage(135, 10),
                                        .model = "claude-sonnet-4-5-20250929",
                                        .request_id = "msg_013nnniYDrJDocdy5nrMU7cH"});
    }
    SECTION("a 400 in a 200 body maps from its error type") {
        try {
            (void)decode_body(read_fixture("anthropic-issue-17366-error.json"));
            FAIL("no error");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "invalid_request");
            CHECK(error.status() == 400);
            CHECK_FALSE(error.retryable());
            CHECK(error.request_id() == "req_011Cd65WVh8Zrvno3NunpJ73");
            CHECK(error.message().find("invalid_request_error") != std::string::npos);
        }
    }
    SECTION("a recorded 400 with its request-id header") {
        const json recording =
            json::parse(read_fixture("anthropic-issue-17366-orphan-tool-result.1.json"));
        try {
            (void)decode_body(recording["response"]["body"].dump(), 400,
                              {{"request-id", "req_from_header"}});
            FAIL("no error");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "invalid_request");
            CHECK(error.request_id() == "req_from_header");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Curated transcripts: exact values read from the files

TEST_CASE("anthropic conformance: curated response bodies", "[anthropic][fixtures]") {
    SECTION("anthropic-text.json") {
        check_response(decode_body(read_fixture("anthropic-text.json")),
                       {.text = "Hello! I'm doing well, thanks for asking. How are you doing "
                                "today? Is there anything I can help you with?",
                        .finish = FinishReason::stop,
                        .raw_finish = "end_turn",
                        .usage = usage(12, 29),
                        .model = "claude-sonnet-4-5-20250929",
                        .request_id = "msg_01VdEjxAP5ahtHKrrRdNBteQ"});
    }
    SECTION("anthropic-claude-opus-5-reasoning-high.1.json: thinking and thinking tokens") {
        const ChatResponse response =
            decode_body(read_fixture("anthropic-claude-opus-5-reasoning-high.1.json"), 200, {},
                        ChatRequest{.model = "claude-opus-5"});
        check_response(response,
                       {.text = "The roots are 1, 2, and 3.",
                        .reasoning = "I need to find all roots of this cubic polynomial and verify "
                                     "them.",
                        .finish = FinishReason::stop,
                        .raw_finish = "end_turn",
                        .usage = usage(51, 1699, 0, 0, 139),
                        .model = "claude-opus-5",
                        .request_id = "msg_011CdMNhurHSJCxCC2NB7WYc"});
        REQUIRE(response.message.replay.has_value());
        CHECK(response.message.replay->provider == "anthropic");
        CHECK(response.message.replay->model == "claude-opus-5");
        CHECK(response.message.replay->data["content"][0]["signature"] == "test-signature");
    }
    SECTION("anthropic-issue-11719-quoted-tool-input.json: quotes inside arguments") {
        check_response(
            decode_body(read_fixture("anthropic-issue-11719-quoted-tool-input.json")),
            {.tool_calls = {call("toolu_01JKBd25gEfr9ZpVvn8quK2v", "website_update",
                                 {{"website_path", "/home/user/pace-landing"},
                                  {"tasks",
                                   {{{"description",
                                      "Today you post every run to Strava, but Strava does not "
                                      "answer the question: \"What should I do next after this "
                                      "run?\". It is a great log, but it is not adaptive."},
                                     {"type", "feature"},
                                     {"passes", false}}}}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(912, 118),
             .model = "claude-sonnet-4-5-20250929",
             .request_id = "msg_011CdFVpN6K4ZeYJpQWnJE41"});
    }
    SECTION("anthropic-tool-no-args.json: text then a call without arguments") {
        check_response(
            decode_body(read_fixture("anthropic-tool-no-args.json")),
            {.text = "<thinking>\nThe updateIssueList tool was provided in the list of available "
                     "functions. The tool has no required parameters, so it can be called without "
                     "any additional information needed from the user.\n</thinking>\n\nOkay, I "
                     "will update the current issue list:",
             .tool_calls = {call("toolu_01LRmxn9vGM1d2DZSDBowdZ1", "updateIssueList",
                                 json::object())},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(602, 93),
             .model = "claude-3-opus-20240229",
             .request_id = "msg_01GCBaV8gyWAYgMVggRqZbuQ"});
    }
    SECTION("anthropic-issue-11855-follow-up.json: max_tokens is length") {
        check_response(decode_body(read_fixture("anthropic-issue-11855-follow-up.json")),
                       {.text = "I need more information to prepare a brief for you. Could you "
                                "please provide:\n\n1. **What kind of brief** do you need? "
                                "(project brief",
                        .finish = FinishReason::length,
                        .raw_finish = "max_tokens",
                        .usage = usage(2497, 32),
                        .model = "claude-sonnet-4-5-20250929",
                        .request_id = "msg_01B7iXdj8CDnjU3aBLD4sHoU"});
    }
    SECTION("anthropic-web-search-with-tool.1.json: the server tool is not a tool call") {
        const ChatResponse response =
            decode_body(read_fixture("anthropic-web-search-with-tool.1.json"));
        check_response(response, {.text = "I'll save the results and search for the latest news.",
                                  .tool_calls = {call("toolu_01SaveResults", "save_results",
                                                      {{"filename", "news.txt"}})},
                                  .finish = FinishReason::tool_call,
                                  .raw_finish = "tool_use",
                                  .usage = usage(80, 60),
                                  .model = "claude-sonnet-4-20250514",
                                  .request_id = "msg_01TestWebAndRegularTool"});
        // The server tool blocks travel only in the replay state, in their place.
        REQUIRE(response.message.replay.has_value());
        const json& blocks = response.message.replay->data["content"];
        REQUIRE(blocks.size() == 4);
        CHECK(blocks[2]["type"] == "server_tool_use");
        CHECK(blocks[3]["type"] == "web_search_tool_result");
    }
    SECTION("anthropic-refusal.json: content filter with the explanation") {
        const ChatResponse response = decode_body(read_fixture("anthropic-refusal.json"));
        check_response(response, {.finish = FinishReason::content_filter,
                                  .raw_finish = "refusal",
                                  .usage = usage(18, 5),
                                  .model = "claude-fable-5",
                                  .request_id = "msg_01RefusalExampleAbcdefghijk"});
        CHECK(response.refusal ==
              "This request triggered restrictions on violative cyber content "
              "and was blocked under Anthropic's Usage Policy.");
        const ChatResponse bare = decode_body(read_fixture("anthropic-refusal-no-details.json"));
        CHECK(bare.finish_reason == FinishReason::content_filter);
        REQUIRE(bare.refusal.has_value());
        CHECK_FALSE(bare.refusal->empty());
    }
    SECTION("anthropic-fallback.json: the model that answered") {
        const ChatResponse response = decode_body(read_fixture("anthropic-fallback.json"));
        check_response(response, {.text = "The printing press was invented by Johannes Gutenberg "
                                          "around 1440.",
                                  .finish = FinishReason::stop,
                                  .raw_finish = "end_turn",
                                  .usage = usage(412, 264),
                                  .model = "claude-opus-4-8",
                                  .request_id = "msg_01FallbackExampleAbcdefghij"});
        CHECK_FALSE(response.message.replay.has_value());
    }
    SECTION("092be1de#0: a tool called from code execution, stopped for its result") {
        const json recording = json::parse(
            read_fixture("anthropic-sdk-python/092be1de-d3f8-4c22-a4ea-a7ad54689836.json"));
        check_response(
            decode_body(recording[0]["response"]["body"].dump()),
            {.text = "I'll check the weather for all three cities in Celsius simultaneously.",
             .tool_calls = {call("toolu_011MDRpaZRMRRjtFkJizD6nS", "get_weather",
                                 {{"location", "San Francisco, CA"}, {"units", "c"}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(3182, 237),
             .model = "claude-opus-4-5-20251101",
             .request_id = "msg_01LAwUK3MeXUxoNW5ZgnPpGy"});
    }
    SECTION("anthropic-programmatic-tool-calling.1.json: answered code-execution calls") {
        const ChatResponse response =
            decode_body(read_fixture("anthropic-programmatic-tool-calling.1.json"));
        CHECK(response.tool_calls.empty());
        CHECK(response.finish_reason == FinishReason::stop);
        CHECK(response.usage == usage(4243, 229));
        CHECK(response.text.rfind("I'll help you simulate this dice game between two players!",
                                  0) == 0);
        REQUIRE(response.message.replay.has_value());
        CHECK(response.message.replay->data["content"].size() == 8);
    }
    SECTION("anthropic-mcp.1.json: MCP blocks stay out of the visible parts") {
        check_response(decode_body(read_fixture("anthropic-mcp.1.json")),
                       {.text = "The echo tool responded back with: **\"hello world\"**\n\nAs "
                                "expected, it simply echoes back the exact message that was sent "
                                "to it!",
                        .finish = FinishReason::stop,
                        .raw_finish = "end_turn",
                        .usage = usage(1250, 88),
                        .model = "claude-sonnet-4-5-20250929",
                        .request_id = "msg_01P81KJc28LkYyoDAYG1bWVb"});
    }
    SECTION("the request-id header wins over the message id") {
        const ChatResponse response =
            decode_body(read_fixture("anthropic-text.json"), 200, {{"request-id", "req_header"}});
        CHECK(response.request_id == "req_header");
    }
}

TEST_CASE("anthropic conformance: curated streams", "[anthropic][fixtures]") {
    SECTION("anthropic-text.chunks.txt") {
        const Decoded decoded = decode_stream(stream_wire("anthropic-text.chunks.txt"));
        check_response(decoded.response,
                       {.text = "Hello! I'm doing well, thank you for asking. How are you doing "
                                "today? Is there anything I can help you with?",
                        .finish = FinishReason::stop,
                        .raw_finish = "end_turn",
                        .usage = usage(12, 30),
                        .model = "claude-sonnet-4-5-20250929",
                        .request_id = "msg_01QC4g3HwBThD4BaNtBckFDJ"});
        std::string text;
        for (const auto& event : decoded.events) {
            if (const auto* delta = event.text_delta()) text += *delta;
        }
        CHECK(text == decoded.response.text);
    }
    SECTION("anthropic-clear-thinking.1.chunks.txt: thinking, signature, text") {
        const Decoded decoded = decode_stream(stream_wire("anthropic-clear-thinking.1.chunks.txt"),
                                              61, ChatRequest{.model = "claude-sonnet-4-5"});
        check_response(decoded.response,
                       {.text = "925 ÷ 5 = 185",
                        .reasoning = "The previous result was 925. Now I need to divide that by "
                                     "5.\n\n925 ÷ 5 = 185",
                        .finish = FinishReason::stop,
                        .raw_finish = "end_turn",
                        .usage = usage(69, 53),
                        .model = "claude-sonnet-4-5-20250929",
                        .request_id = "msg_01Y6V41gqPaKWEw7iPouH7iW"});
        REQUIRE(decoded.response.message.replay.has_value());
        const json& thinking = decoded.response.message.replay->data["content"][0];
        CHECK(thinking["type"] == "thinking");
        CHECK(thinking["thinking"] == decoded.response.reasoning_text);
        const std::string signature = thinking["signature"].get<std::string>();
        CHECK(signature.size() > 100);
        CHECK(decoded.response.message.replay->model == "claude-sonnet-4-5");
        // The signature never shows in an event.
        for (const auto& event : decoded.events) {
            CHECK(event.delta.find(signature.substr(0, 40)) == std::string::npos);
        }
    }
    SECTION("anthropic-issue-15652-false.chunks.txt: three parallel calls") {
        const Decoded decoded =
            decode_stream(stream_wire("anthropic-issue-15652-false.chunks.txt"));
        check_response(
            decoded.response,
            {.tool_calls =
                 {call("toolu_01LtEf4h1QW7KCKLsYMuhTNB", "searchDocs", {{"query", "alpha"}}),
                  call("toolu_016tfZE7otAFSBjhc67wu189", "searchDocs", {{"query", "beta"}}),
                  call("toolu_01XkU35z8BVWqqc9tijDuLrA", "searchDocs", {{"query", "gamma"}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(798, 110),
             .model = "claude-sonnet-4-5-20250929",
             .request_id = "msg_011Cd5Uz3EsW7t2zRF3zZGJL"});
        std::map<std::string, std::string> fragments;
        std::vector<std::string> ends;
        for (const auto& event : decoded.events) {
            if (event.type == StreamEvent::Type::tool_call_delta)
                fragments[event.tool_call_id] += event.delta;
            if (event.type == StreamEvent::Type::tool_call_end) ends.push_back(event.tool_call_id);
        }
        CHECK(fragments["toolu_016tfZE7otAFSBjhc67wu189"] == "{\"query\": \"beta\"}");
        CHECK(ends == std::vector<std::string>{"toolu_01LtEf4h1QW7KCKLsYMuhTNB",
                                               "toolu_016tfZE7otAFSBjhc67wu189",
                                               "toolu_01XkU35z8BVWqqc9tijDuLrA"});
    }
    SECTION("anthropic-issue-5942-cache-read.chunks.txt: cached input counts as input") {
        check_response(
            decode_stream(stream_wire("anthropic-issue-5942-cache-read.chunks.txt")).response,
            {.text = "OK",
             .finish = FinishReason::length,
             .raw_finish = "max_tokens",
             .usage = usage(18642, 1, 18639, 0),
             .model = "claude-sonnet-4-6",
             .request_id = "msg_011CczBWmS717HsNJwaC9mWM"});
    }
    SECTION("anthropic-issue-5942-cache-write.chunks.txt") {
        check_response(
            decode_stream(stream_wire("anthropic-issue-5942-cache-write.chunks.txt")).response,
            {.text = "OK",
             .finish = FinishReason::length,
             .raw_finish = "max_tokens",
             .usage = usage(18642, 1, 0, 18639),
             .model = "claude-sonnet-4-6",
             .request_id = "msg_011CczBWezemuqo5xUfertVi"});
    }
    SECTION("anthropic-message-delta-input-tokens.chunks.txt: message_delta updates input") {
        check_response(
            decode_stream(stream_wire("anthropic-message-delta-input-tokens.chunks.txt")).response,
            {.text = "pong",
             .finish = FinishReason::stop,
             .raw_finish = "end_turn",
             .usage = usage(61, 2),
             .model = "claude-opus-4-5-20251101",
             .request_id = "msg_3196a1cc08de4d76b85b8f5777c0d42b"});
    }
    SECTION("stream-a-refusal.sse: thinking, text, then a refusal") {
        const Decoded decoded =
            decode_stream(read_fixture("anthropic-sdk-python/stream-a-refusal.sse"));
        check_response(
            decoded.response,
            {.text = "Hi",
             .reasoning = "Simple educational question about what a solar eclipse is. "
                          "This is benign general knowledge — definitions are fine. Also "
                          "the user called me \"claudius\" — I'm Claude. Minor "
                          "correction or just roll with it politely.",
             .finish = FinishReason::content_filter,
             .raw_finish = "refusal",
             .usage = usage(28, 106, 0, 0, 67),
             .model = "claude-fable-5",
             .request_id = "msg_fixture_a_0001"});
        CHECK(decoded.response.refusal.has_value());
    }
    SECTION("issue-13057-approved-tool.1.chunks.txt: a wire body with padded JSON") {
        check_response(
            decode_stream(stream_wire("issue-13057-approved-tool.1.chunks.txt")).response,
            {.tool_calls = {call("toolu_01TyLXoWW1gujar8anh7KHHN", "createIssue",
                                 {{"title", "Reproduce issue 13057"}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(618, 59),
             .model = "claude-sonnet-4-5-20250929",
             .request_id = "msg_011Cd3pnzH359YUmWrJzaSwh"});
    }
    SECTION("anthropic-tool-no-args.chunks.txt: empty input JSON") {
        check_response(decode_stream(stream_wire("anthropic-tool-no-args.chunks.txt")).response,
                       {.text = "I'll update the issue list for you.",
                        .tool_calls = {call("toolu_01QE1WLsSVp5hy5Q3GmGTmjP", "updateIssueList",
                                            json::object())},
                        .finish = FinishReason::tool_call,
                        .raw_finish = "tool_use",
                        .usage = usage(565, 48),
                        .model = "claude-sonnet-4-5-20250929",
                        .request_id = "msg_01GE2RKp1VYsPzdFs3sS9z5S"});
    }
    SECTION("anthropic-issue-11719-quoted-tool-input.chunks.txt: escaped quotes across deltas") {
        check_response(
            decode_stream(stream_wire("anthropic-issue-11719-quoted-tool-input.chunks.txt"))
                .response,
            {.tool_calls = {call("toolu_01Cr31vcGoeeRgi3Eo5Ds8qN", "website_update",
                                 {{"website_path", "/home/user/pace-landing"},
                                  {"tasks",
                                   {{{"description",
                                      "Today you post every run to Strava, but Strava does not "
                                      "answer the question: \"What should I do next after this "
                                      "run?\". It is a great log, but it is not adaptive."},
                                     {"type", "feature"},
                                     {"passes", false}}}}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(912, 118),
             .model = "claude-sonnet-4-5-20250929",
             .request_id = "msg_011CdFVpY8ZSiJdMWvbXZUUC"});
    }
    SECTION("anthropic-json-tool.2.chunks.txt: text then a call") {
        check_response(decode_stream(stream_wire("anthropic-json-tool.2.chunks.txt")).response,
                       {.text = "I'll invoke the JSON response tool.",
                        .tool_calls = {call("toolu_01KFbKqPYSuAKujiL6mTfzYA", "json",
                                            {{"elements",
                                              {{{"location", "San Francisco"},
                                                {"temperature", 58},
                                                {"condition", "sunny"}}}}})},
                        .finish = FinishReason::tool_call,
                        .raw_finish = "tool_use",
                        .usage = usage(849, 47),
                        .model = "claude-haiku-4-5-20251001",
                        .request_id = "msg_01K2JbSUMYhez5RHoK9ZCj9U"});
    }
    SECTION("anthropic-web-search-with-tool.1.chunks.txt: server tool use streamed") {
        check_response(
            decode_stream(stream_wire("anthropic-web-search-with-tool.1.chunks.txt")).response,
            {.text = "I'll save the results and search for the latest news.",
             .tool_calls = {call("toolu_01SaveResults", "save_results",
                                 {{"filename", "news.txt"}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(80, 60),
             .model = "claude-sonnet-4-20250514",
             .request_id = "msg_01TestWebAndRegularTool"});
    }
    SECTION(
        "anthropic-message-start-prepopulated-content.chunks.txt: blocks inside message_start") {
        const Decoded decoded =
            decode_stream(stream_wire("anthropic-message-start-prepopulated-content.chunks.txt"));
        check_response(
            decoded.response,
            {.tool_calls = {call("toolu_followup", "lookup_customer", {{"id", "customer_123"}})},
             .finish = FinishReason::tool_call,
             .raw_finish = "tool_use",
             .usage = usage(0, 0),
             .model = "claude-sonnet-4-6",
             .request_id = "msg_prepopulated_content"});
        const auto ends = std::count_if(decoded.events.begin(), decoded.events.end(),
                                        [](const StreamEvent& event) {
                                            return event.type == StreamEvent::Type::tool_call_end;
                                        });
        CHECK(ends == 1);
    }
    SECTION("duplicate-message-start.chunks.txt: a repeated frame is ignored") {
        check_response(decode_stream(stream_wire("duplicate-message-start.chunks.txt")).response,
                       {.text = "Hello, World!",
                        .finish = FinishReason::stop,
                        .raw_finish = "end_turn",
                        .usage = usage(17, 227),
                        .model = "claude-3-haiku-20240307",
                        .request_id = "msg_dup"});
        check_response(
            decode_stream(stream_wire("issue-18331-duplicate-message-start.chunks.txt")).response,
            {.text = "ok",
             .finish = FinishReason::stop,
             .raw_finish = "end_turn",
             .usage = usage(99, 2),
             .model = "claude-sonnet-4-20250514",
             .request_id = "msg_duplicate"});
    }
    SECTION("issue-18331-sequential-messages.chunks.txt: the first message only") {
        check_response(
            decode_stream(stream_wire("issue-18331-sequential-messages.chunks.txt")).response,
            {.text = "first",
             .finish = FinishReason::stop,
             .raw_finish = "end_turn",
             .usage = usage(10, 2),
             .model = "claude-sonnet-4-20250514",
             .request_id = "msg_first"});
    }
    SECTION("spliced generations are a truncated stream, before the second one shows") {
        const std::string wire = stream_wire("issue-18331-spliced-message-start.chunks.txt");
        auto decoder = provider().stream_decoder({});
        std::vector<StreamEvent> events;
        try {
            decoder->feed(wire, events);
            FAIL("no error");
        } catch (const ullm::StreamTruncatedError& error) {
            CHECK(error.retryable());
            CHECK(error.message().find("msg_first") != std::string::npos);
            CHECK(error.message().find("msg_second") != std::string::npos);
        }
        for (const auto& event : events) {
            CHECK(event.type != StreamEvent::Type::done);
            CHECK(event.tool_call_id != "toolu_second");
            CHECK(event.delta.find("second thinking") == std::string::npos);
        }
    }
    SECTION("tool_use_response.txt: only once its last event is terminated") {
        const std::string wire = read_fixture("anthropic-sdk-python/tool_use_response.txt");
        CHECK(outcome([&] { (void)decode_stream(wire); }) == "stream_truncated");
        check_response(decode_stream(wire + "\n\n").response,
                       {.text = "I'll check the current weather in Paris for you.",
                        .tool_calls = {call("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather",
                                            {{"location", "Paris"}})},
                        .finish = FinishReason::tool_call,
                        .raw_finish = "tool_use",
                        .usage = usage(377, 65),
                        .model = "claude-sonnet-4-20250514",
                        .request_id = "msg_019Q1hrJbZG26Fb9BQhrkHEr"});
    }
}

// ---------------------------------------------------------------------------------------------
// Properties

TEST_CASE("anthropic conformance: a body and its stream decode to the same response",
          "[anthropic][fixtures]") {
    std::vector<std::pair<std::string, json>> messages;
    for (const auto& file : ullm::test::fixture_files("anthropic", ".json")) {
        const json value = json::parse(ullm::test::read_file(file));
        const std::string name = file.filename().string();
        const auto add = [&](const json& body, const std::string& label) {
            if (body.is_object() && body.value("type", "") == "message")
                messages.emplace_back(label, body);
        };
        add(value, name);
        if (value.is_object() && value.contains("response"))
            add(value["response"]["body"], name + "/response");
        if (value.is_array()) {
            for (std::size_t i = 0; i < value.size(); ++i) {
                const json& entry = value[i];
                if (entry.is_string()) {
                    add(json::parse(entry.get<std::string>(), nullptr, false),
                        name + "#" + std::to_string(i));
                } else if (entry.is_object() && entry.contains("response")) {
                    add(entry["response"]["body"], name + "#" + std::to_string(i));
                }
            }
        }
    }
    REQUIRE(messages.size() >= 80);
    const ChatRequest request{.model = "claude-test-model"};
    for (const auto& [label, message] : messages) {
        INFO(label);
        const ChatResponse body = decode_body(message.dump(), 200, {}, request);
        const std::string wire = stream_from_message(message);
        const Decoded streamed = decode_stream(wire, 97, request);
        CHECK(same_response(body, streamed.response));
        // The deltas add up to the final text and reasoning.
        std::string text;
        std::string reasoning;
        for (const auto& event : streamed.events) {
            if (event.type == StreamEvent::Type::text_delta) text += event.delta;
            if (event.type == StreamEvent::Type::reasoning_delta) reasoning += event.delta;
        }
        CHECK(text == body.text);
        CHECK(reasoning == body.reasoning_text);
    }
}

TEST_CASE("anthropic conformance: any chunking of a recorded stream gives the same events",
          "[anthropic][fixtures]") {
    std::vector<std::pair<std::string, std::string>> wires;
    for (const auto& file : ullm::test::fixture_files("anthropic", ".chunks.txt")) {
        const std::string name =
            file.lexically_relative(ullm::test::fixtures_dir() / "anthropic").generic_string();
        wires.emplace_back(name, stream_wire(name));
    }
    for (const std::string_view suffix : {".txt", ".sse"}) {
        for (const auto& file :
             ullm::test::fixture_files("anthropic/anthropic-sdk-python", suffix)) {
            std::string text = ullm::test::read_file(file);
            if (!ullm::test::looks_like_sse_wire(text)) continue;
            if (lacks_final_blank_line(text)) text += "\n\n";
            wires.emplace_back(file.filename().string(), std::move(text));
        }
    }
    REQUIRE(wires.size() >= 70);
    std::size_t splits = 0;
    for (const auto& entry : wires) {
        // Named references rather than structured bindings: lambdas capture them below.
        const std::string& name = entry.first;
        const std::string& wire = entry.second;
        INFO(name);
        std::vector<StreamEvent> whole;
        const std::string expected = events_split_at(wire, wire.size(), whole);
        // One byte at a time.
        {
            std::vector<StreamEvent> bytewise;
            const std::string result = outcome([&] {
                auto decoder = provider().stream_decoder({});
                for (std::size_t i = 0; i < wire.size(); ++i) {
                    decoder->feed(std::string_view(wire).substr(i, 1), bytewise);
                }
                decoder->finish(bytewise);
            });
            CHECK(result == expected);
            CHECK(same_events(whole, bytewise));
        }
        // Two pieces, split at every byte of streams up to 1000 bytes and at 10 points of larger
        // ones (JSON parsing makes this the slowest test in a debug build).
        const std::size_t step = wire.size() <= 1000 ? 1 : wire.size() / 9;
        for (std::size_t cut = 0; cut <= wire.size(); cut += step) {
            std::vector<StreamEvent> split;
            const std::string result = events_split_at(wire, cut, split);
            ++splits;
            if (result != expected || !same_events(whole, split)) {
                INFO("split at byte " << cut);
                CHECK(result == expected);
                CHECK(same_events(whole, split));
                break;
            }
        }
    }
    INFO(splits << " splits");
    CHECK(splits > 4000);
}

TEST_CASE("anthropic conformance: recorded body and stream of the same message agree",
          "[anthropic][fixtures]") {
    for (const auto& [stream_file, body_file] :
         {std::pair<std::string, std::string>{"anthropic-web-search-with-tool.1.chunks.txt",
                                              "anthropic-web-search-with-tool.1.json"},
          std::pair<std::string, std::string>{"anthropic-advisor-stop-reasons.chunks.txt",
                                              "anthropic-advisor-stop-reasons.json"}}) {
        INFO(stream_file);
        const ChatResponse body = decode_body(read_fixture(body_file));
        const ChatResponse streamed = decode_stream(stream_wire(stream_file)).response;
        CHECK(streamed.message.parts == body.message.parts);
        CHECK(streamed.tool_calls == body.tool_calls);
        CHECK(streamed.finish_reason == body.finish_reason);
        CHECK(streamed.usage == body.usage);
        CHECK(streamed.model == body.model);
        CHECK(streamed.request_id == body.request_id);
        REQUIRE(streamed.message.replay.has_value());
        REQUIRE(body.message.replay.has_value());
        CHECK(streamed.message.replay->data["content"].size() ==
              body.message.replay->data["content"].size());
    }
}

}  // namespace anthropic_conformance_test
