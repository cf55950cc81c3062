// Replays the recorded Gemini traffic in ../shared/fixtures/gemini through the adapter.

#include <ullm/core/error.hpp>
#include <ullm/providers/gemini.hpp>

#include <algorithm>
#include <optional>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/fixtures.hpp"

namespace gemini_conformance_test {

using ullm::json;
namespace fs = std::filesystem;

using ullm::test::error_code_of;

namespace {

ullm::ChatRequest request_for(std::string model = "gemini-3-pro-preview") {
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

fs::path fixture(const std::string& relative) {
    return ullm::test::fixtures_dir() / "gemini" / relative;
}

bool is_stream_file(const fs::path& path) {
    const std::string name = path.filename().string();
    return name.size() > 11 && name.substr(name.size() - 11) == ".chunks.txt";
}

std::string wire_of(const fs::path& path) {
    std::string text = ullm::test::read_file(path);
    if (ullm::test::looks_like_sse_wire(text)) return text;
    return ullm::test::frame_chunks_as_sse(text, ullm::test::Framing::data_only);
}

json response_json(const ullm::ChatResponse& response) {
    json calls = json::array();
    for (const auto& call : response.tool_calls)
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
    return {{"message", ullm::message_to_json(response.message, true)},
            {"text", response.text},
            {"reasoning", response.reasoning_text},
            {"tool_calls", calls},
            {"finish", ullm::to_string(response.finish_reason)},
            {"raw_finish", response.raw_finish_reason},
            {"usage", ullm::usage_to_json(response.usage)},
            {"model", response.model},
            {"provider", response.provider},
            {"request_id", response.request_id}};
}

json event_json(const ullm::StreamEvent& event) {
    json out = {{"type", ullm::to_string(event.type)},
                {"delta", event.delta},
                {"id", event.tool_call_id},
                {"name", event.tool_name}};
    if (event.tool_call) out["call"] = ullm::part_to_json(ullm::Part{*event.tool_call});
    if (event.usage) out["usage"] = ullm::usage_to_json(*event.usage);
    if (event.response) out["response"] = response_json(*event.response);
    return out;
}

json events_json(const std::vector<ullm::StreamEvent>& events) {
    json out = json::array();
    for (const auto& event : events) out.push_back(event_json(event));
    return out;
}

// Feeds `wire` in pieces of `chunk` bytes (the first cut at `first` when set).
std::vector<ullm::StreamEvent> stream_events(const ullm::Provider& provider, std::string_view wire,
                                             std::size_t chunk,
                                             const ullm::ChatRequest& request = request_for(),
                                             std::optional<std::size_t> first = std::nullopt) {
    auto decoder = provider.stream_decoder(request);
    std::vector<ullm::StreamEvent> events;
    std::size_t at = 0;
    if (first) {
        decoder->feed(wire.substr(0, *first), events);
        at = *first;
    }
    for (; at < wire.size(); at += chunk) decoder->feed(wire.substr(at, chunk), events);
    decoder->finish(events);
    return events;
}

ullm::ChatResponse decode_stream(const ullm::Provider& provider, std::string_view wire,
                                 std::size_t chunk,
                                 const ullm::ChatRequest& request = request_for()) {
    const auto events = stream_events(provider, wire, chunk, request);
    const auto done = std::count_if(events.begin(), events.end(), [](const auto& event) {
        return event.type == ullm::StreamEvent::Type::done;
    });
    REQUIRE(done == 1);
    REQUIRE(events.back().type == ullm::StreamEvent::Type::done);
    return *events.back().response;
}

struct Call {
    std::string name;
    json arguments;
    std::string id;  // the exact id when the provider gave one; empty: synthesised
};

struct Expected {
    std::string file;
    std::string pointer;  // JSON pointer of an embedded response body; empty: the whole file
    std::string text;
    std::vector<Call> calls;
    ullm::FinishReason finish = ullm::FinishReason::stop;
    std::int64_t input = 0;
    std::int64_t output = 0;
    std::int64_t reasoning = 0;
    std::string model;
    std::string request_id;
    std::string reasoning_text;  // exact visible reasoning; empty for none
};

ullm::ChatResponse decode_expected(const ullm::GeminiProvider& provider, const Expected& expected) {
    const fs::path path = fixture(expected.file);
    if (is_stream_file(path)) {
        // Small pieces so that events and JSON values straddle reads.
        return decode_stream(provider, wire_of(path), 7);
    }
    std::string body = ullm::test::read_file(path);
    if (!expected.pointer.empty())
        body = json::parse(body).at(json::json_pointer(expected.pointer)).dump();
    return provider.decode(body_response(body), request_for());
}

void check(const ullm::ChatResponse& response, const Expected& expected) {
    INFO(expected.file << expected.pointer);
    CHECK(response.text == expected.text);
    CHECK(response.reasoning_text == expected.reasoning_text);
    REQUIRE(response.tool_calls.size() == expected.calls.size());
    for (std::size_t i = 0; i < expected.calls.size(); ++i) {
        CHECK(response.tool_calls[i].name == expected.calls[i].name);
        CHECK(response.tool_calls[i].arguments == expected.calls[i].arguments);
        if (expected.calls[i].id.empty()) {
            CHECK(response.tool_calls[i].id.rfind("gemini_call_", 0) == 0);
        } else {
            CHECK(response.tool_calls[i].id == expected.calls[i].id);
        }
    }
    CHECK(response.finish_reason == expected.finish);
    CHECK(response.raw_finish_reason == "STOP");
    CHECK(response.usage.input_tokens == expected.input);
    CHECK(response.usage.output_tokens == expected.output);
    CHECK(response.usage.reasoning_tokens == expected.reasoning);
    CHECK(response.usage.cached_read_tokens == 0);
    CHECK(response.usage.cached_write_tokens == 0);
    CHECK(response.model == expected.model);
    CHECK(response.request_id == expected.request_id);
    CHECK(response.provider == "gemini");
}

const std::string strawberry_3r =
    "There are **3** \"r\"s in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.";
const json san_francisco = {{"location", "San Francisco"}};
const auto tool_call = ullm::FinishReason::tool_call;
const auto stop = ullm::FinishReason::stop;

}  // namespace

TEST_CASE("gemini: curated Gemini transcripts decode exactly", "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    const std::vector<Expected> cases = {
        {"google-text.json",
         "",
         "There are **3** r's in strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.",
         {},
         stop,
         9,
         272,
         244,
         "gemini-3-pro-preview",
         "Un6LacrVMcjUxs0PmJfWoQc"},
        {"google-text.chunks.txt",
         "",
         "There are **3** \"r\"s in strawberry.\n\nst**r**awbe**rr**y",
         {},
         stop,
         9,
         208,
         185,
         "gemini-3-pro-preview",
         "bH6LaZW8Fp_3nsEPqtaSwQ4"},
        {"google-reasoning.json",
         "",
         strawberry_3r,
         {},
         stop,
         9,
         311,
         282,
         "gemini-3-pro-preview",
         "YH6LaZT7ENmPxN8P-r2J8Aw"},
        {"google-reasoning.chunks.txt",
         "",
         strawberry_3r,
         {},
         stop,
         9,
         285,
         256,
         "gemini-3-pro-preview",
         "dX6LadKVC7SZ28oPr9yJoQs"},
        {"google-reasoning-gemini3.json",
         "",
         strawberry_3r,
         {},
         stop,
         9,
         287,
         258,
         "gemini-3-pro-preview",
         "DniLab2dFPeSxN8PpqXY4Ag"},
        {"google-reasoning-gemini3.chunks.txt",
         "",
         "There are **3** \"r\"s in strawberry.\n\nSt**r**awbe**rr**y",
         {},
         stop,
         9,
         325,
         302,
         "gemini-3-pro-preview",
         "M3iLaY-AI7zTxN8P3Piw4Qg"},
        {"google-tool-call.json",
         "",
         "",
         {{"weather", san_francisco, ""}},
         tool_call,
         29,
         908,
         893,
         "gemini-3-pro-preview",
         "m36LaZGyCLz1xs0PtNSB-QU"},
        {"google-tool-call.chunks.txt",
         "",
         "",
         {{"weather", san_francisco, ""}},
         tool_call,
         29,
         60,
         45,
         "gemini-3-pro-preview",
         "b36LacjwM668nsEP2tbsgQQ"},
        {"google-tool-call-gemini3.json",
         "",
         "",
         {{"weather", san_francisco, ""}},
         tool_call,
         29,
         1816,
         1801,
         "gemini-3-pro-preview",
         "JniLacKqGqH0xs0P0O776As"},
        {"google-tool-call-gemini3.chunks.txt",
         "",
         "",
         {{"weather", san_francisco, ""}},
         tool_call,
         29,
         819,
         804,
         "gemini-3-pro-preview",
         "QHiLaa6LBrb8vdIPoNztsAg"},
        {"google-issue-6855-zod-tool-description.json",
         "",
         "",
         {{"capture",
           {{"userInputExactlyAsIs",
             "quarterly sales for the Seattle waterfront kiosk, location code SEA-WF-042"}},
           ""}},
         tool_call,
         80,
         301,
         268,
         "gemini-2.5-flash",
         "t8tUapX6F7HTvdIP5IyrmQg"},
        {"google-strict-forced-tool-choice-any.json",
         "",
         "",
         {{"createMeeting",
           {{"startTime", "2025-05-20T10:00:00Z"}, {"title", "Project Sync"}},
           "sanitized-live-call-id"}},
         tool_call,
         61,
         1046,
         1005,
         "gemini-3-flash-preview",
         "sanitized-live-response-id"},
        {"google-strict-forced-tool-choice-validated.json",
         "",
         "You're very welcome! I'm glad I could help. Is there anything else you need "
         "assistance with today?",
         {},
         stop,
         61,
         715,
         691,
         "gemini-3-flash-preview",
         "sanitized-live-response-id"},
        {"google-code-execution-multiple-results.json",
         "",
         "The code execution resulted in the following output:\n\n```\nok\n```\n\nFollowed by "
         "an error:\n\n```python\nZeroDivisionError: division by zero\n```",
         {},
         stop,
         23 + 289,
         35,
         0,
         "gemini-3-flash-preview",
         "x7hVadT9OdKT_uMP792-mAc"},
        {"google-code-execution-issue-11485-live-single-result.json",
         "",
         "The execution of the code snippet produced the following output:\n\n```\nok\n"
         "Traceback (most recent call last):\n  File \"<string>\", line 2, in <module>\n"
         "ZeroDivisionError: division by zero\n```\n\nAs expected, the code printed `ok` and "
         "then encountered a `ZeroDivisionError` when attempting to divide 1 by 0.",
         {},
         stop,
         23 + 161,
         101,
         0,
         "gemini-3-flash-preview",
         "wI5XaoqwGdvLvdIPlsyVsAg"},
        {"google-response-schema-7689.json",
         "",
         "{\"location\":\"Paris\"}",
         {},
         stop,
         6,
         45,
         40,
         "gemini-2.5-flash",
         "0C9WatDANYSd28oPhM6D8QM"},
        {"google-thinking-level-low-success.json",
         "",
         "OK",
         {},
         stop,
         4,
         1,
         0,
         "gemini-3.7-flash",
         "CbqEapr4Jpni_uMP9fGogQk"},
        {"google-gemini-3.7-flash-thinking-levels.json",
         "/low/body",
         "Hello! How can I help you today?",
         {},
         stop,
         2,
         9,
         0,
         "gemini-3.7-flash",
         "kNiDavuDIcja_uMP8tCj-QU"},
        {"google-threshold-live.json",
         "/response/body",
         "OK.",
         {},
         stop,
         6,
         22,
         20,
         "gemini-2.5-flash",
         "Uz5OarCUA6Pj7M8P7s2m2Qw"},
        {"google-issue-16072-file-tool-result-live.json",
         "/calls/0/responseBody",
         "",
         {{"catalogSearch", json::object(), "PPik6Btt"}},
         tool_call,
         39,
         9,
         0,
         "gemini-3.1-flash-lite",
         "APhNavbZKaqfkdUP-aO76Q0"},
        {"google-issue-16072-file-tool-result-live.json",
         "/calls/1/responseBody",
         "Metadata was returned.",
         {},
         stop,
         137,
         4,
         0,
         "gemini-3.1-flash-lite",
         "AfhNataCGOHxnsEPm92Q4AY"},
        {"issue-16072-tool-result-pdf-first-response.json",
         "",
         "",
         {{"catalogSearch", json::object(), ""}},
         tool_call,
         35,
         9,
         0,
         "gemini-2.5-flash-lite",
         "mg1OavSoEO7Z7M8P7OXHmQE"},
        {"issue-16072-tool-result-pdf-second-response.json",
         "",
         "",
         {{"catalogSearch", json::object(), ""}},
         tool_call,
         138,
         9,
         0,
         "gemini-2.5-flash-lite",
         "mw1OaoHtBJGL7M8PkYqV8Qw"},
        {"issue-10781.1.chunks.txt",
         "",
         "Let me check.",
         {{"get_weather", {{"city", "San Francisco"}}, "g1bmv6il"}},
         tool_call,
         83,
         199,
         178,
         "gemini-3.1-pro-preview",
         "7uVgavK_CL7yxN8P-aGnkAY"},
        {"issue-10781.2.chunks.txt",
         "",
         "It is currently sunny and 72 degrees in San Francisco.",
         {},
         stop,
         311,
         174,
         161,
         "gemini-3.1-pro-preview",
         "8eVgavrgL4aMxN8PjpKm4A4"},
        {"issue-18073-empty-text-thought-signature.chunks.txt",
         "",
         "4",
         {},
         stop,
         15,
         53,
         52,
         "gemini-3-flash-preview",
         "vQRpaqzAPN2M9MoPxPq2uQ4"},
        {"issue-10660-image-thought-signature.chunks.txt",
         "",
         "",
         {},
         stop,
         8,
         1219 + 167,
         167,
         "gemini-3-pro-image-preview",
         "live-response-id"},
        {"google-stream-tool-call-arguments.chunks.txt",
         "",
         "",
         {{"getWeather", {{"location", "Boston"}}, ""},
          {"getWeather", {{"location", "San Francisco"}}, ""}},
         tool_call,
         26,
         23 + 132,
         132,
         "gemini-3.1-pro-preview",
         "dqHOab6xGLzWodAPkPuViA4"},
        {"google-stream-tool-call-array-arguments-missing-terminal-function-call.chunks.txt",
         "",
         "",
         {{"writeItems",
           {{"operations",
             {{{"action", "add"},
               {"description", "Fresh red apple"},
               {"itemid", "apple_001"},
               {"price", 0.5}},
              {{"action", "add"},
               {"description", "Ripe yellow banana"},
               {"itemid", "banana_001"},
               {"price", 0.3}}}}},
           ""}},
         tool_call,
         54,
         74 + 121,
         121,
         "gemini-3-flash-preview",
         "3noMaojQL_2s6tkPiO26qQ4"},
        {"google-stream-no-args-tool-call.chunks.txt",
         "",
         "",
         {{"read_theme", json::object(), ""},
          {"read_screen", {{"id", "A"}}, ""},
          {"read_screen", {{"id", "B"}}, ""},
          {"read_screen", {{"id", "C"}}, ""}},
         tool_call,
         249,
         58 + 183,
         183,
         "gemini-3-flash-preview",
         "_vr4aYiWEJnYodAPkujX0QM",
         "**Processing User Requests**\n\nI've started by understanding the user's instructions. "
         "Currently, I'm focusing on the initial steps: reading the specified theme using the "
         "appropriate tool. Next, I plan to tackle reading the screens, beginning with screen "
         "\"A,\" then proceeding with \"B\" and \"C\" in parallel as instructed.\n\n\n"},
        {"gemma-4-output-usage.chunks.txt",
         "",
         "hello",
         {},
         stop,
         6,
         77,
         76,
         "gemma-4-26b-a4b-it",
         "4HFfavXADZvkkdUP37mD6Q0",
         "*   User input: \"Reply with exactly: hello\"\n    *   Constraint: The response must be "
         "\"exactly: hello\".\n    *   Goal: Comply with the specific instruction.\n\n    *   The "
         "user wants a single word: \"hello\".\n\n    *   Input: \"Reply with exactly: hello\"\n"
         "    *   Output: \"hello\""},
    };
    REQUIRE(cases.size() >= 15);
    for (const auto& expected : cases) check(decode_expected(provider, expected), expected);
}

TEST_CASE("gemini: Vertex streamed arguments assemble nested objects and arrays",
          "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    const auto response = decode_stream(
        provider, wire_of(fixture("google-vertex-stream-tool-call-arguments-nested.1.chunks.txt")),
        13);
    REQUIRE(response.tool_calls.size() == 1);
    const auto& call = response.tool_calls[0];
    CHECK(call.name == "cookRecipe");
    const json& recipe = call.arguments.at("recipe");
    CHECK(recipe.at("name") == "Lasagna");
    REQUIRE(recipe.at("ingredients").size() == 10);
    CHECK(recipe.at("ingredients")[0] == json({{"amount", "16 oz"}, {"name", "Lasagna noodles"}}));
    CHECK(recipe.at("ingredients")[9] == json({{"amount", "1/2 tsp"}, {"name", "Pepper"}}));
    REQUIRE(recipe.at("steps").size() == 10);
    CHECK(recipe.at("steps")[0] == "Preheat oven to 375°F (190°C).");
    // Strings streamed in several pieces are joined.
    CHECK(recipe.at("steps")[1] ==
          "Cook lasagna noodles according to package directions, drain and set aside.");
    CHECK(recipe.at("steps")[4] == "In a 9x13 baking dish, spread a thin layer of meat sauce.");
    CHECK(response.finish_reason == ullm::FinishReason::tool_call);
    CHECK(response.usage.input_tokens == 31);
    CHECK(response.usage.output_tokens == 684 + 1026);
    CHECK(response.usage.reasoning_tokens == 1026);
    // The signature came on the call's first chunk and stays on that call's part.
    REQUIRE(response.message.replay);
    const json& layout = response.message.replay->data.at("parts");
    REQUIRE(layout.size() == 1);
    CHECK(layout[0].at("part") == 0);
    CHECK(layout[0].at("thoughtSignature").get<std::string>().rfind("CmIBjz1rX0", 0) == 0);
}

