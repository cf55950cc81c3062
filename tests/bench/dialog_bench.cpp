// Prints what the library's own work costs in a dialog, with no network: a three-round dialog
// turn (a handler call, presentResult, the answer) over a 100-note cell space, in memory and
// persisted to SQLite, loading a stored instance in a new Dialog, generate_object with one tool
// call, and a round of four tool calls run in parallel and one after another.
// Usage: ullm_bench_dialog [repetitions]

#include <ullm/conversation/conversation.hpp>
#include <ullm/dialog/dialog.hpp>
#include <ullm/dialog/generate_object.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
using ullm::json;
namespace schema = ullm::schema;

double micros_since(Clock::time_point start, int repetitions) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / repetitions;
}

ullm::ChatResponse calls(int count) {
    ullm::ChatResponse response;
    response.message.role = ullm::Role::assistant;
    for (int i = 0; i < count; ++i) {
        ullm::ToolCallPart call{"c" + std::to_string(i), "work", json::object()};
        response.message.parts.emplace_back(call);
        response.tool_calls.push_back(call);
    }
    response.finish_reason = ullm::FinishReason::tool_call;
    return response;
}

// A turn whose one round runs four 1 ms tool calls, at once or one after another.
double tool_round(const ullm::Client& client, ullm::ScriptedProvider& provider, bool sequential,
                  int repetitions) {
    const auto work =
        ullm::define_tool({.name = "work",
                           .description = "Works for a millisecond",
                           .parameters = schema::object(),
                           .execute = [](const json&, ullm::ToolContext&) -> json {
                               std::this_thread::sleep_for(std::chrono::milliseconds(1));
                               return "done";
                           }});
    auto conversation = client.conversation({.tools = {work}, .sequential_tool_calls = sequential});
    for (int i = 0; i < repetitions; ++i) {
        provider.push(calls(4));
        provider.push_text("ok");
    }
    const auto start = Clock::now();
    for (int i = 0; i < repetitions; ++i) {
        (void)conversation.send("go");
        if (i % 50 == 49) conversation.clear();
    }
    return micros_since(start, repetitions);
}

}  // namespace

int main(int argc, char** argv) {
    const int repetitions = argc > 1 ? std::atoi(argv[1]) : 200;
    try {
        auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
        const ullm::Client client({.default_model = "scripted/bench", .providers = {provider}});

        auto space = std::make_shared<ullm::CellSpace>();
        json notes = json::array();
        for (int i = 0; i < 100; ++i) {
            notes.push_back({{"title", "note " + std::to_string(i)}, {"text", "remember it"}});
        }
        const auto list = space->create(notes, std::nullopt, "bench-notes-0123456789");
        const auto add = space->add_handler(
            {.description = "Append a note",
             .input_schema = schema::object({{"title", schema::string()}}, {"title"}),
             .writes = {list},
             .run = [list](const json& input, ullm::CellWriter& cells) {
                 cells.set(list.child("-"), {{"title", input["title"]}, {"text", ""}});
                 cells.set(ullm::parse_link(input["result"]), {{"added", input["title"]}});
             }});
        const json summary = schema::object({{"count", schema::integer()}}, {"count"});

        const auto options = [&](std::shared_ptr<ullm::SessionStore> store) {
            return ullm::DialogOptions{.system = "You keep notes.",
                                       .tools = {ullm::DialogTool::handler("add_note", add)},
                                       .result_schema = summary,
                                       .context_cells = {{"Notes", list}},
                                       .session_store = std::move(store)};
        };
        // Turns spread over 20 instances, whose transcripts grow by 6 messages a turn.
        const auto turns = [&](ullm::Dialog& dialog) {
            for (int i = 0; i < repetitions; ++i) {
                provider->push_tool_call("add_note", {{"title", "bench"}});
                provider->push_tool_call("presentResult", {{"count", 101}});
                provider->push_text("Added.");
            }
            const auto start = Clock::now();
            for (int i = 0; i < repetitions; ++i) {
                (void)dialog.send("instance-" + std::to_string(i % 20), "Add a note.");
            }
            return micros_since(start, repetitions);
        };
        ullm::Dialog in_memory(client, space, options(nullptr));
        fmt::print(
            "three-round dialog turn (handler, presentResult, answer; 100+ notes listed "
            "in each round's prompt): {:.0f} us\n",
            turns(in_memory));

        const auto path = std::filesystem::temp_directory_path() /
                          ("ullm-bench-dialog-" + std::to_string(::getpid()) + ".db");
        std::shared_ptr<ullm::SessionStore> sqlite = ullm::SqliteSessionStore::open(path.string());
        {
            ullm::Dialog persisted(client, space, options(sqlite));
            fmt::print("the same turn, each instance written to SQLite after it: {:.0f} us\n",
                       turns(persisted));
        }
        const int loads = std::max(1, repetitions / 4);
        auto start = Clock::now();
        for (int i = 0; i < loads; ++i) {
            ullm::Dialog restarted(client, space, options(sqlite));
            (void)restarted.info("instance-0");  // loads its record from SQLite
        }
        fmt::print("loading a stored instance of {} messages in a new Dialog: {:.0f} us\n",
                   ullm::Dialog(client, space, options(sqlite)).transcript("instance-0").size(),
                   micros_since(start, loads));
        sqlite.reset();
        std::filesystem::remove(path);
        std::filesystem::remove(path.string() + "-wal");
        std::filesystem::remove(path.string() + "-shm");

        for (int i = 0; i < repetitions; ++i) {
            provider->push_tool_call("add_note", {{"title", "bench"}});
            provider->push_tool_call("presentResult", {{"count", 1}});
        }
        start = Clock::now();
        for (int i = 0; i < repetitions; ++i) {
            (void)ullm::generate_object(
                client, space, "Add a note and count.",
                {.schema = summary, .tools = {ullm::DialogTool::handler("add_note", add)}});
        }
        fmt::print("generate_object with one tool call (a fresh dialog each time): {:.0f} us\n",
                   micros_since(start, repetitions));

        const int rounds = std::max(1, repetitions / 4);
        fmt::print("a round of four 1 ms tool calls, parallel: {:.0f} us\n",
                   tool_round(client, *provider, false, rounds));
        fmt::print(
            "a round of four 1 ms tool calls, sequential (as a dialog runs them): {:.0f} "
            "us\n",
            tool_round(client, *provider, true, rounds));
        return 0;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "ullm_bench_dialog failed: %s\n", error.what());
        return 1;
    }
}
