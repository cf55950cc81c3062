// ullm dialog example: a notes assistant over a cell space, offline.
//
// The caller's state is one list cell. A handler tool (`add_note`) appends to it; a pattern
// tool (`summarise_notes`) reads it and returns a summary; a result schema makes the dialog
// offer `presentResult`, whose call becomes the instance's structured result. At the end an
// instance is kept in SQLite and comes back whole in a new Dialog. A scripted provider plays
// the model, so the program needs no network and no API key.

#include <ullm/client/client.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/dialog/cell_space.hpp>
#include <ullm/dialog/dialog.hpp>
#include <ullm/dialog/generate_object.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include <unistd.h>

// At namespace scope, not in the anonymous namespace: the macro also defines a to_json that this
// program never calls, and clang reports an unused function with internal linkage.

// The structured result as the program uses it.
struct NotesSummary {
    int count = 0;
    std::vector<std::string> titles;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NotesSummary, count, titles)

namespace {

using ullm::json;
namespace schema = ullm::schema;

// One instance's transcript: what the user said, each tool call and its result, the answer.
void print_transcript(const ullm::Dialog& dialog, const std::string& instance) {
    for (const auto& message : dialog.transcript(instance)) {
        if (message.role == ullm::Role::user) fmt::print("{}> {}\n", instance, message.text());
        for (const auto& call : message.tool_calls()) {
            fmt::print("  model calls {}({})\n", call.name, call.arguments.dump());
        }
        for (const auto& result : message.tool_results()) {
            fmt::print("    -> {}{}\n", result.is_error ? "error: " : "",
                       result.result.is_string() ? result.result.get<std::string>()
                                                 : result.result.dump());
        }
        if (message.role == ullm::Role::assistant && !message.text().empty()) {
            fmt::print("assistant> {}\n", message.text());
        }
    }
}

}  // namespace

