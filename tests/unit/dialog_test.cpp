#include <ullm/dialog/dialog.hpp>

#include <ullm/core/error.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>
#include <future>
#include <optional>
#include <thread>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"

namespace dialog_test {

using namespace std::chrono_literals;
using ullm::json;

using ullm::test::error_code_of;
using ullm::test::wait_until;

namespace {

struct Notes {
    std::shared_ptr<ullm::ScriptedProvider> provider =
        std::make_shared<ullm::ScriptedProvider>("scripted");
    ullm::Client client{{.default_model = "scripted/model-a", .providers = {provider}}};
    std::shared_ptr<ullm::CellSpace> space = std::make_shared<ullm::CellSpace>();
    ullm::CellLink notes =
        space->create(json::array(), std::nullopt, "notes-list-0123456789abcdef");
    std::atomic<bool> release{false};
    std::atomic<int> started{0};
    std::atomic<bool> stopped{false};
    ullm::CellLink wait = space->add_pattern(
        {.description = "Waits until released or stopped",
         .argument_schema = ullm::schema::object(),
         .result_schema = json::object(),
         .run = [this](const json&, const ullm::CellReader&, std::stop_token stop) -> json {
             ++started;
             while (!release && !stop.stop_requested()) std::this_thread::sleep_for(1ms);
             stopped = stop.stop_requested();
             return "released";
         }});

    ullm::Dialog dialog(ullm::DialogOptions options = {}) {
        if (options.tools.empty()) options.tools = {ullm::DialogTool::pattern("wait", wait)};
        return ullm::Dialog(client, space, std::move(options));
    }
};

}  // namespace

TEST_CASE("a message during a running turn is ignored while other instances proceed", "[dialog]") {
    Notes n;
    n.provider->push_tool_call("wait", json::object());  // alice, round 1
    n.provider->push_text("hello bob");                  // bob
    n.provider->push_text("alice done");                 // alice, round 2
    auto dialog = n.dialog();
    ullm::DialogTurn alice;
    std::thread first([&] { alice = dialog.send("alice", "start"); });
    wait_until([&] { return n.started.load() == 1; });
    CHECK(dialog.info("alice").pending);
    const auto ignored = dialog.send("alice", "are you there?");
    CHECK(ignored.status == ullm::DialogTurnStatus::ignored);
    CHECK(ignored.turn_id == 1);
    CHECK(n.provider->requests().size() == 1);  // Nothing was sent for it.
    const auto bob = dialog.send("bob", "hi");
    CHECK(bob.status == ullm::DialogTurnStatus::completed);
    CHECK(bob.text == "hello bob");
    n.release = true;
    first.join();
    CHECK(alice.status == ullm::DialogTurnStatus::completed);
    CHECK(alice.text == "alice done");
    CHECK_FALSE(dialog.info("alice").pending);
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 4);
    for (const auto& message : transcript) CHECK(message.text() != "are you there?");
}

TEST_CASE("cancel during a slow tool: later tools never start, every call is answered",
          "[dialog]") {
    Notes n;
    std::atomic<int> recorded{0};
    const auto record =
        n.space->add_handler({.description = "Records a call",
                              .input_schema = ullm::schema::object(),
                              .run = [&recorded](const json&, ullm::CellWriter&) { ++recorded; }});
    n.provider->push(ullm::test::parallel_calls(
        {{"c1", "wait", json::object()}, {"c2", "record", json::object()}}));
    n.provider->push_text("after cancel");
    auto dialog = n.dialog({.tools = {ullm::DialogTool::pattern("wait", n.wait),
                                      ullm::DialogTool::handler("record", record)}});
    ullm::DialogTurn cancelled;
    std::thread first([&] { cancelled = dialog.send("alice", "start"); });
    wait_until([&] { return n.started.load() == 1; });
    CHECK(dialog.cancel("alice"));
    first.join();
    CHECK(cancelled.status == ullm::DialogTurnStatus::cancelled);
    CHECK(cancelled.error_code == "cancelled");
    wait_until([&] { return n.stopped.load(); });
    CHECK(recorded == 0);  // The call after the cancelled one never started.
    const auto transcript = dialog.transcript("alice");
    // The user message, the calls, and one tool message per call, in call order.
    REQUIRE(transcript.size() == 4);
    CHECK(transcript[0].text() == "start");
    for (std::size_t i = 0; i < 2; ++i) {
        const auto results = transcript[2 + i].tool_results();
        REQUIRE(results.size() == 1);
        CHECK(results[0].tool_call_id == (i == 0 ? "c1" : "c2"));
        CHECK(results[0].is_error);
        CHECK(results[0].result == "Tool call cancelled");
    }
    CHECK_FALSE(dialog.cancel("alice"));  // Nothing runs any more.
    const auto next = dialog.send("alice", "again");
    CHECK(next.status == ullm::DialogTurnStatus::completed);
    CHECK(next.turn_id == 2);
    CHECK(dialog.transcript("alice").size() == 6);
    // The next request carries the cancelled round with both calls answered.
    const auto sent = n.provider->requests().back().messages;
    REQUIRE(sent.size() == 5);
    CHECK(sent[2].tool_results().at(0).tool_call_id == "c1");
    CHECK(sent[3].tool_results().at(0).tool_call_id == "c2");
}

