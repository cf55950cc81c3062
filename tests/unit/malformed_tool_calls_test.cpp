// Malformed tool-call streams and responses fail the round with invalid_provider_response,
// run no tool and commit nothing: in the client, whatever the provider, and in the decoders
// that used to repair such streams into calls named "".

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"

namespace malformed_tool_calls_test {

using ullm::test::error_code_of;
using Type = ullm::StreamEvent::Type;

namespace {

ullm::StreamEvent start(std::string id, std::string name) {
    ullm::StreamEvent event;
    event.type = Type::tool_call_start;
    event.tool_call_id = std::move(id);
    event.tool_name = std::move(name);
    return event;
}

ullm::StreamEvent delta(std::string id, std::string text) {
    ullm::StreamEvent event;
    event.type = Type::tool_call_delta;
    event.tool_call_id = std::move(id);
    event.delta = std::move(text);
    return event;
}

ullm::StreamEvent end(std::string id, std::string name) {
    ullm::StreamEvent event;
    event.type = Type::tool_call_end;
    event.tool_call_id = id;
    event.tool_name = name;
    event.tool_call = ullm::ToolCallPart{std::move(id), std::move(name), ullm::json::object()};
    return event;
}

ullm::StreamEvent result(std::string id) {
    ullm::StreamEvent event;
    event.type = Type::tool_call_result;
    event.tool_call_id = id;
    event.tool_result = ullm::ToolResultPart{std::move(id), "probe", "ran", false};
    return event;
}

// A done event whose response holds `calls`.
ullm::StreamEvent done_with(const std::vector<ullm::ToolCallPart>& calls) {
    ullm::StreamEvent event;
    event.type = Type::done;
    event.response = ullm::test::parallel_calls(calls);
    return event;
}

struct Case {
    const char* label;
    std::vector<ullm::StreamEvent> events;
};

std::vector<Case> broken_streams() {
    const ullm::ToolCallPart call{"c1", "probe", ullm::json::object()};
    return {
        {"arguments for an unknown call id",
         {delta("c9", "{}"), start("c1", "probe"), end("c1", "probe"), done_with({call})}},
        {"a duplicate start",
         {start("c1", "probe"), start("c1", "probe"), end("c1", "probe"), done_with({call})}},
        {"a start and an end naming different tools",
         {start("c1", "probe"), end("c1", "other"), done_with({call})}},
        {"a provider-sent tool result",
         {start("c1", "probe"), end("c1", "probe"), result("c1"), done_with({call})}},
        {"a started call that never ends", {start("c1", "probe"), done_with({})}},
        {"a call in the response that was never streamed", {done_with({call})}},
        {"a start without a name", {start("c1", ""), end("c1", ""), done_with({})}},
        {"a nameless call in the response",
         {start("c1", "probe"), end("c1", "probe"),
          done_with({{"c1", "probe", ullm::json::object()}, {"c2", "", ullm::json::object()}})}},
    };
}

// The error code of decoding `wire` in one write with `provider`'s stream decoder, for a
// request to `model`; the events decoded before the error are left in `events`.
std::string stream_error(const ullm::Provider& provider, const std::string& model,
                         const std::string& wire, std::vector<ullm::StreamEvent>& events) {
    ullm::ChatRequest request;
    request.model = model;
    auto decoder = provider.stream_decoder(request);
    return error_code_of([&] {
        decoder->feed(wire, events);
        decoder->finish(events);
    });
}

}  // namespace

TEST_CASE("a malformed tool-call stream fails the round, runs no tool, commits nothing",
          "[conversation][malformed]") {
    for (auto& broken : broken_streams()) {
        INFO(broken.label);
        ullm::test::ScriptedClient scripted;
        std::atomic<int> runs{0};
        auto probe = ullm::test::tool_running("probe", [&](const ullm::json&, ullm::ToolContext&) {
            ++runs;
            return ullm::json("ran");
        });
        auto conversation = scripted.client.conversation({.tools = {probe}});
        scripted.provider->push_events(broken.events);
        CHECK(error_code_of([&] {
                  auto stream = conversation.send_stream("go");
                  for (const auto& event : stream) (void)event;
              }) == "invalid_provider_response");
        CHECK(runs == 0);
        CHECK(conversation.history().empty());
        // The conversation goes on: the next turn works.
        scripted.provider->push_text("fine");
        CHECK(conversation.send("again").text == "fine");
        CHECK(conversation.history().size() == 2);
    }
}

TEST_CASE("a direct stream refuses a malformed tool-call stream", "[client][malformed]") {
    for (auto& broken : broken_streams()) {
        INFO(broken.label);
        ullm::test::ScriptedClient scripted;
        scripted.provider->push_events(broken.events);
        ullm::ChatRequest request;
        request.messages = {ullm::Message::user("go")};
        bool saw_result = false;
        CHECK(error_code_of([&] {
                  auto stream = scripted.client.stream(request);
                  while (auto event = stream.next()) {
                      saw_result = saw_result || event->type == Type::tool_call_result;
                  }
              }) == "invalid_provider_response");
        CHECK_FALSE(saw_result);
    }
}

TEST_CASE("a response with a nameless, id-less or doubled call is refused by the client",
          "[client][malformed]") {
    const std::vector<std::vector<ullm::ToolCallPart>> broken = {
        {{"c1", "", ullm::json::object()}},
        {{"", "probe", ullm::json::object()}},
        {{"c1", "probe", ullm::json::object()}, {"c1", "probe", ullm::json::object()}},
    };
    for (const auto& calls : broken) {
        ullm::test::ScriptedClient scripted;
        std::atomic<int> runs{0};
        auto probe = ullm::test::tool_running("probe", [&](const ullm::json&, ullm::ToolContext&) {
            ++runs;
            return ullm::json("ran");
        });
        auto conversation = scripted.client.conversation({.tools = {probe}});
        scripted.provider->push(ullm::test::parallel_calls(calls));
        CHECK(error_code_of([&] { (void)conversation.send("go"); }) == "invalid_provider_response");
        CHECK(runs == 0);
        CHECK(conversation.history().empty());
    }
}

TEST_CASE("chat completions: arguments for a call that never gets a name are refused",
          "[openai_chat][malformed]") {
    const ullm::OpenAiChatProvider provider({.api_key = "k"});
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    const std::string wire =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
        "\"function\":{\"arguments\":\"{\\\"a\\\":1}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n";
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(provider, "gpt-4o", wire, events) == "invalid_provider_response");
    for (const auto& event : events) CHECK(event.type != Type::tool_call_delta);

