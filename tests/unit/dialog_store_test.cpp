// Dialog instances in a session store: written after every turn, loaded on first use by a new
// Dialog (a restarted process), refused whole when the record is bad.

#include <ullm/dialog/dialog.hpp>

#include <ullm/core/error.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"

namespace dialog_store_test {

using ullm::json;
using ullm::test::error_code_of;

namespace {

// A scripted client (its `provider` and `client`), cells and a store.
struct Stored : ullm::test::ScriptedClient {
    std::shared_ptr<ullm::CellSpace> space = std::make_shared<ullm::CellSpace>();
    ullm::CellLink notes =
        space->create(json::array(), std::nullopt, "notes-list-0123456789abcdef");
    std::shared_ptr<ullm::MemorySessionStore> store = std::make_shared<ullm::MemorySessionStore>();
    json schema = ullm::schema::object({{"summary", ullm::schema::string()}}, {"summary"});

    // A new Dialog over the same client, cells and store: what a restarted process builds.
    ullm::Dialog dialog(const std::string& tenant = {}) {
        return ullm::Dialog(client, space,
                            {.result_schema = schema, .session_store = store, .tenant = tenant});
    }

    // The stored record of `instance`, as JSON.
    json record(const std::string& instance, const std::string& tenant = {}) {
        const auto stored = store->get(tenant, instance);
        REQUIRE(stored);
        return json::parse(stored->snapshot);
    }