TEST_CASE("a handler's write after its turn was cancelled changes nothing", "[dialog]") {
    Notes n;
    // Shared with the handler's thread, which outlives the turn.
    auto release = std::make_shared<std::atomic<bool>>(false);
    auto entered = std::make_shared<std::atomic<bool>>(false);
    auto refused = std::make_shared<std::atomic<int>>(-1);
    const auto slow_add = n.space->add_handler(
        {.description = "Appends after a while",
         .input_schema = ullm::schema::object(),
         .writes = {n.notes},
         .run = [release, entered, refused, notes = n.notes](const json&, ullm::CellWriter& cells) {
             *entered = true;
             while (!*release) std::this_thread::sleep_for(1ms);
             try {
                 cells.set(notes, json::array({"late"}));
                 *refused = 0;
             } catch (const ullm::DialogError& error) {
                 *refused = error.code() == "cancelled" ? 1 : 2;
             }
         }});
    n.provider->push_tool_call("slow_add", json::object());
    auto dialog = n.dialog({.tools = {ullm::DialogTool::handler("slow_add", slow_add)}});
    ullm::DialogTurn cancelled;
    std::thread first([&] { cancelled = dialog.send("alice", "add"); });
    wait_until([&] { return entered->load(); });
    CHECK(dialog.cancel("alice"));
    first.join();
    *release = true;
    wait_until([&] { return refused->load() != -1; });
    CHECK(refused->load() == 1);
    CHECK(n.space->get(n.notes) == json::array());
}

TEST_CASE("presentResult is stored as the instance's result and later calls overwrite it",
          "[dialog]") {
    Notes n;
    const json schema = ullm::schema::object({{"summary", ullm::schema::string()}}, {"summary"});
    n.provider->push_tool_call("presentResult", {{"summary", "first"}});
    n.provider->push_tool_call("presentResult", {{"summary", "second"}});
    n.provider->push_text("done");
    auto dialog = n.dialog({.builtin_tools = false, .result_schema = schema});
    CHECK(dialog.registry().names() == std::vector<std::string>{"wait", "presentResult"});
    const auto turn = dialog.send("alice", "summarise");
    CHECK(turn.status == ullm::DialogTurnStatus::completed);
    REQUIRE(turn.result);
    CHECK(*turn.result == json{{"summary", "second"}});
    CHECK(dialog.info("alice").result == turn.result);
    CHECK_FALSE(dialog.info("bob").result);
}

TEST_CASE("the system prompt lists context cells, and pins from the next round on", "[dialog]") {
    Notes n;
    n.provider->push_tool_call("pin", {{"path", n.notes.to_string()}, {"name", "Shopping"}});
    n.provider->push_text("pinned");
    auto dialog = n.dialog({.system = "Be helpful."});
    (void)dialog.send("alice", "pin my notes");
    const auto requests = n.provider->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].system.rfind("Be helpful.\n\n", 0) == 0);
    CHECK(requests[0].system.find("# Available Cells") != std::string::npos);
    CHECK(requests[0].system.find("## Shopping") == std::string::npos);
    CHECK(requests[1].system.find("## Shopping") != std::string::npos);
    CHECK(requests[1].system.find(n.notes.to_string()) != std::string::npos);
    CHECK(dialog.system_prompt("alice").find("## Shopping") != std::string::npos);
    CHECK(dialog.system_prompt("bob").find("## Shopping") == std::string::npos);
}