TEST_CASE("gemini: recorded error bodies map to the error hierarchy", "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    SECTION("429 RESOURCE_EXHAUSTED takes its delay from RetryInfo.retryDelay") {
        const auto body = ullm::test::read_file(fixture("google-429-retry-info.json"));
        try {
            (void)provider.decode(body_response(body, 429), request_for());
            FAIL("no error");
        } catch (const ullm::RateLimitError& error) {
            CHECK(error.code() == "rate_limited");
            CHECK(error.status() == 429);
            CHECK(error.retryable());
            CHECK(error.provider() == "gemini");
            CHECK(error.model() == "gemini-3-pro-preview");
            REQUIRE(error.retry_after());
            CHECK(error.retry_after()->count() == 34400);
            CHECK(error.message().find("You exceeded your current quota") != std::string::npos);
        }
    }
    SECTION("a Retry-After header wins over retryDelay") {
        auto response =
            body_response(ullm::test::read_file(fixture("google-429-retry-info.json")), 429);
        response.headers.emplace_back("retry-after", "7");
        try {
            (void)provider.decode(response, request_for());
            FAIL("no error");
        } catch (const ullm::RateLimitError& error) {
            REQUIRE(error.retry_after());
            CHECK(error.retry_after()->count() == 7000);
        }
    }
    SECTION("the 429 body inside a 200 response still maps by its code") {
        const auto body = ullm::test::read_file(fixture("google-429-retry-info.json"));
        CHECK(error_code_of([&] { (void)provider.decode(body_response(body), request_for()); }) ==
              "rate_limited");
    }
    SECTION("400 INVALID_ARGUMENT is an invalid request") {
        for (const char* file :
             {"issue-8943-gemini-2.5-flash-error.json",
              "issue-8943-gemini-2.5-flash-lite-error.json", "issue-8943-gemini-2.5-pro-error.json",
              "google-thinking-level-minimal-unsupported.json",
              "google-embedding-batch-limit-error.json"}) {
            INFO(file);
            const auto body = ullm::test::read_file(fixture(file));
            try {
                (void)provider.decode(body_response(body, 400), request_for());
                FAIL("no error");
            } catch (const ullm::ProviderError& error) {
                CHECK(error.code() == "invalid_request");
                CHECK(error.status() == 400);
                CHECK_FALSE(error.retryable());
                CHECK(error.message().find("INVALID_ARGUMENT") != std::string::npos);
            }
        }
    }
    SECTION("embedded error bodies") {
        const json levels = json::parse(
            ullm::test::read_file(fixture("google-gemini-3.7-flash-thinking-levels.json")));
        CHECK(error_code_of([&] {
                  (void)provider.decode(body_response(levels.at("minimal").at("body").dump(),
                                                      levels.at("minimal").at("status").get<int>()),
                                        request_for());
              }) == "invalid_request");
        const json batch = json::parse(
            ullm::test::read_file(fixture("issue-16101-google-batch-embed-150-error.json")));
        CHECK(error_code_of([&] {
                  (void)provider.decode(
                      body_response(batch.at("body").dump(), batch.at("status").get<int>()),
                      request_for());
              }) == "invalid_request");
    }
}