    void overwrite(const std::string& instance, const json& record) {
        const auto stored = store->get("", instance);
        (void)store->put("", instance, record.dump(), stored ? stored->version : 0);
    }
};

}  // namespace

TEST_CASE("a stored dialog instance comes back whole in a new Dialog", "[dialog][dialog_store]") {
    Stored s;
    s.provider->push_tool_call("pin", {{"path", s.notes.to_string()}, {"name", "Shopping"}});
    s.provider->push_tool_call("presentResult", {{"summary", "one pin"}});
    s.provider->push_text("Pinned and summarised.");
    std::vector<ullm::Message> before;
    {
        auto first = s.dialog();
        const auto turn = first.send("alice", "pin my notes and sum up");
        REQUIRE(turn.status == ullm::DialogTurnStatus::completed);
        CHECK(turn.turn_id == 1);
        before = first.transcript("alice", true);
    }
    const json record = s.record("alice");
    CHECK(record["format"] == "ullm.dialog_instance");
    CHECK(record["pins"] == json::array({{{"name", "Shopping"}, {"link", s.notes.to_string()}}}));
    CHECK(record["result"] == json{{"summary", "one pin"}});
    CHECK(record["turn_id"] == 1);

    auto second = s.dialog();
    CHECK(second.transcript("alice", true) == before);
    const auto info = second.info("alice");
    CHECK(info.turn_id == 1);
    REQUIRE(info.result);
    CHECK(*info.result == json{{"summary", "one pin"}});
    CHECK(second.system_prompt("alice").find("## Shopping") != std::string::npos);

    s.provider->push_text("Still pinned.");
    const auto next = second.send("alice", "and now?");
    CHECK(next.status == ullm::DialogTurnStatus::completed);
    CHECK(next.turn_id == 2);  // Counts on from the stored turn.
    const auto request = s.provider->requests().back();
    CHECK(request.messages.size() == before.size() + 1);
    CHECK(request.system.find("## Shopping") != std::string::npos);
    CHECK(s.record("alice")["turn_id"] == 2);
    // Another instance and another tenant start empty.
    CHECK(second.transcript("bob").empty());
    CHECK(s.dialog("acme").transcript("alice").empty());
}

TEST_CASE("a bad stored dialog record is refused with its path and left as it is",
          "[dialog][dialog_store]") {
    Stored s;
    s.provider->push_tool_call("pin", {{"path", s.notes.to_string()}, {"name", "Shopping"}});
    s.provider->push_text("Pinned.");
    {
        auto first = s.dialog();
        REQUIRE(first.send("alice", "pin").status == ullm::DialogTurnStatus::completed);
    }
    const json good = s.record("alice");
    const auto refused_at = [&](const json& bad, const std::string& path) {
        s.overwrite("alice", bad);
        const std::string written = s.store->get("", "alice")->snapshot;
        auto dialog = s.dialog();
        const auto turn = dialog.send("alice", "hello?");
        CHECK(turn.status == ullm::DialogTurnStatus::failed);
        CHECK(turn.error_code == "invalid_conversation_snapshot");
        INFO(turn.text);
        CHECK(turn.text.find("at " + path + ":") == 0);
        CHECK(error_code_of([&] { (void)dialog.transcript("alice"); }) ==
              "invalid_conversation_snapshot");
        CHECK(s.store->get("", "alice")->snapshot == written);  // Left as it was.
    };
    const std::size_t requests = s.provider->requests().size();

    json bad = good;
    bad["pins"][0]["link"] = "/of:short/x";
    refused_at(bad, "/pins/0/link");
    bad = good;
    bad["format"] = "something else";
    refused_at(bad, "/format");
    bad = good;
    bad["format_version"] = 2;
    refused_at(bad, "/format_version");
    bad = good;
    bad["turn_id"] = -1;
    refused_at(bad, "/turn_id");
    bad = good;
    bad["surprise"] = true;
    refused_at(bad, "/surprise");
    bad = good;
    bad.erase("pattern_instances");
    refused_at(bad, "/pattern_instances");
    bad = good;
    bad["conversation"]["messages"][0]["role"] = "wizard";
    refused_at(bad, "/conversation/messages/0/role");
    bad = good;
    bad["conversation"]["session_id"] = "mallory";
    refused_at(bad, "/session_id");
    CHECK(s.provider->requests().size() == requests);  // Nothing was sent.

    // Not JSON at all.
    (void)s.store->put("", "alice", "{\"format\":", s.store->get("", "alice")->version);
    auto dialog = s.dialog();
    CHECK(dialog.send("alice", "hello?").error_code == "invalid_conversation_snapshot");

    // Put right, the instance loads again.
    s.overwrite("alice", good);
    s.provider->push_text("Back.");
    auto repaired = s.dialog();
    CHECK(repaired.send("alice", "hello?").status == ullm::DialogTurnStatus::completed);
}

TEST_CASE("with a store, instance names must be session ids", "[dialog][dialog_store]") {
    Stored s;
    auto dialog = s.dialog();
    const auto turn = dialog.send("line\nbreak", "hi");
    CHECK(turn.status == ullm::DialogTurnStatus::failed);
    CHECK(turn.error_code == "invalid_session_id");
    CHECK(error_code_of([&] { (void)dialog.info("line\nbreak"); }) == "invalid_session_id");
    CHECK(s.provider->requests().empty());
}

TEST_CASE("two dialogs writing one stored instance: the late writer fails, then goes on",
          "[dialog][dialog_store]") {
    Stored s;
    auto left = s.dialog();
    auto right = s.dialog();
    CHECK(left.transcript("alice").empty());
    CHECK(right.transcript("alice").empty());  // Both loaded the empty instance.
    s.provider->push_tool_call("presentResult", {{"summary", "left's"}});
    s.provider->push_text("left done");
    CHECK(left.send("alice", "from left").status == ullm::DialogTurnStatus::completed);
    s.provider->push_text("right done");
    const auto refused = right.send("alice", "from right");
    CHECK(refused.status == ullm::DialogTurnStatus::failed);
    CHECK(refused.error_code == "session_store_conflict");
    // The refusal brought the stored state in: transcript, result and turn id.
    CHECK(right.transcript("alice") == left.transcript("alice"));
    REQUIRE(right.info("alice").result);
    CHECK(*right.info("alice").result == json{{"summary", "left's"}});
    s.provider->push_text("right done");
    const auto retried = right.send("alice", "from right");
    CHECK(retried.status == ullm::DialogTurnStatus::completed);
    CHECK(retried.turn_id == 2);  // After the stored turn 1 (left's), whatever right tried.
    CHECK(s.record("alice")["turn_id"] == 2);
    CHECK(left.transcript("alice").size() == 4);  // left has not looked since
}

TEST_CASE("a stored instance removed by another process starts afresh, pins and result too",
          "[dialog][dialog_store]") {
    Stored s;
    auto dialog = s.dialog();
    s.provider->push_tool_call("pin", {{"path", s.notes.to_string()}, {"name", "Shopping"}});
    s.provider->push_tool_call("presentResult", {{"summary", "one pin"}});
    s.provider->push_text("Pinned.");
    REQUIRE(dialog.send("alice", "pin").status == ullm::DialogTurnStatus::completed);
    REQUIRE(dialog.info("alice").result);
    REQUIRE(s.store->remove("", "alice"));

    // The next write finds the session gone: the turn fails as a conflict, and the instance
    // takes what the store holds, which is nothing.
    s.provider->push_text("lost");
    const auto refused = dialog.send("alice", "still there?");
    CHECK(refused.status == ullm::DialogTurnStatus::failed);
    CHECK(refused.error_code == "session_store_conflict");
    CHECK(dialog.transcript("alice").empty());
    CHECK_FALSE(dialog.info("alice").result);
    CHECK(dialog.system_prompt("alice").find("## Shopping") == std::string::npos);

    s.provider->push_text("Fresh start.");
    const auto fresh = dialog.send("alice", "hello again");
    CHECK(fresh.status == ullm::DialogTurnStatus::completed);
    CHECK(dialog.transcript("alice").size() == 2);
    const json record = s.record("alice");
    CHECK(record["pins"].empty());
    CHECK_FALSE(record.contains("result"));
}

namespace {

// A store whose writes fail while `broken` is set; reads and the rest pass through.
class FlakyStore final : public ullm::SessionStore {
public:
    std::shared_ptr<ullm::MemorySessionStore> inner = std::make_shared<ullm::MemorySessionStore>();
    std::atomic<bool> broken{false};