    // Arguments that arrive before the name are held and sent once the call starts; a missing
    // id is made from the index (the documented repair for servers that send none).
    const std::string late_name =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
        "\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
        "\"function\":{\"name\":\"probe\",\"arguments\":\"1}\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n";
    auto second = provider.stream_decoder(request);
    std::vector<ullm::StreamEvent> out;
    second->feed(late_name, out);
    second->finish(out);
    std::vector<std::string> seen;
    for (const auto& event : out) {
        if (event.type == Type::tool_call_start) seen.push_back("start " + event.tool_call_id);
        if (event.type == Type::tool_call_delta) seen.push_back("delta " + event.delta);
        if (event.type == Type::tool_call_end) seen.push_back("end " + event.tool_call->name);
    }
    CHECK(seen == std::vector<std::string>{"start call_0", "delta {\"a\":1}", "end probe"});
    CHECK(out.back().response->tool_calls.at(0).arguments == ullm::json{{"a", 1}});
}

TEST_CASE("responses: an arguments delta for an item never added is refused",
          "[openai_responses][malformed]") {
    const ullm::OpenAiResponsesProvider provider({.api_key = "k"});
    ullm::ChatRequest request;
    request.model = "gpt-5-mini";
    const std::string wire =
        "data: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\n"
        "data: {\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,"
        "\"item_id\":\"fc_1\",\"delta\":\"{}\"}\n\n";
    auto decoder = provider.stream_decoder(request);
    std::vector<ullm::StreamEvent> events;
    CHECK(error_code_of([&] { decoder->feed(wire, events); }) == "invalid_provider_response");
    CHECK(events.empty());
}

TEST_CASE("responses: a hostile output_index is refused, not overflowed",
          "[openai_responses][malformed]") {
    const ullm::OpenAiResponsesProvider provider({.api_key = "k"});
    ullm::ChatRequest request;
    request.model = "gpt-5-mini";
    for (const std::string index :
         {"9223372036854775807", "18446744073709551615", "65537", "4294967296"}) {
        INFO(index);
        const std::string wire =
            "data: {\"type\":\"response.output_text.delta\",\"output_index\":" + index +
            ",\"content_index\":9223372036854775807,\"delta\":\"hi\"}\n\n";
        auto decoder = provider.stream_decoder(request);
        std::vector<ullm::StreamEvent> events;
        CHECK(error_code_of([&] { decoder->feed(wire, events); }) == "invalid_provider_response");
    }
    // A content_index past the parts so far is taken as the next part, never as a huge array.
    const std::string wire =
        "data: {\"type\":\"response.output_text.delta\",\"output_index\":0,"
        "\"content_index\":9223372036854775807,\"delta\":\"hi\"}\n\n"
        "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"status\":"
        "\"completed\"}}\n\n";
    auto decoder = provider.stream_decoder(request);
    std::vector<ullm::StreamEvent> events;
    decoder->feed(wire, events);
    decoder->finish(events);
    REQUIRE(events.back().type == Type::done);
    CHECK(events.back().response->text == "hi");
}