TEST_CASE("gemini: every Gemini fixture decodes or fails cleanly with the right code",
          "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    std::size_t decoded_bodies = 0;
    std::size_t decoded_streams = 0;
    std::size_t errors = 0;
    std::size_t foreign = 0;
    for (const auto& path : ullm::test::fixture_files("gemini", "")) {
        INFO(path.string());
        const bool interactions = path.string().find("interactions-api") != std::string::npos;
        if (is_stream_file(path)) {
            const std::string wire = wire_of(path);
            const std::string code = error_code_of([&] {
                const auto response = decode_stream(provider, wire, 64);
                CHECK((!response.text.empty() || !response.tool_calls.empty() ||
                       response.message.replay.has_value()));
            });
            if (interactions) {
                // Another API's stream: refused at its first chunk, not crashed on.
                CHECK(code == "invalid_provider_response");
                ++foreign;
            } else {
                CHECK(code == "no error");
                ++decoded_streams;
            }
            continue;
        }
        if (path.extension() != ".json") continue;
        const std::string body = ullm::test::read_file(path);
        const json value = json::parse(body);
        if (value.contains("error")) {
            const int status = value["error"].value("code", 500);
            const std::string code = error_code_of(
                [&] { (void)provider.decode(body_response(body, status), request_for()); });
            CHECK(code == (status == 429 ? "rate_limited" : "invalid_request"));
            ++errors;
        } else if (value.contains("candidates")) {
            const std::string code =
                error_code_of([&] { (void)provider.decode(body_response(body), request_for()); });
            CHECK(code == "no error");
            ++decoded_bodies;
        } else {
            // Recordings that wrap bodies, other Google APIs, notes: not a response body.
            const std::string code =
                error_code_of([&] { (void)provider.decode(body_response(body), request_for()); });
            CHECK(code == "invalid_provider_response");
            ++foreign;
        }
    }
    CHECK(decoded_bodies >= 15);
    CHECK(decoded_streams >= 14);
    CHECK(errors >= 6);
    CHECK(foreign >= 20);
}