    std::optional<ullm::StoredSession> get(std::string_view tenant,
                                           std::string_view session_id) override {
        return inner->get(tenant, session_id);
    }
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override {
        if (broken) throw ullm::SessionStoreError("the disk is full");
        return inner->put(tenant, session_id, snapshot, expected_version);
    }
    bool remove(std::string_view tenant, std::string_view session_id) override {
        return inner->remove(tenant, session_id);
    }
    ullm::SessionPage list(std::string_view tenant,
                           const ullm::SessionListOptions& options) override {
        return inner->list(tenant, options);
    }
};

}  // namespace

TEST_CASE("a dialog turn whose record cannot be written fails and keeps nothing",
          "[dialog][dialog_store]") {
    Stored s;
    auto flaky = std::make_shared<FlakyStore>();
    ullm::Dialog dialog(s.client, s.space, {.session_store = flaky});
    s.provider->push_text("first answer");
    REQUIRE(dialog.send("alice", "first").status == ullm::DialogTurnStatus::completed);
    const auto stored = flaky->inner->get("", "alice")->snapshot;

    flaky->broken = true;
    s.provider->push_text("lost answer");
    const auto failed = dialog.send("alice", "second");
    CHECK(failed.status == ullm::DialogTurnStatus::failed);
    CHECK(failed.error_code == "session_store_failed");
    CHECK(dialog.transcript("alice").size() == 2);  // the turn is not kept in memory either
    CHECK(flaky->inner->get("", "alice")->snapshot == stored);
    CHECK_FALSE(dialog.info("alice").pending);

    flaky->broken = false;
    s.provider->push_text("second answer");
    const auto retried = dialog.send("alice", "second");
    CHECK(retried.status == ullm::DialogTurnStatus::completed);
    CHECK(dialog.transcript("alice").size() == 4);
    CHECK(ullm::Dialog(s.client, s.space, {.session_store = flaky}).transcript("alice") ==
          dialog.transcript("alice"));
}

TEST_CASE("run cells a stored transcript mentions are kept by the Dialog that loads it",
          "[dialog][dialog_store]") {
    Stored s;
    const auto add =
        s.space->add_handler({.description = "Adds a note",
                              .input_schema = ullm::schema::object(),
                              .writes = {s.notes},
                              .run = [notes = s.notes](const json& input, ullm::CellWriter& cells) {
                                  cells.set(notes.child("-"), "note");
                                  cells.set(ullm::parse_link(input["result"]), {{"added", true}});
                              }});
    s.provider->push_tool_call("invoke", {{"path", add.to_string()}});
    s.provider->push_text("added");
    ullm::CellLink result;
    std::optional<ullm::Dialog> second;
    {
        auto first = s.dialog();
        REQUIRE(first.send("alice", "add a note").status == ullm::DialogTurnStatus::completed);
        result = ullm::parse_link(
            first.transcript("alice").at(2).tool_results().at(0).result["@resultLocation"]);
        // Loaded while the first still lives: the second keeps what its transcript mentions.
        second.emplace(s.client, s.space,
                       ullm::DialogOptions{.result_schema = s.schema, .session_store = s.store});
        CHECK(second->transcript("alice") == first.transcript("alice"));
    }
    (void)s.space->collect();
    CHECK(s.space->get(result) == json{{"added", true}});

    // With no live Dialog mentioning it, the cell goes; the record still loads whole, and the
    // model's link to the released cell is answered unknown_cell.
    second.reset();
    CHECK(s.space->collect() == 1);
    auto third = s.dialog();
    CHECK(third.transcript("alice").size() == 4);
    s.provider->push_tool_call("read", {{"path", result.to_string()}});
    s.provider->push_text("it is gone");
    const auto turn = third.send("alice", "read it again");
    CHECK(turn.status == ullm::DialogTurnStatus::completed);
    const auto transcript = third.transcript("alice");
    REQUIRE(transcript.size() == 8);
    const auto read = transcript[6].tool_results().at(0);
    CHECK(read.is_error);
    CHECK(read.result.get<std::string>().rfind("There is no cell", 0) == 0);
    CHECK(s.record("alice")["turn_id"] == 2);
}

}  // namespace dialog_store_test
