// Prints what the library's own work costs per conversation turn, with no network: a
// two-round tool turn against the scripted provider, serialise and restore of a 1,000-message
// conversation, and the same restore through the SQLite store.
// Usage: ullm_bench_conversation [repetitions]

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

double micros_since(Clock::time_point start, int repetitions) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / repetitions;
}

ullm::Tool weather_tool() {
    return ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather by city name",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [](const ullm::json& args, ullm::ToolContext&) -> ullm::json {
             return {{"city", args["city"]}, {"forecast", "Sunny"}, {"temperature_c", 24}};
         }});
}

// A stored snapshot of `count` messages: user questions and assistant answers of ~200
// characters, every tenth answer a tool call with its result.
std::string long_snapshot(const std::string& session_id, int count) {
    std::vector<ullm::Message> messages;
    const std::string sentence(200, 'x');
    while (static_cast<int>(messages.size()) < count) {
        const auto turn = messages.size();
        messages.push_back(ullm::Message::user("Question " + std::to_string(turn) + sentence));
        if (turn % 10 == 0 && static_cast<int>(messages.size()) + 3 <= count) {
            ullm::Message call;
            call.role = ullm::Role::assistant;
            call.parts.emplace_back(ullm::ToolCallPart{
                "call_" + std::to_string(turn), "lookup_weather", {{"city", "Berlin"}}});
            messages.push_back(std::move(call));
            messages.push_back(ullm::Message::tool_results({{"call_" + std::to_string(turn),
                                                             "lookup_weather",
                                                             {{"forecast", "Sunny"}},
                                                             false}}));
        }
        messages.push_back(ullm::Message::assistant("Answer " + std::to_string(turn) + sentence));
    }
    messages.resize(static_cast<std::size_t>(count));
    if (messages.back().role == ullm::Role::user) messages.pop_back();
    const auto now =
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    return ullm::snapshot_to_json({.session_id = session_id,
                                   .messages = std::move(messages),
                                   .created_at = now,
                                   .updated_at = now})
        .dump();
}

}  // namespace

int main(int argc, char** argv) {
    const int repetitions = argc > 1 ? std::atoi(argv[1]) : 200;
    try {
        auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
        const ullm::Client client({.default_model = "scripted/bench", .providers = {provider}});

        // A two-round tool turn: request, tool call, tool run on its own thread, request, commit.
        auto conversation = client.conversation({.tools = {weather_tool()}});
        for (int i = 0; i < repetitions; ++i) {
            provider->push_tool_call("lookup_weather", {{"city", "Berlin"}});
            provider->push_text("It is sunny in Berlin.");
        }
        auto start = Clock::now();
        for (int i = 0; i < repetitions; ++i) {
            (void)conversation.send("What is the weather in Berlin?");
            if (i % 50 == 49) conversation.clear();  // Keep the history from growing.
        }
        fmt::print("two-round tool turn (scripted provider, in memory): {:.1f} us\n",
                   micros_since(start, repetitions));

        // Serialise and restore of a 1,000-message conversation.
        const int restores = std::max(1, repetitions / 10);
        auto memory = std::make_shared<ullm::MemorySessionStore>();
        const std::string text = long_snapshot("long", 1000);
        memory->put("", "long", text, 0);
        const ullm::Client stored(
            {.default_model = "scripted/bench", .providers = {provider}, .session_store = memory});
        start = Clock::now();
        std::size_t restored_messages = 0;
        for (int i = 0; i < restores; ++i) {
            restored_messages += stored.conversation({.session_id = "long"}).history().size();
        }
        fmt::print("restore of {} messages ({} KiB) from the memory store: {:.0f} us\n",
                   restored_messages / static_cast<std::size_t>(restores), text.size() / 1024,
                   micros_since(start, restores));
        auto long_conversation = stored.conversation({.session_id = "long"});
        start = Clock::now();
        std::size_t bytes = 0;
        for (int i = 0; i < restores; ++i) bytes += long_conversation.serialise().dump().size();
        fmt::print("serialise of the same conversation to JSON text: {:.0f} us ({} bytes)\n",
                   micros_since(start, restores), bytes / static_cast<std::size_t>(restores));
        for (int i = 0; i < restores; ++i) provider->push_text("Short answer.");
        start = Clock::now();
        for (int i = 0; i < restores; ++i) (void)long_conversation.send("One more question.");
        fmt::print("turn on it, persisted to the memory store ({} messages): {:.0f} us\n",
                   long_conversation.history().size(), micros_since(start, restores));

        // The same restore through SQLite, and a turn's guarded write of it.
        const auto path = std::filesystem::temp_directory_path() /
                          ("ullm-bench-" + std::to_string(::getpid()) + ".db");
        {
            auto sqlite = ullm::SqliteSessionStore::open(path.string());
            sqlite->put("", "long", text, 0);
            const ullm::Client on_disk({.default_model = "scripted/bench",
                                        .providers = {provider},
                                        .session_store = sqlite});
            start = Clock::now();
            for (int i = 0; i < restores; ++i) {
                (void)on_disk.conversation({.session_id = "long"});
            }
            fmt::print("restore of the same conversation from SQLite: {:.0f} us\n",
                       micros_since(start, restores));
            auto persisted = on_disk.conversation({.session_id = "long"});
            for (int i = 0; i < restores; ++i) provider->push_text("Short answer.");
            start = Clock::now();
            for (int i = 0; i < restores; ++i) (void)persisted.send("One more question.");
            fmt::print("turn on it, persisted to SQLite (fsync, {} messages): {:.0f} us\n",
                       persisted.history().size(), micros_since(start, restores));
        }
        std::filesystem::remove(path);
        std::filesystem::remove(path.string() + "-wal");
        std::filesystem::remove(path.string() + "-shm");
        return 0;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "benchmark failed: %s\n", error.what());
        return 1;
    }
}