TEST_CASE("gemini: splitting a recorded stream anywhere gives identical events",
          "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    for (const auto& path : ullm::test::fixture_files("gemini", ".chunks.txt")) {
        if (path.string().find("interactions-api") != std::string::npos) continue;
        INFO(path.string());
        const std::string wire = wire_of(path);
        const json whole = events_json(stream_events(provider, wire, wire.size()));
        // One byte at a time cuts the stream at every byte at once.
        CHECK(events_json(stream_events(provider, wire, 1)) == whole);
        // Two pieces: a sample of 150 cut points (the one-byte feed above covers them all).
        const std::size_t step = std::max<std::size_t>(1, wire.size() / 150);
        for (std::size_t cut = 1; cut < wire.size(); cut += step) {
            const json split =
                events_json(stream_events(provider, wire, wire.size(), request_for(), cut));
            if (split != whole) {
                FAIL_CHECK("events differ when cut at byte " << cut);
                break;
            }
        }
    }
}

TEST_CASE("gemini: the JSON-array stream form decodes like SSE", "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    for (const char* file : {"google-text.chunks.txt", "google-stream-no-args-tool-call.chunks.txt",
                             "issue-10781.1.chunks.txt", "gemma-4-output-usage.chunks.txt"}) {
        INFO(file);
        const std::string text = ullm::test::read_file(fixture(file));
        std::string array = "[";
        for (const auto line : ullm::test::chunk_lines(text)) {
            if (line.empty()) continue;
            if (array.size() > 1) array += ",\r\n";
            array += line;
        }
        array += "]";
        const json sse = events_json(stream_events(provider, wire_of(fixture(file)), 5));
        CHECK(events_json(stream_events(provider, array, 5)) == sse);
        // The same array as a whole body decodes to the stream's final response.
        CHECK(response_json(provider.decode(body_response(array), request_for())) ==
              sse.back().at("response"));
        CHECK(events_json(stream_events(provider, "\xEF\xBB\xBF\n " + array, 1)) == sse);
    }
}