TEST_CASE("dialog failures and empty replies get the dialog's messages", "[dialog]") {
    Notes n;
    n.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "Overloaded", 529, true)));
    n.provider->push_text("");
    auto dialog = n.dialog();
    const auto failed = dialog.send("alice", "hi");
    CHECK(failed.status == ullm::DialogTurnStatus::failed);
    CHECK(failed.text == "I encountered an error generating a response: Overloaded");
    CHECK(failed.error_code == "provider_overloaded");
    CHECK_FALSE(dialog.info("alice").pending);
    auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 2);
    CHECK(transcript[1].role == ullm::Role::assistant);
    CHECK(transcript[1].text() == failed.text);
    const auto empty = dialog.send("alice", "hi again");
    CHECK(empty.text == "I encountered an error generating a response. Please try again.");
    transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 4);
    CHECK(transcript[3].text() == empty.text);
}

TEST_CASE("tool calls a failure left unrun end the transcript with the retry message", "[dialog]") {
    Notes n;
    n.release = true;
    n.provider->push_tool_call("wait", json::object());
    n.provider->push_tool_call("wait", json::object());
    auto dialog = n.dialog({.max_tool_rounds = 1});
    const auto failed = dialog.send("alice", "go");
    CHECK(failed.status == ullm::DialogTurnStatus::failed);
    CHECK(failed.error_code == "max_tool_rounds_exceeded");
    CHECK(failed.text == "Some tool calls failed to execute. Please try again.");
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 6);
    CHECK(transcript[4].tool_results().at(0).is_error);
    CHECK(transcript[5].text() == failed.text);
}

TEST_CASE("the first presentResult call of a batch is the result", "[dialog]") {
    Notes n;
    const json schema = ullm::schema::object({{"summary", ullm::schema::string()}}, {"summary"});
    n.provider->push(
        ullm::test::parallel_calls({{"c1", "presentResult", {{"summary", "first of batch"}}},
                                    {"c2", "presentResult", {{"summary", "second of batch"}}}}));
    n.provider->push_text("done");
    auto dialog = n.dialog({.builtin_tools = false, .result_schema = schema});
    const auto turn = dialog.send("alice", "summarise");
    REQUIRE(turn.result);
    CHECK(*turn.result == json{{"summary", "first of batch"}});
}

TEST_CASE("a handler cannot be pointed at a cell it is not bound to as its result", "[dialog]") {
    Notes n;
    const auto other =
        n.space->create(json{{"secret", 1}}, std::nullopt, "other-cell-0123456789abcdef");
    const auto writer =
        n.space->add_handler({.description = "Writes its result",
                              .input_schema = ullm::schema::object(),
                              .run = [](const json& input, ullm::CellWriter& cells) {
                                  cells.set(ullm::parse_link(input["result"]), {{"ok", true}});
                              }});
    n.provider->push_tool_call("writer", {{"result", other.to_json()}});
    n.provider->push_text("done");
    auto dialog = n.dialog({.tools = {ullm::DialogTool::handler("writer", writer)}});
    (void)dialog.send("alice", "write");
    CHECK(n.space->get(other) == json{{"secret", 1}});
    const auto result = dialog.transcript("alice")[2].tool_results().at(0);
    CHECK(result.is_error);
}

TEST_CASE("instance names need not be valid session ids", "[dialog]") {
    Notes n;
    n.provider->push_text("hi");
    auto dialog = n.dialog();
    CHECK(dialog.send(std::string("tab\there\x01") + std::string(300, 'x'), "hi").status ==
          ullm::DialogTurnStatus::completed);
}

TEST_CASE("a dialog refuses reserved tool names when it is built", "[dialog]") {
    Notes n;
    CHECK_THROWS_AS(n.dialog({.tools = {ullm::DialogTool::pattern("read", n.wait)}}),
                    ullm::DialogError);
    CHECK_NOTHROW(
        n.dialog({.tools = {ullm::DialogTool::pattern("read", n.wait)}, .builtin_tools = false}));
}

