#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace conversation_store_test {

using ullm::json;

using ullm::test::error_code_of;

namespace {

struct Stored {
    std::shared_ptr<ullm::MemorySessionStore> store = std::make_shared<ullm::MemorySessionStore>();
    std::shared_ptr<ullm::ScriptedProvider> provider =
        std::make_shared<ullm::ScriptedProvider>("scripted");
    ullm::Client client{
        {.default_model = "scripted/model-a", .providers = {provider}, .session_store = store}};
};

ullm::Tool echo_tool() {
    return ullm::define_tool(
        {.name = "echo",
         .description = "Echoes its input",
         .parameters = ullm::schema::object(),
         .execute = [](const json& args, ullm::ToolContext&) -> json { return args; }});
}

}  // namespace

TEST_CASE("a conversation persists every turn and restores by session id",
          "[conversation][store]") {
    Stored s;
    s.provider->push_text("Hello Ada.", {10, 2});
    s.provider->push_text("Ada.", {30, 1});
    {
        auto conversation =
            s.client.conversation({.session_id = "support-42", .system = "Old system prompt."});
        (void)conversation.send("My name is Ada.");
        CHECK(conversation.version() == 1);
        const auto record = s.store->get("", "support-42");
        REQUIRE(record);
        CHECK(record->version == 1);
        CHECK(json::parse(record->snapshot)["messages"].size() == 2);
    }
    // A new client on the same store: history and totals come back, policy is the caller's.
    const ullm::Client later(
        {.default_model = "scripted/model-b", .providers = {s.provider}, .session_store = s.store});
    auto restored =
        later.conversation({.session_id = "support-42", .system = "New system prompt."});
    CHECK(restored.version() == 1);
    REQUIRE(restored.history().size() == 2);
    CHECK(restored.history()[0].text() == "My name is Ada.");
    CHECK(restored.to_messages()[0].text() == "New system prompt.");
    CHECK(restored.totals().input_tokens == 10);
    (void)restored.send("What is my name?");
    const auto request = s.provider->requests().back();
    CHECK(request.system == "New system prompt.");
    CHECK(request.model == "model-b");
    CHECK(request.messages.size() == 3);
    CHECK(restored.version() == 2);
    CHECK(restored.totals().input_tokens == 40);
    CHECK(s.store->get("", "support-42")->version == 2);
}

TEST_CASE("sessions of one tenant are invisible to another", "[conversation][store]") {
    Stored s;
    s.provider->push_text("for acme");
    s.provider->push_text("for globex");
    auto acme = s.client.conversation({.session_id = "shared-id", .tenant = "acme"});
    (void)acme.send("acme secret");
    auto globex = s.client.conversation({.session_id = "shared-id", .tenant = "globex"});
    CHECK(globex.history().empty());
    (void)globex.send("globex question");
    CHECK(s.provider->requests().back().messages.size() == 1);
    CHECK(s.store->get("acme", "shared-id")->version == 1);
    CHECK(s.store->get("globex", "shared-id")->version == 1);
    CHECK_FALSE(s.store->get("", "shared-id"));
}

TEST_CASE("a corrupt stored snapshot fails closed before a conversation exists",
          "[conversation][store]") {
    Stored s;
    s.provider->push_text("fine");
    auto conversation = s.client.conversation({.session_id = "good"});
    (void)conversation.send("hi");
    const std::string good = s.store->get("", "good")->snapshot;

    const auto restore_error =
        [&](const std::string& snapshot) -> std::pair<std::string, std::string> {
        s.store->remove("", "victim");
        s.store->put("", "victim", snapshot, 0);
        try {
            (void)s.client.conversation({.session_id = "victim"});
        } catch (const ullm::InvalidConversationSnapshotError& error) {
            return {error.code(), error.path()};
        }
        return {"no error", ""};
    };
    json moved = json::parse(good);
    moved["session_id"] = "victim";
    CHECK(restore_error(moved.dump()).first == "no error");
    CHECK(restore_error(good) ==
          std::pair<std::string, std::string>{"invalid_conversation_snapshot", "/session_id"});
    CHECK(restore_error(good.substr(0, good.size() / 2)).first == "invalid_conversation_snapshot");
    json bad_role = moved;
    bad_role["messages"][0]["role"] = "wizard";
    CHECK(restore_error(bad_role.dump()).second.rfind("/messages/0", 0) == 0);
    json bad_totals = moved;
    bad_totals["totals"]["cost_usd"] = -1;
    CHECK(restore_error(bad_totals.dump()).second == "/totals/cost_usd");
    json other_tenant = moved;
    other_tenant["tenant"] = "intruder";
    CHECK(restore_error(other_tenant.dump()).second == "/tenant");
}

TEST_CASE("a second writer of the same session gets a conflict and commits nothing",
          "[conversation][store]") {
    Stored s;
    s.provider->push_text("first");
    s.provider->push_text("second");
    auto one = s.client.conversation({.session_id = "contended"});
    auto two = s.client.conversation({.session_id = "contended"});
    (void)one.send("from one");
    try {
        (void)two.send("from two");
        FAIL("no conflict");
    } catch (const ullm::SessionStoreConflictError& error) {
        CHECK(error.code() == "session_store_conflict");
        CHECK(error.status() == 409);
        CHECK(error.retryable());
    }
    // The loser took the winner's state (and recorded its own spend on top, version 2):
    // retrying the turn now works.
    CHECK(two.version() == 2);
    CHECK(two.history().size() == 2);
    s.provider->push_text("second, retried");
    CHECK(two.send("from two").text == "second, retried");
    CHECK(two.version() == 3);
    // The store holds the first writer's turn; a fresh restore sees it.
    auto fresh = s.client.conversation({.session_id = "contended"});
    REQUIRE(fresh.history().size() == 4);
    CHECK(fresh.history()[0].text() == "from one");
}