TEST_CASE("anthropic: a tool_use block that repeats a call id is refused at its start",
          "[anthropic][malformed]") {
    const ullm::AnthropicProvider provider({.api_key = "k"});
    const auto tool_use = [](int index, const std::string& name) {
        return "data: {\"type\":\"content_block_start\",\"index\":" + std::to_string(index) +
               ",\"content_block\":{\"type\":\"tool_use\",\"id\":\"tu_1\",\"name\":\"" + name +
               "\",\"input\":{}}}\n\n"
               "data: {\"type\":\"content_block_stop\",\"index\":" +
               std::to_string(index) + "}\n\n";
    };
    const std::string wire =
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\","
        "\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],"
        "\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
        tool_use(0, "a") + tool_use(1, "b") +
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
        "\"usage\":{\"output_tokens\":3}}\n\n"
        "data: {\"type\":\"message_stop\"}\n\n";
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(provider, "claude-sonnet-4-5", wire, events) == "invalid_provider_response");
    int starts = 0;
    for (const auto& event : events) {
        if (event.type == Type::tool_call_start) ++starts;
        CHECK(event.type != Type::done);
    }
    CHECK(starts == 1);
}

TEST_CASE("responses: a terminal response that drops or renames a streamed call is refused",
          "[openai_responses][malformed]") {
    const ullm::OpenAiResponsesProvider provider({.api_key = "k"});
    const std::string streamed =
        "data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":"
        "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_a\",\"name\":\"weather\","
        "\"arguments\":\"\"}}\n\n"
        "data: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":"
        "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_a\",\"name\":\"weather\","
        "\"arguments\":\"{}\"}}\n\n";
    const auto completed = [](const std::string& call_id, const std::string& name) {
        return "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\","
               "\"status\":\"completed\",\"model\":\"gpt-5-mini\",\"output\":[{\"type\":"
               "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"" +
               call_id + "\",\"name\":\"" + name + "\",\"arguments\":\"{}\"}]}}\n\n";
    };
    // Another call id, then another tool.
    for (const std::string& terminal :
         {completed("call_b", "weather"), completed("call_a", "time")}) {
        INFO(terminal);
        std::vector<ullm::StreamEvent> events;
        CHECK(stream_error(provider, "gpt-5-mini", streamed + terminal, events) ==
              "invalid_provider_response");
        for (const auto& event : events) {
            CHECK(event.type != Type::done);
            if (event.type == Type::tool_call_start) CHECK(event.tool_call_id == "call_a");
        }
    }

    // The same call in the terminal response is the ordinary case.
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(provider, "gpt-5-mini", streamed + completed("call_a", "weather"), events) ==
          "no error");
    REQUIRE(events.back().type == Type::done);
    CHECK(events.back().response->tool_calls.at(0).id == "call_a");
}

TEST_CASE("responses: two function_call items with one call id are refused",
          "[openai_responses][malformed]") {
    const ullm::OpenAiResponsesProvider provider({.api_key = "k"});
    const auto added = [](int index) {
        return "data: {\"type\":\"response.output_item.added\",\"output_index\":" +
               std::to_string(index) +
               ",\"item\":{\"type\":\"function_call\",\"call_id\":\"call_a\",\"name\":"
               "\"weather\",\"arguments\":\"\"}}\n\n";
    };
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(provider, "gpt-5-mini", added(0) + added(1), events) ==
          "invalid_provider_response");
    CHECK(events.size() == 1);
}