TEST_CASE("a dialog answers a call outside its catalog with its own text", "[dialog]") {
    Notes n;
    n.provider->push_tool_call("read", {{"path", n.notes.to_string()}});
    n.provider->push_text("ok");
    auto dialog = n.dialog({.builtin_tools = false});
    (void)dialog.send("alice", "read it");
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 4);
    const auto result = transcript[2].tool_results().at(0);
    CHECK(result.is_error);
    CHECK(result.result == "Tool has neither pattern nor handler");
}

TEST_CASE("a dialog transcript has one tool message per call, in call order", "[dialog]") {
    Notes n;
    n.release = true;
    const auto save =
        n.space->add_handler({.description = "Saves a note",
                              .input_schema = ullm::schema::object(),
                              .run = [](const json& input, ullm::CellWriter& cells) {
                                  cells.set(ullm::parse_link(input["result"]), {{"saved", true}});
                              }});
    const auto silent = n.space->add_handler({.description = "Writes no result",
                                              .input_schema = ullm::schema::object(),
                                              .run = [](const json&, ullm::CellWriter&) {}});
    n.provider->push(ullm::test::parallel_calls({{"c1", "save", json::object()},
                                                 {"c2", "silent", json::object()},
                                                 {"c3", "ghost", json::object()},
                                                 {"c4", "wait", json::object()}}));
    n.provider->push_text("done");
    auto dialog = n.dialog({.tools = {ullm::DialogTool::handler("save", save),
                                      ullm::DialogTool::handler("silent", silent),
                                      ullm::DialogTool::pattern("wait", n.wait)},
                            .builtin_tools = false});
    CHECK(dialog.send("alice", "go").status == ullm::DialogTurnStatus::completed);
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 7);  // user, calls, four results, answer
    std::vector<ullm::ToolResultPart> results;
    for (std::size_t i = 2; i < 6; ++i) {
        CHECK(transcript[i].role == ullm::Role::tool);
        REQUIRE(transcript[i].tool_results().size() == 1);
        results.push_back(transcript[i].tool_results()[0]);
    }
    CHECK(results[0].tool_call_id == "c1");
    CHECK(results[0].result == json{{"saved", true}});  // json
    CHECK_FALSE(results[0].is_error);
    CHECK(results[1].tool_call_id == "c2");
    CHECK(results[1].result.is_null());  // a handler that wrote nothing
    CHECK(results[2].tool_call_id == "c3");
    CHECK(results[2].is_error);  // error text
    CHECK(results[2].result == "Tool has neither pattern nor handler");
    CHECK(results[3].tool_call_id == "c4");
    CHECK(results[3].result == "released");  // text
    // The provider gets every result of the round after the calls.
    const auto sent = n.provider->requests().back().messages;
    REQUIRE(sent.size() == 6);
    for (std::size_t i = 2; i < 6; ++i) CHECK(sent[i] == transcript[i]);
}

TEST_CASE("a replacement sent right after a cancel runs once the cancelled handler returns",
          "[dialog]") {
    Notes n;
    // Shared with the handler's thread, which outlives the turn: a handler has no stop token.
    auto release = std::make_shared<std::atomic<bool>>(false);
    auto entered = std::make_shared<std::atomic<bool>>(false);
    const auto slow =
        n.space->add_handler({.description = "Takes its time",
                              .input_schema = ullm::schema::object(),
                              .run = [release, entered](const json&, ullm::CellWriter&) {
                                  *entered = true;
                                  while (!*release) std::this_thread::sleep_for(1ms);
                              }});
    n.provider->push_tool_call("slow", json::object());
    n.provider->push_text("the replacement's answer");
    auto dialog = n.dialog({.tools = {ullm::DialogTool::handler("slow", slow)}});
    ullm::DialogTurn cancelled;
    std::thread first([&] { cancelled = dialog.send("alice", "first"); });
    wait_until([&] { return entered->load(); });
    REQUIRE(dialog.cancel("alice"));
    ullm::DialogTurn replacement;
    std::atomic<bool> replaced{false};
    std::thread second([&] {
        replacement = dialog.send("alice", "second");
        replaced = true;
    });
    first.join();
    CHECK(cancelled.status == ullm::DialogTurnStatus::cancelled);
    // The replacement waits for the cancelled handler instead of failing as busy.
    std::this_thread::sleep_for(50ms);
    CHECK_FALSE(replaced.load());
    *release = true;
    second.join();
    CHECK(replacement.status == ullm::DialogTurnStatus::completed);
    CHECK(replacement.error_code.empty());
    CHECK(replacement.text == "the replacement's answer");
    CHECK(replacement.turn_id == 2);
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 5);  // first, its call, cancelled result, second, answer
    CHECK(transcript[2].tool_results().at(0).result == "Tool call cancelled");
    CHECK(transcript[3].text() == "second");
}