int main() try {
    // The caller's state. A given cell id must be at least 20 characters.
    auto space = std::make_shared<ullm::CellSpace>();
    const json note = schema::object({{"title", schema::string()}, {"text", schema::string()}},
                                     {"title", "text"});
    const ullm::CellLink notes =
        space->create(json::array(), schema::array(note), "notes-of-the-assistant");

    // A handler is bound to the cells it may write (`writes`) and gets a fresh result cell in
    // input["result"]: what it writes there is what the model sees. Writing any other cell
    // throws handler_write_denied. `child("-")` is the place after the last element: an append.
    const ullm::CellLink add_note = space->add_handler(
        {.description = "Add a note with a title and a text",
         .input_schema = note,
         .writes = {notes},
         .run = [notes](const json& input, ullm::CellWriter& cells) {
             cells.set(notes.child("-"), {{"title", input["title"]}, {"text", input["text"]}});
             cells.set(ullm::parse_link(input["result"]),
                       {{"added", input["title"]}, {"count", cells.get(notes).size()}});
         }});

    // A pattern sees the caller's cells read-only and returns its result.
    const json summary =
        schema::object({{"count", schema::integer()}, {"titles", schema::array(schema::string())}},
                       {"count", "titles"});
    const ullm::CellLink summarise = space->add_pattern(
        {.description = "Count the notes and list their titles",
         .argument_schema = schema::object(
             {{"notes", {{"type", {"string", "object"}}, {"description", "A link to the notes"}}}},
             {"notes"}),
         .result_schema = summary,
         .run = [](const json& argument, const ullm::CellReader& cells, std::stop_token) -> json {
             json titles = json::array();
             for (const auto& item : cells.get(ullm::parse_link(argument["notes"]))) {
                 titles.push_back(item["title"]);
             }
             return {{"count", titles.size()}, {"titles", titles}};
         }});

    // A mistake on purpose: a pattern that tries to write caller state through the space. (It
    // holds a plain pointer: a shared_ptr would keep the space alive through its own cell.)
    const ullm::CellLink clear = space->add_pattern(
        {.description = "Delete all notes",
         .argument_schema = schema::object(),
         .result_schema = json::object(),
         .run = [cells = space.get(), notes](const json&, const ullm::CellReader&,
                                             std::stop_token) -> json {
             cells->set(notes, json::array());  // Throws pattern_write_denied.
             return "cleared";
         }});

    // The model: one queued answer per request, in order. Alice's turn takes five rounds
    // (add, add, summarise, present, answer); bob's two; generate_object two (add, present);
    // carol's one; dave's three (pin, present, answer), then one after the restart.
    auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
    provider->push_tool_call("add_note", {{"title", "Milk"}, {"text", "Buy two litres"}});
    provider->push_tool_call("add_note", {{"title", "Mum"}, {"text", "Call about Sunday"}});
    provider->push_tool_call("summarise_notes", json::object());
    provider->push_tool_call("presentResult", {{"count", 2}, {"titles", {"Milk", "Mum"}}});
    provider->push_text("You have 2 notes: Milk and Mum.");
    provider->push_tool_call("clear_notes", json::object());
    provider->push_text("I could not delete your notes.");
    provider->push_tool_call("add_note", {{"title", "Tea"}, {"text", "Buy green tea"}});
    provider->push_tool_call("presentResult", {{"count", 3}, {"titles", {"Milk", "Mum", "Tea"}}});
    provider->push_text("That is 3 notes.");
    provider->push_tool_call("pin", {{"path", notes.to_string()}, {"name", "My notes"}});
    provider->push_tool_call("presentResult", {{"count", 3}, {"titles", {"Milk", "Mum", "Tea"}}});
    provider->push_text("Pinned. You have 3 notes.");
    provider->push_text("Still 3 notes, and they stay pinned.");
    const ullm::Client client({.default_model = "scripted/notes", .providers = {provider}});

    // The pattern tool's `notes` parameter is pre-filled: the model neither sees nor sets it.
    ullm::Dialog dialog(client, space,
                        {.system = "You keep the user's notes.",
                         .tools = {ullm::DialogTool::handler("add_note", add_note),
                                   ullm::DialogTool::pattern("summarise_notes", summarise,
                                                             {{"notes", notes.to_json()}}),
                                   ullm::DialogTool::pattern("clear_notes", clear)},
                         .result_schema = summary,
                         .context_cells = {{"Notes", notes}}});

    fmt::print("catalog: {}\n\n", fmt::join(dialog.registry().names(), ", "));

    const auto turn = dialog.send("alice", "Note milk and calling mum, then summarise my notes.");
    print_transcript(dialog, "alice");
    fmt::print("\nnotes cell: {}\n", space->get(notes).dump());
    // The stored result is the presentResult call's input, already checked against the schema.
    const auto typed = turn.result.value().get<NotesSummary>();
    fmt::print("typed result: NotesSummary{{count = {}, titles = {}}}\n", typed.count,
               fmt::join(typed.titles, ", "));
    fmt::print("\nsystem prompt of alice's next round:\n{}\n", dialog.system_prompt("alice"));

    // A second instance: its own transcript, pins, result and turn, over the same cells.
    (void)dialog.send("bob", "Delete all my notes.");
    print_transcript(dialog, "bob");
    fmt::print("\nbob's result: {}\nalice's result: {}\nnotes left: {}\n",
               dialog.info("bob").result ? dialog.info("bob").result->dump() : "none",
               dialog.info("alice").result.value().dump(), space->get(notes).size());
    fmt::print("transcripts: alice {} messages, bob {}\n", dialog.transcript("alice").size(),
               dialog.transcript("bob").size());

    // Structured output with tools: generate_object lets the model use the tools, ends at its
    // presentResult call and returns the object with the messages that led to it.
    const auto generated =
        ullm::generate_object(client, space, "Add a note to buy tea, then give me the summary.",
                              {.schema = summary,
                               .system = "You keep the user's notes.",
                               .tools = {ullm::DialogTool::handler("add_note", add_note)}});
    fmt::print("\ngenerate_object: {} from {} messages\n", generated.object.dump(),
               generated.messages.size());
    // Those messages go on in a dialog instance as they are: call ids and results stay paired.
    (void)dialog.append("carol", generated.messages);
    const auto carol = dialog.send("carol", "And how many is that?");
    fmt::print("carol> And how many is that?\nassistant> {}\n", carol.text);

    // Persisted instances: with a session store each instance is written after every turn,
    // and a new Dialog over the same store (a restarted process) loads it on first use:
    // transcript, pins, result and turn id.
    const auto path = std::filesystem::temp_directory_path() /
                      ("ullm-dialog-notes-" + std::to_string(::getpid()) + ".db");
    {  // The store closes at the end of this block, before its file is removed.
        const ullm::DialogOptions stored{.system = "You keep the user's notes.",
                                         .tools = {ullm::DialogTool::handler("add_note", add_note)},
                                         .result_schema = summary,
                                         .session_store = ullm::SqliteSessionStore::open(path)};
        {
            ullm::Dialog before_restart(client, space, stored);
            (void)before_restart.send("dave", "Pin my notes and sum them up.");
        }
        ullm::Dialog after_restart(client, space, stored);
        const auto dave = after_restart.info("dave");
        fmt::print("\ndave after a restart: {} messages, turn {}, result {}, notes pinned: {}\n",
                   after_restart.transcript("dave").size(), dave.turn_id,
                   dave.result.value().dump(),
                   after_restart.system_prompt("dave").find("## My notes") != std::string::npos);
        const auto next = after_restart.send("dave", "How many now?");
        fmt::print("dave> How many now?\nassistant> {} (turn {})\n", next.text, next.turn_id);
    }
    std::filesystem::remove(path);
    std::filesystem::remove(path.string() + "-wal");
    std::filesystem::remove(path.string() + "-shm");
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "dialog_notes failed: %s\n", error.what());
    return 1;
}