TEST_CASE("persisted spend counts against the budget after a restore", "[conversation][store]") {
    Stored s;
    const auto prices = std::make_shared<const ullm::PriceTable>(ullm::PriceTable::parse(
        {{"models",
          {{"scripted/*", {{"input", 10}, {"output", 10}, {"lastUpdated", "2026-11-01"}}}}}}));
    const ullm::Client client({.default_model = "scripted/model-a",
                               .providers = {s.provider},
                               .prices = prices,
                               .session_store = s.store});
    s.provider->push_text("expensive", {1000, 1000});  // $0.02
    (void)client.conversation({.session_id = "b", .max_tokens = 100, .budget_usd = 0.03})
        .send("one");
    s.provider->push_text("again", {1000, 1000});
    auto restored =
        client.conversation({.session_id = "b", .max_tokens = 100, .budget_usd = 0.021});
    CHECK(restored.totals().cost_usd == Approx(0.02));
    CHECK(error_code_of([&] { (void)restored.send("two"); }) == "budget_exceeded");
}

TEST_CASE("clear and failed turns are persisted too", "[conversation][store]") {
    Stored s;
    s.provider->push_text("one", {5, 5});
    s.provider->push_tool_call("echo", json::object(), "", "", {7, 7});
    auto conversation =
        s.client.conversation({.session_id = "c", .tools = {echo_tool()}, .max_tool_rounds = 0});
    (void)conversation.send("a");
    conversation.clear();
    CHECK(s.store->get("", "c")->version == 2);
    CHECK(error_code_of([&] { (void)conversation.send("b"); }) == "max_tool_rounds_exceeded");
    auto restored = s.client.conversation({.session_id = "c"});
    CHECK(restored.history().empty());
    CHECK(restored.totals().input_tokens == 12);  // The failed turn's spend survived.
    CHECK(restored.totals().rounds == 2);
}

TEST_CASE("replay state survives a restore and reaches the same model", "[conversation][store]") {
    Stored s;
    ullm::ChatResponse call;
    call.message.role = ullm::Role::assistant;
    call.message.parts.emplace_back(ullm::ToolCallPart{"call_1", "echo", json::object()});
    call.message.replay = ullm::ReplayState{"scripted", "model-a", {{"signature", "sig-9"}}};
    call.tool_calls = call.message.tool_calls();
    s.provider->push(call);
    s.provider->push_text("done");
    s.provider->push_text("next");
    (void)s.client.conversation({.session_id = "r", .tools = {echo_tool()}}).send("go");
    auto restored = s.client.conversation({.session_id = "r", .tools = {echo_tool()}});
    (void)restored.send("again");
    const auto sent = s.provider->requests().back().messages;
    REQUIRE(sent.size() == 5);
    REQUIRE(sent[1].replay);
    CHECK(sent[1].replay->data["signature"] == "sig-9");
    CHECK_FALSE(restored.history()[1].replay);
}

TEST_CASE("a turn whose messages a load would refuse is not written, and the session stays",
          "[conversation][store]") {
    Stored s;
    auto conversation = s.client.conversation({.session_id = "kept", .tools = {echo_tool()}});
    s.provider->push_text("hi");
    (void)conversation.send("hello");
    const auto before = s.store->get("", "kept");
    REQUIRE(before.has_value());

    // Arguments nested 252 levels pass every check of a tool call, but inside the stored
    // snapshot (under messages, the message, its parts and the part) they nest deeper than a
    // load accepts: the write is refused, with the path a load would name.
    json deep = json::object();
    for (int level = 1; level < 252; ++level) deep = json{{"a", std::move(deep)}};
    s.provider->push_tool_call("echo", deep);
    s.provider->push_text("done");
    try {
        (void)conversation.send("go deep");
        FAIL("the turn was written");
    } catch (const ullm::InvalidConversationSnapshotError& error) {
        CHECK(error.path().rfind("/messages/3/parts/0/arguments/a/a", 0) == 0);
        CHECK(error.constraint() == "nests deeper than 256 levels");
    }
    CHECK(conversation.history().size() == 2);
    const auto after = s.store->get("", "kept");
    REQUIRE(after.has_value());
    CHECK(ullm::parse_snapshot_text(after->snapshot).messages.size() == 2);  // only the spend

    // One level less is written, and loads.
    json shallower = json::object();
    for (int level = 1; level < 251; ++level) shallower = json{{"a", std::move(shallower)}};
    s.provider->push_tool_call("echo", shallower);
    s.provider->push_text("done");
    (void)conversation.send("not as deep");
    const auto written = s.store->get("", "kept");
    REQUIRE(written.has_value());
    CHECK(ullm::parse_snapshot_text(written->snapshot).messages.size() == 6);
    CHECK(s.client.conversation({.session_id = "kept"}).history().size() == 6);
}

}  // namespace conversation_store_test