TEST_CASE("cancelling one instance leaves another's running turn alone", "[dialog]") {
    Notes n;
    n.provider->push_tool_call("wait", json::object());
    n.provider->push_text("bob's answer");
    auto dialog = n.dialog();
    ullm::DialogTurn bob;
    std::thread running([&] { bob = dialog.send("bob", "wait for me"); });
    wait_until([&] { return n.started.load() == 1; });
    CHECK_FALSE(dialog.cancel("alice"));  // alice has no running turn
    CHECK(dialog.info("bob").pending);
    n.release = true;
    running.join();
    CHECK(bob.status == ullm::DialogTurnStatus::completed);
    CHECK(bob.text == "bob's answer");
    CHECK_FALSE(n.stopped.load());
}

TEST_CASE("a presentResult call cut off by a cancel stores nothing", "[dialog]") {
    Notes n;
    const json schema = ullm::schema::object({{"summary", ullm::schema::string()}}, {"summary"});
    n.provider->push(ullm::test::parallel_calls(
        {{"c1", "wait", json::object()}, {"c2", "presentResult", {{"summary", "late"}}}}));
    n.provider->push(ullm::test::parallel_calls({{"c3", "presentResult", {{"summary", "kept"}}}}));
    n.provider->push_text("done");
    auto dialog = n.dialog({.result_schema = schema});
    std::thread first([&] { (void)dialog.send("alice", "go"); });
    wait_until([&] { return n.started.load() == 1; });
    REQUIRE(dialog.cancel("alice"));
    first.join();
    CHECK_FALSE(dialog.info("alice").result.has_value());
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 4);
    CHECK(transcript[3].tool_results().at(0).result == "Tool call cancelled");
    const auto next = dialog.send("alice", "again");
    REQUIRE(next.result);
    CHECK(*next.result == json{{"summary", "kept"}});
}

namespace {

// The `@resultLocation` of the tool result in message `index` of `transcript`.
ullm::CellLink result_location(const std::vector<ullm::Message>& transcript, std::size_t index) {
    const auto results = transcript.at(index).tool_results();
    REQUIRE(results.size() == 1);
    INFO(results[0].result.dump());
    REQUIRE(results[0].result.is_object());
    REQUIRE(results[0].result.contains("@resultLocation"));
    return ullm::parse_link(results[0].result["@resultLocation"]);
}

// A handler that appends a note and reports how many there are in its result cell.
ullm::CellLink add_note_handler(ullm::CellSpace& space, const ullm::CellLink& notes) {
    return space.add_handler(
        {.description = "Adds a note",
         .input_schema = ullm::schema::object(),
         .writes = {notes},
         .run = [notes](const json& input, ullm::CellWriter& cells) {
             cells.set(notes.child("-"), "note");
             cells.set(ullm::parse_link(input["result"]), {{"count", cells.get(notes).size()}});
         }});
}

}  // namespace