TEST_CASE("chat completions: a call is refused when a later chunk gives it another id or name",
          "[openai_chat][malformed]") {
    const ullm::OpenAiChatProvider provider({.api_key = "k"});
    const auto chunk = [](const std::string& call) {
        return "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[" + call + "]}}]}\n\n";
    };
    const std::string first = chunk(R"({"index":0,"id":"c1","function":{"name":"probe"}})");
    const std::string end =
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n";
    for (const std::string later :
         {R"({"index":0,"id":"c2","function":{"arguments":"{}"}})",
          R"({"index":0,"function":{"name":"other","arguments":"{}"}})"}) {
        INFO(later);
        std::vector<ullm::StreamEvent> events;
        CHECK(stream_error(provider, "gpt-4o", first + chunk(later) + end, events) ==
              "invalid_provider_response");
        for (const auto& event : events) CHECK(event.type == Type::tool_call_start);
    }

    // The same id and name again change nothing.
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(provider, "gpt-4o",
                       first +
                           chunk(R"({"index":0,"id":"c1","function":{"name":"probe",)"
                                 R"("arguments":"{}"}})") +
                           end,
                       events) == "no error");
    REQUIRE(events.back().type == Type::done);
    CHECK(events.back().response->tool_calls ==
          std::vector<ullm::ToolCallPart>{{"c1", "probe", ullm::json::object()}});
}

TEST_CASE(
    "responses: a function_call item done or added again under another id, or with no "
    "name, is refused",
    "[openai_responses][malformed]") {
    const ullm::OpenAiResponsesProvider provider({.api_key = "k"});
    const auto item = [](const std::string& event, const std::string& fields) {
        return "data: {\"type\":\"response.output_item." + event +
               "\",\"output_index\":0,\"item\":{\"type\":\"function_call\"" + fields +
               ",\"arguments\":\"{}\"}}\n\n";
    };
    const std::string added = item("added", R"(,"call_id":"call_a","name":"weather")");
    for (const std::string& wire :
         {added + item("done", R"(,"call_id":"call_b","name":"weather")"),
          added + item("done", R"(,"call_id":"call_a","name":"time")"),
          added + item("added", R"(,"call_id":"call_b","name":"weather")"),
          added + item("added", R"(,"id":"fc_1","name":"weather")"), item("done", ""),
          item("added", R"(,"call_id":"call_a")")}) {
        INFO(wire);
        std::vector<ullm::StreamEvent> events;
        CHECK(stream_error(provider, "gpt-5-mini", wire, events) == "invalid_provider_response");
        for (const auto& event : events) {
            CHECK(event.type != Type::tool_call_end);
            CHECK(event.tool_name != "");
        }
    }
}

TEST_CASE("chat completions and responses: two calls under one id are refused",
          "[openai_chat][openai_responses][malformed]") {
    const ullm::OpenAiChatProvider chat({.api_key = "k"});
    const auto chunk = [](int index) {
        return "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":" +
               std::to_string(index) +
               ",\"id\":\"c1\",\"function\":{\"name\":\"probe\",\"arguments\":\"{}\"}}]}}]}\n\n";
    };
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(chat, "gpt-4o", chunk(0) + chunk(1), events) == "invalid_provider_response");
    CHECK(events.size() == 2);  // the first call's start and arguments

    // A terminal response that holds one call twice (here, nothing was streamed before it).
    const ullm::OpenAiResponsesProvider responses({.api_key = "k"});
    const std::string call =
        R"({"type":"function_call","call_id":"call_a","name":"weather","arguments":"{}"})";
    const std::string terminal =
        "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":"
        "\"completed\",\"output\":[" +
        call + "," + call + "]}}\n\n";
    events.clear();
    CHECK(stream_error(responses, "gpt-5-mini", terminal, events) == "invalid_provider_response");
    CHECK(events.empty());
}

TEST_CASE("responses: a terminal response whose call has other arguments than streamed is refused",
          "[openai_responses][malformed]") {
    const ullm::OpenAiResponsesProvider provider({.api_key = "k"});
    const auto item = [](const std::string& event, const std::string& arguments) {
        return "data: {\"type\":\"response.output_item." + event +
               "\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"call_id\":\"call_a\","
               "\"name\":\"weather\",\"arguments\":\"" +
               arguments + "\"}}\n\n";
    };
    const std::string terminal =
        R"(data: {"type":"response.completed","response":{"id":"resp_1","status":"completed",)"
        R"("output":[{"type":"function_call","call_id":"call_a","name":"weather",)"
        R"("arguments":"{\"unit\":\"f\"}"}]}})"
        "\n\n";
    std::vector<ullm::StreamEvent> events;
    CHECK(stream_error(provider, "gpt-5-mini",
                       item("added", "") + item("done", R"({\"unit\":\"c\"})") + terminal,
                       events) == "invalid_provider_response");
    for (const auto& event : events) CHECK(event.type != Type::done);
}

}  // namespace malformed_tool_calls_test
