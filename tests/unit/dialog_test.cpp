#include <ullm/dialog/dialog.hpp>

#include <ullm/core/error.hpp>
#include <ullm/providers/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>
#include <thread>

#include "support/catch.hpp"
#include "support/scripted_client.hpp"

using namespace std::chrono_literals;
using ullm::json;

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

TEST_CASE("cancel during a slow tool stops it, writes nothing late, and the next turn works",
          "[dialog]") {
    Notes n;
    n.provider->push_tool_call("wait", json::object());
    n.provider->push_text("after cancel");
    auto dialog = n.dialog();
    ullm::DialogTurn cancelled;
    std::thread first([&] { cancelled = dialog.send("alice", "start"); });
    wait_until([&] { return n.started.load() == 1; });
    CHECK(dialog.cancel("alice"));
    first.join();
    CHECK(cancelled.status == ullm::DialogTurnStatus::cancelled);
    wait_until([&] { return n.stopped.load(); });
    CHECK(dialog.transcript("alice").empty());
    CHECK_FALSE(dialog.cancel("alice"));  // Nothing runs any more.
    const auto next = dialog.send("alice", "again");
    CHECK(next.status == ullm::DialogTurnStatus::completed);
    CHECK(next.turn_id == 2);
    CHECK(dialog.transcript("alice").size() == 2);
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
        ullm::ProviderError("provider_overloaded", "Overloaded", 529, true)));
    n.provider->push_text("");
    auto dialog = n.dialog();
    const auto failed = dialog.send("alice", "hi");
    CHECK(failed.status == ullm::DialogTurnStatus::failed);
    CHECK(failed.text == "I encountered an error generating a response: Overloaded");
    CHECK(failed.error_code == "provider_overloaded");
    CHECK_FALSE(dialog.info("alice").pending);
    const auto empty = dialog.send("alice", "hi again");
    CHECK(empty.text == "I encountered an error generating a response. Please try again.");
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