TEST_CASE("a long dialog's handler and pattern calls do not pile up cells", "[dialog]") {
    ullm::test::ScriptedClient scripted;
    // Sixty turns make 180 run cells; a space of 16 holds them only if they go.
    const auto space = std::make_shared<ullm::CellSpace>(ullm::CellSpaceOptions{.max_cells = 16});
    const auto notes = space->create(json::array(), std::nullopt, "notes-list-0123456789abcdef");
    const auto add = add_note_handler(*space, notes);
    const auto count = space->add_pattern(
        {.description = "Counts the notes",
         .argument_schema = ullm::schema::object(),
         .result_schema = ullm::schema::integer(),
         .run = [notes](const json&, const ullm::CellReader& cells, std::stop_token) -> json {
             return cells.get(notes).size();
         }});
    ullm::Dialog dialog(scripted.client, space,
                        {.tools = {ullm::DialogTool::handler("add_note", add),
                                   ullm::DialogTool::pattern("count_notes", count)}});
    constexpr int turns = 60;
    for (int i = 0; i < turns; ++i) {
        scripted.provider->push(
            ullm::test::parallel_calls({{"a" + std::to_string(i), "add_note", json::object()},
                                        {"c" + std::to_string(i), "count_notes", json::object()}}));
        scripted.provider->push_text("noted");
    }
    for (int i = 0; i < turns; ++i) {
        const auto turn = dialog.send(i % 2 == 0 ? "alice" : "bob", "add a note");
        REQUIRE(turn.status == ullm::DialogTurnStatus::completed);
    }
    for (const auto& message : dialog.transcript("alice")) {
        for (const auto& result : message.tool_results()) CHECK_FALSE(result.is_error);
    }
    CHECK(space->get(notes).size() == turns);
    CHECK(dialog.transcript("bob").back().text() == "noted");
    CHECK(space->cell_count() <= 16);
    (void)space->collect();
    CHECK(space->cell_count() == 3);  // the caller's cells: nothing a transcript still needs
}

TEST_CASE("a cell an invoke showed the model stays while its instance lives", "[dialog]") {
    Notes n;
    const auto add = add_note_handler(*n.space, n.notes);
    n.provider->push_tool_call("invoke", {{"path", add.to_string()}, {"args", json::object()}});
    n.provider->push_text("invoked");
    std::optional<ullm::Dialog> dialog;
    dialog.emplace(n.client, n.space,
                   ullm::DialogOptions{.tools = {ullm::DialogTool::pattern("wait", n.wait)}});
    REQUIRE(dialog->send("alice", "add one").status == ullm::DialogTurnStatus::completed);
    const auto result = result_location(dialog->transcript("alice"), 2);
    (void)n.space->collect();
    CHECK(n.space->get(result) == json{{"count", 1}});

    // The next turn may use it: read it, or name it as a handler's result location.
    n.provider->push_tool_call("read", {{"path", result.to_string()}});
    n.provider->push_tool_call(
        "invoke", {{"path", add.to_string()}, {"args", {{"result", result.to_json()}}}});
    n.provider->push_text("read and reused");
    REQUIRE(dialog->send("alice", "read it").status == ullm::DialogTurnStatus::completed);
    const auto transcript = dialog->transcript("alice");
    REQUIRE(transcript.size() == 10);
    const auto read = transcript[6].tool_results().at(0);
    CHECK_FALSE(read.is_error);
    CHECK(read.result["value"] == json{{"count", 1}});
    CHECK(result_location(transcript, 8) == result);
    CHECK(n.space->get(result) == json{{"count", 2}});

    // Another instance's transcript does not mention it, and once the dialog is gone nothing
    // needs it.
    dialog.reset();
    CHECK(n.space->collect() == 1);
    CHECK(error_code_of([&] { (void)n.space->get(result); }) == "unknown_cell");
}

TEST_CASE("pins, pattern instances and context cells are in use while the dialog lives",
          "[dialog]") {
    Notes n;
    n.release = true;
    const auto shown =
        n.space->create(json{{"shown", true}}, std::nullopt, "shown-cell-0123456789abcdef");
    n.provider->push_tool_call("invoke", {{"path", n.wait.to_string()}});
    n.provider->push_text("started");
    std::optional<ullm::Dialog> dialog;
    dialog.emplace(n.client, n.space,
                   ullm::DialogOptions{.tools = {ullm::DialogTool::pattern("wait", n.wait)},
                                       .context_cells = {{"Shown", shown}}});
    REQUIRE(dialog->send("alice", "start it").status == ullm::DialogTurnStatus::completed);
    const auto started = result_location(dialog->transcript("alice"), 2);

    // A pattern instance's cells stay between turns: updateArgument reruns it.
    (void)n.space->collect();
    n.provider->push_tool_call("updateArgument",
                               {{"path", started.to_string()}, {"updates", json::object()}});
    n.provider->push_tool_call("pin", {{"path", started.to_string()}, {"name", "Run"}});
    n.provider->push_text("updated");
    REQUIRE(dialog->send("alice", "again").status == ullm::DialogTurnStatus::completed);
    const auto updated = dialog->transcript("alice")[6].tool_results().at(0);
    CHECK_FALSE(updated.is_error);
    CHECK(updated.result["success"] == true);
    CHECK(dialog->system_prompt("alice").find("## Run") != std::string::npos);
    // The rerun's own cells went; the instance's two stay.
    CHECK(n.space->collect() == 2);
    CHECK(n.space->get(started) == "released");

    // A caller's cell the dialog lists, or one of its tools, cannot be released meanwhile.
    CHECK(error_code_of([&] { n.space->release(shown); }) == "cell_in_use");
    CHECK(error_code_of([&] { n.space->release(n.wait); }) == "cell_in_use");
    dialog.reset();
    n.space->release(shown);
    n.space->release(n.wait);
    CHECK(n.space->collect() == 2);
    CHECK(error_code_of([&] { (void)n.space->get(started); }) == "unknown_cell");
}

