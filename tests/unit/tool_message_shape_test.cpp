// A round's tool results may be stored as one tool message or as one message per call
// (the `tool_message_per_call` turn shape, what dialogs use). Both shapes are valid
// history everywhere and reach every provider as the same request.

#include <ullm/conversation/context_manager.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/scripted_client.hpp"
#include "support/shaped_conversation.hpp"

namespace tool_message_shape_test {

using ullm::json;
using ullm::Message;
using R = ullm::Role;

namespace {

ullm::Tool echo_tool() {
    return ullm::define_tool(
        {.name = "echo",
         .description = "Echoes its arguments",
         .parameters = ullm::schema::object({{"n", ullm::schema::integer()}}, {"n"}),
         .execute = [](const json& args, ullm::ToolContext&) -> json { return args; }});
}

std::vector<R> roles(const std::vector<Message>& messages) {
    std::vector<R> out;
    for (const auto& message : messages) out.push_back(message.role);
    return out;
}

// A user question, an assistant message with two calls, their results in `shape`, an answer.
std::vector<Message> round_trip(bool per_call) {
    Message calls = Message::assistant("Checking both.");
    calls.parts.emplace_back(ullm::ToolCallPart{"call_a", "echo", {{"n", 1}}});
    calls.parts.emplace_back(ullm::ToolCallPart{"call_b", "echo", {{"n", 2}}});
    const ullm::ToolResultPart a{"call_a", "echo", {{"n", 1}}, false};
    const ullm::ToolResultPart b{"call_b", "echo", "no such n", true};
    std::vector<Message> messages{Message::user("Echo 1 and 2"), calls};
    if (per_call) {
        messages.push_back(Message::tool_results({a}));
        messages.push_back(Message::tool_results({b}));
    } else {
        messages.push_back(Message::tool_results({a, b}));
    }
    messages.push_back(Message::assistant("Done."));
    messages.push_back(Message::user("Thanks"));
    return messages;
}

}  // namespace

TEST_CASE("a tool_message_per_call shape stores each result as its own tool message, in call order",
          "[conversation]") {
    ullm::test::ScriptedClient s;
    s.provider->push(ullm::test::parallel_calls(
        {{"c1", "echo", {{"n", 1}}}, {"c2", "echo", {{"n", 2}}}, {"c3", "echo", {{"n", 3}}}}));
    s.provider->push_text("All echoed.");
    auto conversation = ullm::test::shaped_conversation(s.client, {.tools = {echo_tool()}},
                                                        {.tool_message_per_call = true});
    const auto reply = conversation.send("Echo three times");
    CHECK(reply.text == "All echoed.");
    const auto history = conversation.history();
    CHECK(roles(history) ==
          std::vector<R>{R::user, R::assistant, R::tool, R::tool, R::tool, R::assistant});
    for (int i = 0; i < 3; ++i) {
        const auto results = history[static_cast<std::size_t>(2 + i)].tool_results();
        REQUIRE(results.size() == 1);
        CHECK(results[0].tool_call_id == "c" + std::to_string(i + 1));
        CHECK(results[0].result == json{{"n", i + 1}});
    }
    CHECK(reply.messages == history);
    // The second request carried the three result messages; the snapshot restores them.
    CHECK(s.provider->requests().back().messages.size() == 5);
    const auto snapshot = ullm::parse_snapshot(conversation.serialise());
    CHECK(snapshot.messages == history);
}

TEST_CASE("tool results per call or per round reach every provider as the same request",
          "[conversation]") {
    const ullm::AnthropicProvider anthropic({.api_key = "k"});
    const ullm::GeminiProvider gemini({.api_key = "k"});
    const ullm::OpenAiChatProvider chat({.api_key = "k"});
    const ullm::OpenAiResponsesProvider responses({.api_key = "k"});
    const std::vector<std::pair<const ullm::Provider*, std::string>> providers{
        {&anthropic, "claude-sonnet-4-5"},
        {&gemini, "gemini-2.5-flash"},
        {&chat, "gpt-4o"},
        {&responses, "gpt-4o"}};
    for (const auto& [provider, model] : providers) {
        INFO(provider->name());
        ullm::ChatRequest per_round{.model = model, .messages = round_trip(false)};
        ullm::ChatRequest per_call{.model = model, .messages = round_trip(true)};
        for (const bool stream : {false, true}) {
            CHECK(json::parse(provider->encode(per_call, stream).body) ==
                  json::parse(provider->encode(per_round, stream).body));
        }
    }
}

TEST_CASE("a sliding window keeps or drops a call and all its result messages together",
          "[context_manager]") {
    auto messages = round_trip(true);
    // Two messages of room: the window may not keep a result without its call.
    ullm::SlidingWindowStrategy window({.max_messages = 3});
    const auto kept = window.trim(messages);
    CHECK(roles(kept) == std::vector<R>{R::assistant, R::user});
    ullm::SlidingWindowStrategy roomy({.max_messages = 5});
    CHECK(roles(roomy.trim(messages)) ==
          std::vector<R>{R::assistant, R::tool, R::tool, R::assistant, R::user});
}

}  // namespace tool_message_shape_test
