// ullm demo: a conversation with a tool, end to end through the real libcurl transport and a
// SQLite session store, with no network and no API key.
//
// An in-process HTTP server on 127.0.0.1 plays an OpenAI-compatible model. The first turn is
// streamed: the model calls the `lookup_weather` tool, the conversation validates the
// arguments, runs the tool and sends the result back, and the model streams its answer. The
// second turn is a plain send() that sees the first. The session is persisted after every
// turn, restored by its id from the store, and exported as Markdown.

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool_registry.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "support/test_server.hpp"

namespace {

// What the scripted model sends: Chat Completions chunks as a real server frames them.
std::string sse(const std::vector<std::string>& payloads) {
    std::string wire;
    for (const auto& payload : payloads) wire += "data: " + payload + "\n\n";
    return wire + "data: [DONE]\n\n";
}

const std::string tool_call_round = sse({
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check. "}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup_weather","arguments":""}}]}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Ber"}}]}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"lin\"}"}}]}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
    R"({"model":"demo-model","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":17}})",
});

const std::string answer_round = sse({
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"content":"It is sunny in Berlin"}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"content":", 24 °C."}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})",
    R"({"model":"demo-model","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":64}}})",
});

void remove_database(const std::filesystem::path& path) {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm"}) {
        std::filesystem::remove(path.string() + suffix, ignored);
    }
}

}  // namespace

int main() {
    const auto database = std::filesystem::temp_directory_path() /
                          ("ullm-demo-" + std::to_string(::getpid()) + ".db");
    try {
        ullm::test::TestServer server;
        server.enqueue(ullm::test::ScriptedResponse::sse(tool_call_round, 24));
        server.enqueue(ullm::test::ScriptedResponse::sse(answer_round, 16));
        server.enqueue(ullm::test::ScriptedResponse::json(
            200,
            R"({"model":"demo-model","choices":[{"index":0,"message":{"role":"assistant","content":"Tomorrow stays sunny in Berlin."},"finish_reason":"stop"}],"usage":{"prompt_tokens":160,"completion_tokens":7}})"));

        const auto weather = ullm::define_tool(
            {.name = "lookup_weather",
             .description = "Look up the current weather by city name",
             .parameters = ullm::schema::object(
                 {{"city", ullm::schema::string("The city to look up", {.min_length = 1})},
                  {"unit", ullm::schema::enumeration({"c", "f"}, "Temperature unit")}},
                 {"city"}),
             .execute = [](const ullm::json& args, ullm::ToolContext&) -> ullm::json {
                 return {{"city", args["city"]}, {"forecast", "Sunny"}, {"temperature_c", 24}};
             }});

        auto local = std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
            .base_url = server.base_url() + "/v1", .provider_name = "local"});
        const ullm::Client client(
            {.providers = {local},
             .session_store = ullm::SqliteSessionStore::open(database.string())});
        const ullm::ConversationOptions options{.session_id = "weather-demo",
                                                .system = "You are a concise weather assistant.",
                                                .model = "local/demo-model",
                                                .tools = {weather},
                                                .max_tool_rounds = 2};
        auto conversation = client.conversation(options);

        // Turn 1, streamed: text, the tool call, the tool's result, the answer.
        fmt::print("user> What is the weather in Berlin?\nassistant> ");
        auto stream = conversation.send_stream("What is the weather in Berlin?");
        for (const auto& event : stream) {
            using Type = ullm::StreamEvent::Type;
            if (const auto* delta = event.text_delta()) {
                fmt::print("{}", *delta);
                std::fflush(stdout);
            } else if (event.type == Type::tool_call_end) {
                fmt::print("\n  [model calls {}({})]\n", event.tool_call->name,
                           event.tool_call->arguments.dump());
            } else if (event.type == Type::tool_call_result) {
                fmt::print("  [tool {} returned {}]\nassistant> ", event.tool_name,
                           event.tool_result->result.dump());
            }
        }

        // Turn 2: the model sees the first turn.
        const auto reply = conversation.send("And tomorrow?");
        fmt::print("\nuser> And tomorrow?\nassistant> {}\n", reply.text);

        // A new handle restores the session from the store by its id.
        auto restored = client.conversation(options);
        const auto totals = restored.totals();
        fmt::print(
            "\nrestored \"{}\" from SQLite: {} messages, version {}; tokens: {} in ({} cached), "
            "{} out; {} requests on {} connection\n",
            restored.id(), restored.history().size(), restored.version(), totals.input_tokens,
            totals.cached_read_tokens, totals.output_tokens, server.request_count(),
            server.connections_accepted());

        fmt::print("\n{}\n\n", restored.to_markdown());

        // clear() empties the history and persists that; the totals stay.
        restored.clear();
        fmt::print("after clear(): {} messages, {} tokens in so far, version {}\n",
                   restored.history().size(), restored.totals().input_tokens, restored.version());

        // What the model is told when its arguments break the schema.
        const ullm::ToolRegistry tools({weather});
        ullm::ToolContext context;
        const auto rejected = tools.run("lookup_weather", {{"cty", "Berlin"}}, context);
        fmt::print("invalid arguments {{\"cty\":\"Berlin\"}} -> {} ({})\n",
                   rejected.result.get<std::string>(), rejected.error_code);
        remove_database(database);
        return 0;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "demo failed: %s\n", error.what());
        remove_database(database);
        return 1;
    }
}