TEST_CASE("a tool call in a full space gets cell_space_full as its error", "[dialog]") {
    ullm::test::ScriptedClient scripted;
    const auto space = std::make_shared<ullm::CellSpace>(ullm::CellSpaceOptions{.max_cells = 4});
    const auto notes = space->create(json::array(), std::nullopt, "notes-list-0123456789abcdef");
    const auto add = add_note_handler(*space, notes);
    // Each invoke's result location is shown, so the turn keeps it: the third finds no room.
    const json invoke = {{"path", add.to_string()}};
    scripted.provider->push(ullm::test::parallel_calls(
        {{"c1", "invoke", invoke}, {"c2", "invoke", invoke}, {"c3", "invoke", invoke}}));
    scripted.provider->push_text("out of room");
    ullm::Dialog dialog(scripted.client, space, {});
    REQUIRE(dialog.send("alice", "add three").status == ullm::DialogTurnStatus::completed);
    const auto transcript = dialog.transcript("alice");
    REQUIRE(transcript.size() == 6);
    CHECK_FALSE(transcript[2].tool_results().at(0).is_error);
    CHECK_FALSE(transcript[3].tool_results().at(0).is_error);
    const auto refused = transcript[4].tool_results().at(0);
    CHECK(refused.is_error);
    CHECK(refused.result.get<std::string>().rfind("The cell space is full", 0) == 0);
    CHECK(space->get(notes).size() == 2);
}

TEST_CASE("a cancelled dialog's handler sees its stop token", "[dialog]") {
    Notes n;
    // Shared with the handler's thread, which may outlive the turn.
    auto entered = std::make_shared<std::atomic<bool>>(false);
    auto saw_stop = std::make_shared<std::atomic<bool>>(false);
    const auto patient =
        n.space->add_handler({.description = "Waits until it is asked to stop",
                              .input_schema = ullm::schema::object(),
                              .run = [entered, saw_stop](const json&, ullm::CellWriter&,
                                                         const ullm::HandlerContext& context) {
                                  *entered = true;
                                  const auto give_up = std::chrono::steady_clock::now() + 10s;
                                  while (!context.stop_token.stop_requested() &&
                                         std::chrono::steady_clock::now() < give_up) {
                                      std::this_thread::sleep_for(1ms);
                                  }
                                  *saw_stop = context.stop_token.stop_requested();
                              }});
    n.provider->push_tool_call("patient", json::object());
    auto dialog = n.dialog({.tools = {ullm::DialogTool::handler("patient", patient)}});
    ullm::DialogTurn cancelled;
    std::thread first([&] { cancelled = dialog.send("alice", "wait"); });
    wait_until([&] { return entered->load(); });
    CHECK_FALSE(saw_stop->load());
    REQUIRE(dialog.cancel("alice"));
    first.join();
    CHECK(cancelled.status == ullm::DialogTurnStatus::cancelled);
    wait_until([&] { return saw_stop->load(); });
}