TEST_CASE("gemini: recorded stream and body forms of a response agree", "[gemini][conformance]") {
    const ullm::GeminiProvider provider;
    for (const char* name : {"google-text", "google-reasoning", "google-reasoning-gemini3",
                             "google-tool-call", "google-tool-call-gemini3"}) {
        INFO(name);
        const auto body = provider.decode(
            body_response(ullm::test::read_file(fixture(std::string(name) + ".json"))),
            request_for());
        const auto streamed =
            decode_stream(provider, wire_of(fixture(std::string(name) + ".chunks.txt")), 9);
        CHECK(streamed.finish_reason == body.finish_reason);
        CHECK(streamed.model == body.model);
        REQUIRE(streamed.tool_calls.size() == body.tool_calls.size());
        for (std::size_t i = 0; i < body.tool_calls.size(); ++i) {
            CHECK(streamed.tool_calls[i].name == body.tool_calls[i].name);
            CHECK(streamed.tool_calls[i].arguments == body.tool_calls[i].arguments);
        }
        CHECK(streamed.message.parts.size() == body.message.parts.size());
        // The signature ends up on the same part, whether it came on the part itself or in a
        // later empty-text chunk.
        REQUIRE(body.message.replay);
        REQUIRE(streamed.message.replay);
        const json& a = body.message.replay->data.at("parts");
        const json& b = streamed.message.replay->data.at("parts");
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            CHECK(a[i].at("part") == b[i].at("part"));
            CHECK(a[i].contains("thoughtSignature") == b[i].contains("thoughtSignature"));
        }
    }
}

}  // namespace gemini_conformance_test