TEST_CASE("a handler past its tool deadline sees its stop token", "[dialog]") {
    Notes n;
    auto saw_stop = std::make_shared<std::atomic<bool>>(false);
    auto past_deadline = std::make_shared<std::atomic<bool>>(false);
    const auto patient = n.space->add_handler(
        {.description = "Waits until it is asked to stop",
         .input_schema = ullm::schema::object(),
         .run = [saw_stop, past_deadline](const json&, ullm::CellWriter&,
                                          const ullm::HandlerContext& context) {
             const auto give_up = std::chrono::steady_clock::now() + 10s;
             while (!context.stop_token.stop_requested() &&
                    std::chrono::steady_clock::now() < give_up) {
                 std::this_thread::sleep_for(1ms);
             }
             *past_deadline = std::chrono::steady_clock::now() >= context.deadline;
             *saw_stop = context.stop_token.stop_requested();
         }});
    n.provider->push_tool_call("patient", json::object());
    n.provider->push_text("went on without it");
    auto dialog = n.dialog(
        {.tools = {ullm::DialogTool::handler("patient", patient)}, .tool_execution_timeout = 50ms});
    const auto turn = dialog.send("alice", "wait");
    CHECK(turn.status == ullm::DialogTurnStatus::completed);
    CHECK(turn.text == "went on without it");
    const auto result = dialog.transcript("alice").at(2).tool_results().at(0);
    CHECK(result.is_error);
    CHECK(result.result.get<std::string>().find("did not finish within 50 ms") !=
          std::string::npos);
    wait_until([&] { return saw_stop->load(); });
    CHECK(past_deadline->load());
}

TEST_CASE("send_async runs a dialog turn without a waiting thread, with send's rules",
          "[dialog][async]") {
    Notes n;
    n.provider->push_tool_call("wait", json::object());  // alice, round 1
    n.provider->push_text("alice done");                 // alice, round 2
    n.provider->push_text("hello bob");                  // bob
    auto dialog = n.dialog();
    auto alice = dialog.send_async("alice", "start");
    wait_until([&] { return n.started.load() == 1; });
    CHECK(dialog.info("alice").pending);

    // A message while the turn runs is ignored, told through the future like any outcome.
    auto ignored = dialog.send_async("alice", "are you there?");
    REQUIRE(ignored.wait_for(10s) == std::future_status::ready);
    const auto refused = ignored.get();
    CHECK(refused.status == ullm::DialogTurnStatus::ignored);
    CHECK(refused.error_code == "turn_in_progress");

    n.release = true;
    REQUIRE(alice.wait_for(10s) == std::future_status::ready);
    const auto done = alice.get();
    CHECK(done.status == ullm::DialogTurnStatus::completed);
    CHECK(done.text == "alice done");
    CHECK(done.turn_id == 1);
    CHECK_FALSE(dialog.info("alice").pending);
    CHECK(dialog.transcript("alice").size() == 4);

    // The callback form, on the executor-less default: the client's callback thread.
    std::promise<ullm::DialogTurn> told;
    const auto caller = std::this_thread::get_id();
    std::atomic<bool> on_caller{true};
    dialog.send_async("bob", ullm::Message::user("hi"), [&](ullm::DialogTurn turn) {
        on_caller = std::this_thread::get_id() == caller;
        told.set_value(std::move(turn));
    });
    auto bob = told.get_future();
    REQUIRE(bob.wait_for(10s) == std::future_status::ready);
    CHECK(bob.get().text == "hello bob");
    CHECK_FALSE(on_caller);
}

TEST_CASE("an async dialog turn is cancelled and failed as a blocking one is", "[dialog][async]") {
    Notes n;
    n.provider->push_tool_call("wait", json::object());
    auto dialog = n.dialog();
    auto turn = dialog.send_async("alice", "start");
    wait_until([&] { return n.started.load() == 1; });
    CHECK(dialog.cancel("alice"));
    REQUIRE(turn.wait_for(10s) == std::future_status::ready);
    const auto cancelled = turn.get();
    CHECK(cancelled.status == ullm::DialogTurnStatus::cancelled);
    CHECK(cancelled.error_code == "cancelled");
    CHECK(n.stopped);
    wait_until([&] { return !dialog.info("alice").pending; });

    // A provider failure is a failed turn whose text ends the transcript.
    n.provider->push_error(std::make_exception_ptr(ullm::AuthenticationError("bad key", 401)));
    auto failed = dialog.send_async("alice", "again");
    REQUIRE(failed.wait_for(10s) == std::future_status::ready);
    const auto outcome = failed.get();
    CHECK(outcome.status == ullm::DialogTurnStatus::failed);
    CHECK(outcome.error_code == "authentication_failed");
    CHECK(dialog.transcript("alice").back().text() == outcome.text);
}

}  // namespace dialog_test
