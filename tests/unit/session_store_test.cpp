#include <ullm/store/session_store.hpp>

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/file_session_store.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/temp_dir.hpp"

#if defined(ULLM_HAVE_POSTGRES)
#include <ullm/store/postgres_session_store.hpp>
#include <ullm/store/postgres_usage_ledger.hpp>

#include <atomic>

#include "support/postgres_server.hpp"
#endif
#if defined(ULLM_HAVE_REDIS)
#include <ullm/store/redis_session_store.hpp>

#include "support/redis_server.hpp"
#endif

namespace session_store_test {

namespace fs = std::filesystem;
using ullm::SessionListOptions;
using ullm::SessionStore;
using ullm::test::TempDir;

namespace {

using StoreFactory = std::function<std::shared_ptr<SessionStore>()>;

// The code of the `ullm::Error` that `action` throws, or "" when it throws none.
std::string error_code(const std::function<void()>& action) {
    try {
        action();
    } catch (const ullm::Error& error) {
        return error.code();
    }
    return "";
}

// Every session of `tenant`, page by page, checking the paging rules on the way.
std::vector<ullm::SessionSummary> list_all(SessionStore& store, const std::string& tenant,
                                           std::size_t limit, std::size_t* pages = nullptr) {
    std::vector<ullm::SessionSummary> all;
    SessionListOptions options{.limit = limit};
    std::size_t count = 0;
    for (;;) {
        const ullm::SessionPage page = store.list(tenant, options);
        ++count;
        REQUIRE(page.sessions.size() <= limit);
        all.insert(all.end(), page.sessions.begin(), page.sessions.end());
        if (page.next_cursor.empty()) break;
        REQUIRE(page.sessions.size() == limit);
        options.cursor = page.next_cursor;
        REQUIRE(count < 10000);
    }
    if (pages != nullptr) *pages = count;
    return all;
}

std::vector<std::string> ids_of(const std::vector<ullm::SessionSummary>& sessions) {
    std::vector<std::string> out;
    for (const auto& session : sessions) out.push_back(session.session_id);
    return out;
}

// The behaviour every SessionStore promises, run against a fresh store from `make`.
void check_session_store_contract(const StoreFactory& make) {
    const std::shared_ptr<SessionStore> store = make();
    REQUIRE(store != nullptr);

    SECTION("a first put creates version 1 and a second create conflicts") {
        CHECK(store->put("acme", "s1", R"({"n":1})", 0) == 1);
        const auto stored = store->get("acme", "s1");
        REQUIRE(stored.has_value());
        CHECK(stored->tenant == "acme");
        CHECK(stored->session_id == "s1");
        CHECK(stored->version == 1);
        CHECK(stored->snapshot == R"({"n":1})");
        try {
            store->put("acme", "s1", "other", 0);
            FAIL("a second create must conflict");
        } catch (const ullm::SessionStoreConflictError& error) {
            CHECK(error.expected_version() == 0);
            CHECK(error.actual_version() == 1);
        }
        CHECK(store->get("acme", "s1")->snapshot == R"({"n":1})");
    }

    SECTION("versioned updates count up and the latest snapshot wins") {
        std::uint64_t version = 0;
        for (int i = 1; i <= 5; ++i) {
            version = store->put("", "chat", "turn " + std::to_string(i), version);
            CHECK(version == static_cast<std::uint64_t>(i));
        }
        const auto stored = store->get("", "chat");
        REQUIRE(stored.has_value());
        CHECK(stored->version == 5);
        CHECK(stored->snapshot == "turn 5");
        CHECK(stored->tenant.empty());
    }

    SECTION("a stale or future version conflicts and writes nothing") {
        store->put("t", "s", "one", 0);
        store->put("t", "s", "two", 1);
        try {
            store->put("t", "s", "stale", 1);
            FAIL("a stale version must conflict");
        } catch (const ullm::SessionStoreConflictError& error) {
            CHECK(error.code() == "session_store_conflict");
            CHECK(error.status() == 409);
            CHECK(error.retryable());
            CHECK(error.expected_version() == 1);
            CHECK(error.actual_version() == 2);
            CHECK(std::string(error.what()).rfind("[ullm.session_store_conflict] ", 0) == 0);
        }
        try {
            store->put("t", "s", "future", 7);
            FAIL("a future version must conflict");
        } catch (const ullm::SessionStoreConflictError& error) {
            CHECK(error.expected_version() == 7);
            CHECK(error.actual_version() == 2);
        }
        try {
            store->put("t", "missing", "x", 3);
            FAIL("updating a missing session must conflict");
        } catch (const ullm::SessionStoreConflictError& error) {
            CHECK(error.expected_version() == 3);
            CHECK(error.actual_version() == 0);
        }
        const auto stored = store->get("t", "s");
        REQUIRE(stored.has_value());
        CHECK(stored->version == 2);
        CHECK(stored->snapshot == "two");
        CHECK_FALSE(store->get("t", "missing").has_value());
    }

    SECTION("a missing session reads as nullopt and an unknown tenant lists nothing") {
        CHECK_FALSE(store->get("", "nobody").has_value());
        CHECK_FALSE(store->get("ghost-tenant", "nobody").has_value());
        const auto page = store->list("ghost-tenant");
        CHECK(page.sessions.empty());
        CHECK(page.next_cursor.empty());
    }

    SECTION("remove deletes the session and reports whether it existed") {
        store->put("t", "gone", "x", 0);
        store->put("t", "kept", "y", 0);
        CHECK(store->remove("t", "gone"));
        CHECK_FALSE(store->get("t", "gone").has_value());
        CHECK_FALSE(store->remove("t", "gone"));
        CHECK_FALSE(store->remove("other-tenant", "kept"));
        CHECK(store->get("t", "kept")->snapshot == "y");
        CHECK(ids_of(store->list("t").sessions) == std::vector<std::string>{"kept"});
        // A removed session starts again from version 1.
        CHECK(store->put("t", "gone", "again", 0) == 1);
    }

    SECTION("the same session id under two tenants is two records") {
        store->put("", "shared", "default tenant", 0);
        store->put("acme", "shared", "acme", 0);
        store->put("acme", "shared", "acme v2", 1);
        store->put("globex", "only-globex", "g", 0);
        CHECK(store->get("", "shared")->snapshot == "default tenant");
        CHECK(store->get("", "shared")->version == 1);
        CHECK(store->get("acme", "shared")->snapshot == "acme v2");
        CHECK(store->get("acme", "shared")->version == 2);
        CHECK_FALSE(store->get("acme", "only-globex").has_value());
        CHECK(ids_of(store->list("acme").sessions) == std::vector<std::string>{"shared"});
        CHECK(ids_of(store->list("globex").sessions) == std::vector<std::string>{"only-globex"});
        CHECK(ids_of(store->list("").sessions) == std::vector<std::string>{"shared"});
        // Removing under one tenant leaves the other's record alone.
        CHECK(store->remove("acme", "shared"));
        CHECK(store->get("", "shared").has_value());
    }

    SECTION("list pages through 250 sessions in id order without gaps or repeats") {
        std::vector<std::string> ids;
        for (int i = 0; i < 250; ++i) {
            char name[32];
            std::snprintf(name, sizeof name, "session-%03d", i);
            ids.emplace_back(name);
        }
        std::vector<std::string> shuffled = ids;
        std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(42));
        for (const auto& id : shuffled) store->put("pager", id, "{}", 0);
        store->put("pager", "session-007", "{}", 1);
        store->put("other", "session-000-other", "{}", 0);

        std::size_t pages = 0;
        const auto all = list_all(*store, "pager", 100, &pages);
        CHECK(pages == 3);
        CHECK(ids_of(all) == ids);
        for (const auto& summary : all) {
            CHECK(summary.version == (summary.session_id == "session-007" ? 2U : 1U));
        }
        const auto first = store->list("pager", {.limit = 100});
        REQUIRE(first.sessions.size() == 100);
        CHECK_FALSE(first.next_cursor.empty());
        const auto stored = store->get("pager", first.sessions[7].session_id);
        REQUIRE(stored.has_value());
        CHECK(first.sessions[7].updated_at == stored->updated_at);
        CHECK(first.sessions[7].version == stored->version);

        // A page that ends exactly at the last session has no cursor.
        CHECK(list_all(*store, "pager", 125, &pages).size() == 250);
        CHECK(pages == 2);
        CHECK(list_all(*store, "pager", 1000, &pages).size() == 250);
        CHECK(pages == 1);
        CHECK(list_all(*store, "pager", 1, &pages).size() == 250);
        CHECK(pages == 250);
    }

    SECTION("a cursor stays valid while sessions are added and removed") {
        for (const char* id : {"a", "c", "e", "g"}) store->put("t", id, "{}", 0);
        const auto first = store->list("t", {.limit = 2});
        CHECK(ids_of(first.sessions) == std::vector<std::string>{"a", "c"});
        store->remove("t", "c");
        store->put("t", "b", "{}", 0);
        store->put("t", "d", "{}", 0);
        const auto second = store->list("t", {.limit = 2, .cursor = first.next_cursor});
        CHECK(ids_of(second.sessions) == std::vector<std::string>{"d", "e"});
    }

    SECTION("invalid keys, limits and cursors are refused with their codes") {
        const std::string long_tenant(129, 't');
        const std::string long_id(257, 's');
        const std::string huge_id(10 * 1024, 'h');
        const std::vector<std::string> bad_texts = {
            std::string("a\nb"),         std::string("tab\t"),    std::string("del\x7f"),
            std::string("nul\0x", 5),    std::string("\xff"),     std::string("\xc0\xaf"),
            std::string("\xed\xa0\x80"), std::string("\xe2\x82"), std::string("\xf4\x90\x80\x80"),
            std::string("\x80")};
        for (const auto& bad : bad_texts) {
            CHECK(error_code([&] { (void)store->get(bad, "s"); }) == "invalid_tenant");
            CHECK(error_code([&] { (void)store->get("t", bad); }) == "invalid_session_id");
            CHECK(error_code([&] { store->put("t", bad, "x", 0); }) == "invalid_session_id");
            CHECK(error_code([&] { (void)store->list(bad); }) == "invalid_tenant");
        }
        CHECK(error_code([&] { (void)store->get(long_tenant, "s"); }) == "invalid_tenant");
        CHECK(error_code([&] { store->put(long_tenant, "s", "x", 0); }) == "invalid_tenant");
        CHECK(error_code([&] { store->remove(long_tenant, "s"); }) == "invalid_tenant");
        CHECK(error_code([&] { (void)store->list(long_tenant); }) == "invalid_tenant");
        CHECK(error_code([&] { (void)store->get("t", ""); }) == "invalid_session_id");
        CHECK(error_code([&] { (void)store->get("t", long_id); }) == "invalid_session_id");
        CHECK(error_code([&] { store->put("t", huge_id, "x", 0); }) == "invalid_session_id");
        CHECK(error_code([&] { (void)store->get(huge_id, "s"); }) == "invalid_tenant");
        CHECK(error_code([&] { store->put("t", "", "x", 0); }) == "invalid_session_id");
        CHECK(error_code([&] { store->remove("t", long_id); }) == "invalid_session_id");

        CHECK(error_code([&] { (void)store->list("t", {.limit = 0}); }) == "invalid_list_limit");
        CHECK(error_code([&] { (void)store->list("t", {.limit = 1001}); }) == "invalid_list_limit");
        for (const char* cursor : {"zz", "abc", "ABCD", "0a", "00", "not a cursor", "ff"}) {
            CHECK(error_code([&] { (void)store->list("t", {.cursor = cursor}); }) ==
                  "invalid_cursor");
        }
        CHECK(error_code([&] {
                  (void)store->list("t", {.cursor = std::string(std::size_t{2} * 257, 'a')});
              }) == "invalid_cursor");
        try {
            (void)store->list("t", {.limit = 0});
        } catch (const ullm::InvalidOptionError& error) {
            CHECK(error.status() == 400);
            CHECK_FALSE(error.retryable());
        }
        // Nothing was written by any refused call.
        CHECK(store->list("t").sessions.empty());
    }

    SECTION("keys at the limits and keys that look like paths are ordinary distinct keys") {
        // The 100-byte tenant's directory is the parent of the 128-byte tenant's (hex names
        // are cut in 200-character pieces): neither may see the other's sessions.
        const std::string tenant_128(128, 'T');
        const std::string tenant_100(100, 'T');
        const std::string prefix(150, 'p');
        std::string accents;
        for (int i = 0; i < 128; ++i) accents += "\xc3\xa9";
        const std::vector<std::string> valid = {
            "../x", "/", ".", "..", "a/b", "A", "a", "CON", "name.rec", ".tmp-1-1", "lock",
            "FORMAT", "caf\xc3\xa9", "\xf0\x9f\x98\x80", std::string(256, 'z'), accents,
            prefix + "1", prefix + "2", prefix, std::string(100, 'q'), std::string(200, 'r'),
            // SQL, LIKE and glob characters, key separators.
            "'; DROP TABLE ullm_sessions; --", "\"quoted\"", "%", "_", "a%", "a_", "*", "a*",
            "[ab]", "?", ":", "a:b", "{t}", "\\x00"};
        for (const auto& tenant :
             {std::string(), tenant_128, tenant_100, std::string("../t"), std::string("t"),
              std::string("T"), std::string("%"), std::string("*"), std::string("t:")}) {
            for (const auto& id : valid) store->put(tenant, id, tenant + "|" + id, 0);
        }
        for (const auto& tenant :
             {std::string(), tenant_128, tenant_100, std::string("../t"), std::string("t"),
              std::string("T"), std::string("%"), std::string("*"), std::string("t:")}) {
            for (const auto& id : valid) {
                const auto stored = store->get(tenant, id);
                REQUIRE(stored.has_value());
                CHECK(stored->snapshot == tenant + "|" + id);
            }
            std::vector<std::string> sorted = valid;
            std::sort(sorted.begin(), sorted.end());
            CHECK(ids_of(list_all(*store, tenant, 7)) == sorted);
        }
        for (const auto& id : valid) CHECK(store->remove("t", id));
        CHECK(store->list("t").sessions.empty());
        CHECK(store->list("T").sessions.size() == valid.size());
    }

    SECTION("snapshots round-trip byte for byte") {
        const std::string binary("\0\x01\xff{\"a\":1}\r\n\n\x7f", 13);
        std::string large(std::size_t{3} * 1024 * 1024, '\0');
        for (std::size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 31 % 251);
        store->put("t", "empty", "", 0);
        store->put("t", "binary", binary, 0);
        store->put("t", "large", large, 0);
        CHECK(store->get("t", "empty")->snapshot.empty());
        CHECK(store->get("t", "binary")->snapshot == binary);
        CHECK(store->get("t", "large")->snapshot == large);
    }

    SECTION("updated_at is the time of the last write, to the millisecond") {
        using std::chrono::milliseconds;
        const auto before =
            std::chrono::time_point_cast<milliseconds>(std::chrono::system_clock::now());
        store->put("t", "clock", "{}", 0);
        const auto after = std::chrono::system_clock::now();
        const auto stored = store->get("t", "clock");
        REQUIRE(stored.has_value());
        CHECK(stored->updated_at >= before);
        CHECK(stored->updated_at <= after);
        CHECK(stored->updated_at.time_since_epoch() % milliseconds(1) ==
              std::chrono::system_clock::duration::zero());
    }

    SECTION("8 threads racing on versioned puts: one winner per version") {
        constexpr int threads = 8;
        constexpr int attempts = 25;
        std::vector<std::vector<std::uint64_t>> won(threads);
        std::vector<int> conflicts(threads, 0);
        std::vector<std::string> failures(threads);
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t) {
            workers.emplace_back([&, t] {
                try {
                    for (int i = 0; i < attempts; ++i) {
                        const auto current = store->get("race", "counter");
                        const std::uint64_t seen = current ? current->version : 0;
                        try {
                            won[static_cast<std::size_t>(t)].push_back(store->put(
                                "race", "counter",
                                "thread " + std::to_string(t) + " after " + std::to_string(seen),
                                seen));
                        } catch (const ullm::SessionStoreConflictError&) {
                            ++conflicts[static_cast<std::size_t>(t)];
                        }
                    }
                } catch (const std::exception& error) {
                    failures[static_cast<std::size_t>(t)] = error.what();
                }
            });
        }
        for (auto& worker : workers) worker.join();
        std::vector<std::uint64_t> all;
        int total_conflicts = 0;
        for (int t = 0; t < threads; ++t) {
            CHECK(failures[static_cast<std::size_t>(t)].empty());
            all.insert(all.end(), won[static_cast<std::size_t>(t)].begin(),
                       won[static_cast<std::size_t>(t)].end());
            total_conflicts += conflicts[static_cast<std::size_t>(t)];
        }
        std::sort(all.begin(), all.end());
        CHECK(all.size() + static_cast<std::size_t>(total_conflicts) ==
              static_cast<std::size_t>(threads * attempts));
        REQUIRE_FALSE(all.empty());
        // Versions 1..n, each won exactly once.
        for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == i + 1);
        const auto final_state = store->get("race", "counter");
        REQUIRE(final_state.has_value());
        CHECK(final_state->version == all.size());
        CHECK(final_state->snapshot.find(" after " + std::to_string(all.size() - 1)) !=
              std::string::npos);
    }
}

// The single record file under `root`.
fs::path only_record_file(const fs::path& root) {
    std::vector<fs::path> found;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        if (entry.is_regular_file() && entry.path().extension() == ".rec") {
            found.push_back(entry.path());
        }
    }
    REQUIRE(found.size() == 1);
    return found.front();
}

std::string read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
    REQUIRE(out.good());
}

void expect_store_failure(const std::function<void()>& action) {
    try {
        action();
        FAIL("expected SessionStoreError");
    } catch (const ullm::SessionStoreError& error) {
        CHECK(error.code() == "session_store_failed");
        CHECK(error.status() == 500);
        CHECK_FALSE(error.retryable());
        CHECK(std::string(error.what()).rfind("[ullm.session_store_failed] ", 0) == 0);
    }
}

// The snapshot rules are the conversation's, so a corrupt row fails closed the same way in
// every store (the same error code and path as SQLite), and the failed restore leaves the row
// as it was.
void check_corrupt_snapshots_fail_closed(const std::shared_ptr<SessionStore>& store) {
    const auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
    ullm::Client client{
        {.default_model = "scripted/model-a", .providers = {provider}, .session_store = store}};
    provider->push_text("fine");
    auto conversation = client.conversation({.session_id = "good", .tenant = "acme"});
    (void)conversation.send("hi");
    const std::string good = store->get("acme", "good")->snapshot;
    ullm::json moved = ullm::json::parse(good);
    moved["session_id"] = "victim";
    ullm::json other_tenant = moved;
    other_tenant["tenant"] = "intruder";
    ullm::json bad_totals = moved;
    bad_totals["totals"]["cost_usd"] = -1;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {good.substr(0, good.size() / 2), ""},
        {good, "/session_id"},
        {other_tenant.dump(), "/tenant"},
        {bad_totals.dump(), "/totals/cost_usd"},
        {std::string("\0\xff not json", 11), ""}};
    for (const auto& [snapshot, path] : cases) {
        store->remove("acme", "victim");
        store->put("acme", "victim", snapshot, 0);
        store->put("acme", "victim", snapshot, 1);
        try {
            (void)client.conversation({.session_id = "victim", .tenant = "acme"});
            FAIL("a corrupt snapshot must be refused");
        } catch (const ullm::InvalidConversationSnapshotError& error) {
            CHECK(error.code() == "invalid_conversation_snapshot");
            if (!path.empty()) CHECK(error.path() == path);
        }
        const auto after = store->get("acme", "victim");
        REQUIRE(after.has_value());
        CHECK(after->version == 2);
        CHECK(after->snapshot == snapshot);
    }
    store->remove("acme", "victim");
    store->put("acme", "victim", moved.dump(), 0);
    CHECK(client.conversation({.session_id = "victim", .tenant = "acme"}).version() == 1);
}

}  // namespace

TEST_CASE("a corrupt snapshot fails closed alike in every store and is left untouched",
          "[session_store]") {
    check_corrupt_snapshots_fail_closed(std::make_shared<ullm::MemorySessionStore>());
    const TempDir dir("corrupt");
    check_corrupt_snapshots_fail_closed(ullm::FileSessionStore::open(dir / "files"));
    check_corrupt_snapshots_fail_closed(ullm::SqliteSessionStore::open(":memory:"));
}

namespace {}  // namespace

TEST_CASE("validate_session_key accepts the documented keys and names what is wrong",
          "[session_store]") {
    CHECK_NOTHROW(ullm::validate_session_key("", "s"));
    CHECK_NOTHROW(ullm::validate_session_key(std::string(128, 'x'), std::string(256, 'y')));
    CHECK_NOTHROW(ullm::validate_session_key("caf\xc3\xa9", "\xf4\x8f\xbf\xbf"));
    CHECK(error_code([] { ullm::validate_session_key(std::string(129, 'x'), "s"); }) ==
          "invalid_tenant");
    CHECK(error_code([] { ullm::validate_session_key("", ""); }) == "invalid_session_id");
    CHECK(error_code([] { ullm::validate_session_key("", std::string(257, 'y')); }) ==
          "invalid_session_id");
    CHECK(error_code([] { ullm::validate_session_key("a\x1f", "s"); }) == "invalid_tenant");
    // Overlong "/" and an encoded surrogate are not UTF-8.
    CHECK(error_code([] { ullm::validate_session_key("", "\xc0\xaf"); }) == "invalid_session_id");
    CHECK(error_code([] { ullm::validate_session_key("", "\xe0\x80\xaf"); }) ==
          "invalid_session_id");
    CHECK(error_code([] { ullm::validate_session_key("", "\xed\xbf\xbf"); }) ==
          "invalid_session_id");
    try {
        ullm::validate_session_key("", "bad\x01");
        FAIL("a control character must be refused");
    } catch (const ullm::InvalidOptionError& error) {
        CHECK(error.status() == 400);
        CHECK_FALSE(error.retryable());
        CHECK(std::string(error.what()).find("control character") != std::string::npos);
    }
}

TEST_CASE("MemorySessionStore meets the session store contract", "[session_store]") {
    check_session_store_contract([] { return std::make_shared<ullm::MemorySessionStore>(); });
}

TEST_CASE("FileSessionStore meets the session store contract", "[session_store]") {
    const TempDir dir("file-store");
    check_session_store_contract([&] { return ullm::FileSessionStore::open(dir / "store"); });
}

TEST_CASE("SqliteSessionStore meets the session store contract on disk", "[session_store]") {
    const TempDir dir("sqlite-store");
    check_session_store_contract(
        [&] { return ullm::SqliteSessionStore::open((dir / "sessions.db").string()); });
}

TEST_CASE("SqliteSessionStore meets the session store contract in memory", "[session_store]") {
    check_session_store_contract([] { return ullm::SqliteSessionStore::open(":memory:"); });
}

TEST_CASE("FileSessionStore and SqliteSessionStore keep their data across reopening",
          "[session_store]") {
    const TempDir dir("reopen");
    const std::vector<StoreFactory> factories = {
        [&] { return ullm::FileSessionStore::open(dir / "files"); },
        [&] { return ullm::SqliteSessionStore::open((dir / "sessions.db").string()); }};
    for (const auto& make : factories) {
        {
            const auto store = make();
            store->put("acme", "s1", "first", 0);
            store->put("acme", "s1", "second", 1);
            store->put("", "s2", "other", 0);
        }
        const auto store = make();
        const auto stored = store->get("acme", "s1");
        REQUIRE(stored.has_value());
        CHECK(stored->version == 2);
        CHECK(stored->snapshot == "second");
        CHECK(ids_of(store->list("").sessions) == std::vector<std::string>{"s2"});
        CHECK(store->put("acme", "s1", "third", 2) == 3);
    }
}

TEST_CASE("FileSessionStore reports a damaged record as session_store_failed", "[session_store]") {
    const TempDir dir("damaged");
    const auto store = ullm::FileSessionStore::open(dir / "store");
    store->put("t", "s", R"({"history":["hello there"]})", 0);
    const fs::path file = only_record_file(dir / "store");
    const std::string good = read_bytes(file);

    std::string flipped = good;
    flipped[flipped.size() - 3] ^= 0x01;
    std::string bad_version = good;
    bad_version.replace(bad_version.find("version 1"), 9, "version 2");
    const std::vector<std::string> damaged = {flipped,
                                              good.substr(0, good.size() - 1),
                                              good + "x",
                                              good.substr(0, 20),
                                              "",
                                              bad_version,
                                              "garbage\n\n" + good};
    for (const auto& bytes : damaged) {
        write_bytes(file, bytes);
        expect_store_failure([&] { (void)store->get("t", "s"); });
        expect_store_failure([&] { store->put("t", "s", "new", 1); });
    }
    // The message names the file, never the snapshot.
    write_bytes(file, flipped);
    try {
        (void)store->get("t", "s");
    } catch (const ullm::SessionStoreError& error) {
        CHECK(std::string(error.what()).find("hello") == std::string::npos);
        CHECK(std::string(error.what()).find(file.filename().string()) != std::string::npos);
    }
    // A damaged record can be removed, and the session written afresh.
    CHECK(store->remove("t", "s"));
    CHECK(store->put("t", "s", "fresh", 0) == 1);
    CHECK(store->get("t", "s")->snapshot == "fresh");
}

TEST_CASE("FileSessionStore ignores and cleans up temporary files left by a crash",
          "[session_store]") {
    const TempDir dir("leftover");
    const auto store = ullm::FileSessionStore::open(dir / "store");
    store->put("t", "s", "kept", 0);
    const fs::path record = only_record_file(dir / "store");
    const fs::path temp = record.parent_path() / ".tmp-99999-0";
    write_bytes(temp, "half a rec");
    write_bytes(record.parent_path() / "unrelated.txt", "not ours");

    CHECK(store->get("t", "s")->snapshot == "kept");
    CHECK(store->put("t", "s", "updated", 1) == 2);
    CHECK(ids_of(store->list("t").sessions) == std::vector<std::string>{"s"});
    // The listing took the tenant's lock and removed the leftover; foreign files stay.
    CHECK_FALSE(fs::exists(temp));
    CHECK(fs::exists(record.parent_path() / "unrelated.txt"));
    CHECK(store->get("t", "s")->snapshot == "updated");
}

TEST_CASE("FileSessionStore keeps every file inside its directory", "[session_store]") {
    const TempDir dir("inside");
    const fs::path root = dir / "a" / "store";
    const auto store = ullm::FileSessionStore::open(root);
    for (const char* id : {"../x", "../../escape", "/", "/etc/passwd", ".", "..", "a/../../b"}) {
        store->put("../tenant", id, "x", 0);
        store->put("", id, "x", 0);
    }
    // Only the store's own directory exists beside it.
    std::vector<std::string> siblings;
    for (const auto& entry : fs::directory_iterator(dir.path())) {
        siblings.push_back(entry.path().filename().string());
    }
    CHECK(siblings == std::vector<std::string>{"a"});
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        const std::string name = entry.path().filename().string();
        CHECK(name.find_first_not_of("0123456789abcdefst.rcFORMATlok") == std::string::npos);
        const auto relative = fs::relative(entry.path(), root);
        CHECK(relative.string().rfind("..", 0) == std::string::npos);
    }
}

TEST_CASE("FileSessionStore refuses a directory of a newer or foreign layout", "[session_store]") {
    const TempDir dir("layout");
    fs::create_directories(dir / "newer");
    write_bytes(dir / "newer" / "FORMAT", "ullm.file_session_store 2\n");
    expect_store_failure([&] { (void)ullm::FileSessionStore::open(dir / "newer"); });
    fs::create_directories(dir / "foreign");
    write_bytes(dir / "foreign" / "FORMAT", "something else\n");
    expect_store_failure([&] { (void)ullm::FileSessionStore::open(dir / "foreign"); });
    write_bytes(dir / "a-file", "x");
    expect_store_failure([&] { (void)ullm::FileSessionStore::open(dir / "a-file"); });
}

TEST_CASE("SqliteSessionStore creates its schema and refuses a newer one", "[session_store]") {
    const TempDir dir("schema");
    const std::string path = (dir / "sessions.db").string();
    { (void)ullm::SqliteSessionStore::open(path)->put("t", "s", "x", 0); }

    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    const auto scalar = [&](const char* sql) {
        sqlite3_stmt* stmt = nullptr;
        REQUIRE(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK);
        REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
        std::string value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
        sqlite3_finalize(stmt);
        return value;
    };
    CHECK(scalar("PRAGMA user_version") == "1");
    CHECK(scalar("PRAGMA journal_mode") == "wal");
    CHECK(scalar("SELECT version || ':' || snapshot FROM ullm_sessions") == "1:x");
    REQUIRE(sqlite3_exec(db, "PRAGMA user_version = 2", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);

    try {
        (void)ullm::SqliteSessionStore::open(path);
        FAIL("a newer schema must be refused");
    } catch (const ullm::SessionStoreError& error) {
        CHECK(error.code() == "session_store_failed");
        CHECK_FALSE(error.retryable());
        CHECK(std::string(error.what()).find("schema version 2") != std::string::npos);
    }
}

TEST_CASE("SqliteSessionStore reports files it cannot use as session_store_failed",
          "[session_store]") {
    const TempDir dir("sqlite-bad");
    write_bytes(dir / "text.db", std::string(4096, 'x'));
    expect_store_failure([&] { (void)ullm::SqliteSessionStore::open((dir / "text.db").string()); });
    expect_store_failure(
        [&] { (void)ullm::SqliteSessionStore::open((dir / "no" / "such" / "x.db").string()); });
    expect_store_failure([] { (void)ullm::SqliteSessionStore::open(""); });
}

#if defined(ULLM_HAVE_POSTGRES)

namespace {

// A store on a fresh database of the process's throwaway cluster.
std::shared_ptr<ullm::PostgresSessionStore> open_postgres(const std::string& dbname,
                                                          std::size_t pool_size = 4) {
    auto& server = ullm::test::PostgresServer::instance();
    return ullm::PostgresSessionStore::open(
        {.connection_string = server.connection_string(dbname), .pool_size = pool_size});
}

}  // namespace

TEST_CASE("PostgresSessionStore meets the session store contract", "[session_store][postgres]") {
    check_session_store_contract([] {
        auto& server = ullm::test::PostgresServer::instance();
        return open_postgres(server.create_database());
    });
}

TEST_CASE("a corrupt snapshot in PostgresSessionStore fails closed and is left untouched",
          "[session_store][postgres]") {
    check_corrupt_snapshots_fail_closed(
        open_postgres(ullm::test::PostgresServer::instance().create_database()));
}

TEST_CASE("PostgresSessionStore creates its schema once and refuses a newer one",
          "[session_store][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    // Eight stores opening at once on an empty database take turns creating the schema.
    std::vector<std::thread> openers;
    std::atomic<int> opened{0};
    for (int i = 0; i < 8; ++i) {
        openers.emplace_back([&] {
            (void)open_postgres(db, 1);
            ++opened;
        });
    }
    for (auto& opener : openers) opener.join();
    CHECK(opened == 8);
    open_postgres(db)->put("t", "s", "x", 0);

    server.sql(db, "UPDATE ullm_schema SET version = 2");
    try {
        (void)open_postgres(db);
        FAIL("a newer schema must be refused");
    } catch (const ullm::SessionStoreError& error) {
        CHECK(error.code() == "session_store_failed");
        CHECK_FALSE(error.retryable());
        CHECK(std::string(error.what()).find("schema version 2") != std::string::npos);
    }
}

TEST_CASE("PostgresSessionStore fails closed on a corrupt row and leaves it untouched",
          "[session_store][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    const auto store = open_postgres(db);
    store->put("t", "bad", "{}", 0);
    server.sql(db,
               "ALTER TABLE ullm_sessions DROP CONSTRAINT ullm_sessions_version_check; "
               "UPDATE ullm_sessions SET version = -3 WHERE session_id = 'bad'");
    CHECK(ullm::test::error_code_of([&] { (void)store->get("t", "bad"); }) ==
          "session_store_failed");
    CHECK(ullm::test::error_code_of([&] { (void)store->list("t"); }) == "session_store_failed");
    CHECK(ullm::test::error_code_of([&] { store->put("t", "bad", "new", 1); }) ==
          "session_store_failed");
    // Not repaired, not overwritten.
    server.sql(db,
               "DO $$ BEGIN IF (SELECT version FROM ullm_sessions WHERE session_id = 'bad') "
               "<> -3 OR (SELECT snapshot FROM ullm_sessions WHERE session_id = 'bad') <> "
               "'{}'::bytea THEN RAISE EXCEPTION 'row changed'; END IF; END $$");
}

TEST_CASE("PostgresSessionStore reports a killed server as retryable and recovers after a restart",
          "[session_store][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    const auto store = open_postgres(db);
    CHECK(store->put("t", "s", "one", 0) == 1);
    // Every pooled connection is in use once, so that all of them see the server die.
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i) readers.emplace_back([&] { (void)store->get("t", "s"); });
    for (auto& reader : readers) reader.join();

    server.kill();
    try {
        store->put("t", "s", "two", 1);
        FAIL("a write to a dead server must fail");
    } catch (const ullm::SessionStoreError& error) {
        CHECK(error.code() == "session_store_failed");
        CHECK(error.retryable());
        CHECK(std::string(error.what()).find("127.0.0.1:" + std::to_string(server.port())) !=
              std::string::npos);
    }
    CHECK(ullm::test::error_code_of([&] { (void)store->get("t", "s"); }) == "session_store_failed");
    server.start();
    const auto stored = store->get("t", "s");
    REQUIRE(stored.has_value());
    CHECK(stored->snapshot == "one");
    CHECK(store->put("t", "s", "two", 1) == 2);
}

TEST_CASE("the Postgres components refuse invalid options before connecting",
          "[session_store][postgres]") {
    using namespace std::chrono_literals;
    // No server is listening there: the options are refused before any connection is tried.
    const std::string nowhere = "host=127.0.0.1 port=1 dbname=none";
    for (const ullm::PostgresStoreOptions& options :
         {ullm::PostgresStoreOptions{.connection_string = nowhere, .pool_size = 0},
          ullm::PostgresStoreOptions{.connection_string = nowhere, .pool_size = 65},
          ullm::PostgresStoreOptions{.connection_string = nowhere, .read_timeout = 0ms}}) {
        try {
            (void)ullm::PostgresSessionStore::open(options);
            FAIL("invalid options were taken");
        } catch (const ullm::SessionStoreError& error) {
            CHECK(error.code() == "session_store_failed");
            const std::string message = error.what();
            CHECK((message.find("pool size must be 1..64") != std::string::npos ||
                   message.find("read timeout must be positive") != std::string::npos));
        }
        CHECK(ullm::test::error_code_of([&] { (void)ullm::PostgresUsageLedger::open(options); }) ==
              "usage_ledger_failed");
    }
}

TEST_CASE("PostgresSessionStore fails a call to a server that stops answering, and recovers",
          "[session_store][postgres]") {
    using namespace std::chrono_literals;
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    const auto store = ullm::PostgresSessionStore::open(
        {.connection_string = server.connection_string(db), .read_timeout = 400ms});
    CHECK(store->put("t", "s", "one", 0) == 1);

    server.pause();  // the sockets stay open; nothing answers
    struct Failure {
        std::string code;
        bool retryable = false;
        std::string message;
    };
    auto pending = std::async(std::launch::async, [&] {
        try {
            (void)store->put("t", "s", "two", 1);
        } catch (const ullm::Error& error) {
            return Failure{error.code(), error.retryable(), error.what()};
        }
        return Failure{"no error"};
    });
    const bool ended = pending.wait_for(10s) == std::future_status::ready;
    server.resume();
    REQUIRE(ended);  // without the read deadline, the call would wait for ever
    const Failure failure = pending.get();
    CHECK(failure.code == "session_store_failed");
    CHECK(failure.retryable);
    CHECK(failure.message.find("did not answer within 400 ms") != std::string::npos);

    // The write may or may not have reached the table before the server froze: the version
    // says which, and the next versioned write goes on from it.
    const auto stored = store->get("t", "s");
    REQUIRE(stored.has_value());
    CHECK((stored->snapshot == "one" ? stored->version == 1 : stored->snapshot == "two"));
    CHECK(store->put("t", "s", "three", stored->version) == stored->version + 1);
}

TEST_CASE("PostgresSessionStore never shows the password or the connection string",
          "[session_store][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string secret = "s3cr%et-pw";
    const auto message_of = [](const std::string& connection) {
        try {
            (void)ullm::PostgresSessionStore::open(
                {.connection_string = connection, .connect_timeout_seconds = 2});
        } catch (const ullm::SessionStoreError& error) {
            CHECK(error.code() == "session_store_failed");
            return std::string(error.what());
        }
        FAIL("opening must fail");
        return std::string();
    };
    // A URI whose raw `%` libpq would quote, a refused port, and a wrong user.
    for (const std::string& connection :
         {"postgresql://ullm:" + secret + "@127.0.0.1:" + std::to_string(server.port()) + "/x",
          "host=127.0.0.1 port=1 user=ullm password=" + secret + " dbname=x",
          "host=127.0.0.1 port=" + std::to_string(server.port()) +
              " user=nobody-here password=" + secret + " dbname=postgres"}) {
        const std::string message = message_of(connection);
        INFO(message);
        CHECK(message.find(secret) == std::string::npos);
        CHECK(message.find("s3cr") == std::string::npos);
    }
}

#endif

#if defined(ULLM_HAVE_REDIS)

namespace {

std::string resp(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& arg : args) out += "$" + std::to_string(arg.size()) + "\r\n" + arg + "\r\n";
    return out;
}

std::shared_ptr<ullm::RedisSessionStore> open_redis(const std::string& prefix) {
    auto& server = ullm::test::RedisServer::instance();
    return ullm::RedisSessionStore::open({.port = server.port(), .key_prefix = prefix});
}

}  // namespace

TEST_CASE("RedisSessionStore meets the session store contract", "[session_store][redis]") {
    check_session_store_contract([] {
        auto& server = ullm::test::RedisServer::instance();
        return open_redis(server.fresh_prefix());
    });
}

TEST_CASE("a corrupt snapshot in RedisSessionStore fails closed and is left untouched",
          "[session_store][redis]") {
    check_corrupt_snapshots_fail_closed(
        open_redis(ullm::test::RedisServer::instance().fresh_prefix()));
}

TEST_CASE("RedisSessionStore keeps prefixes apart, reloads lost scripts and expires sessions",
          "[session_store][redis]") {
    auto& server = ullm::test::RedisServer::instance();
    const auto one = open_redis(server.fresh_prefix());
    const auto two = open_redis(server.fresh_prefix());
    one->put("t", "s", "one", 0);
    CHECK_FALSE(two->get("t", "s").has_value());
    CHECK(two->list("t").sessions.empty());

    REQUIRE(server.raw(resp({"SCRIPT", "FLUSH"})) == "+OK");
    CHECK(one->put("t", "s", "again", 1) == 2);
    CHECK(one->remove("t", "s"));

    const auto expiring = ullm::RedisSessionStore::open({.port = server.port(),
                                                         .key_prefix = server.fresh_prefix(),
                                                         .ttl = std::chrono::milliseconds(200)});
    expiring->put("t", "short", "x", 0);
    expiring->put("t", "zz", "y", 0);
    CHECK(expiring->get("t", "short").has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    CHECK_FALSE(expiring->get("t", "short").has_value());
    CHECK(expiring->list("t").sessions.empty());

    CHECK(ullm::test::error_code_of([&] {
              (void)ullm::RedisSessionStore::open({.port = server.port(), .key_prefix = "a:b"});
          }) == "session_store_failed");
}

TEST_CASE("RedisSessionStore fails closed on a corrupt session and leaves it untouched",
          "[session_store][redis]") {
    auto& server = ullm::test::RedisServer::instance();
    const std::string prefix = server.fresh_prefix();
    const auto store = open_redis(prefix);
    store->put("t", "bad", "{}", 0);
    const std::string key = prefix + ":s:{74}:626164";  // hex of "t" and "bad"
    REQUIRE(server.raw(resp({"HSET", key, "v", "two"})) == ":0");
    CHECK(ullm::test::error_code_of([&] { (void)store->get("t", "bad"); }) ==
          "session_store_failed");
    CHECK(ullm::test::error_code_of([&] { (void)store->list("t"); }) == "session_store_failed");
    CHECK(ullm::test::error_code_of([&] { store->put("t", "bad", "new", 1); }) ==
          "session_store_failed");
    CHECK(server.raw(resp({"HGET", key, "v"})) == "$3");
}

TEST_CASE("RedisSessionStore reports a killed server as retryable and recovers after a restart",
          "[session_store][redis]") {
    auto& server = ullm::test::RedisServer::instance();
    const auto store = open_redis(server.fresh_prefix());
    CHECK(store->put("t", "s", "one", 0) == 1);
    std::vector<std::thread> readers;
    for (int i = 0; i < 4; ++i) readers.emplace_back([&] { (void)store->get("t", "s"); });
    for (auto& reader : readers) reader.join();

    server.kill();
    try {
        store->put("t", "s", "two", 1);
        FAIL("a write to a dead server must fail");
    } catch (const ullm::SessionStoreError& error) {
        CHECK(error.code() == "session_store_failed");
        CHECK(error.retryable());
        CHECK(std::string(error.what()).find("127.0.0.1:" + std::to_string(server.port())) !=
              std::string::npos);
    }
    CHECK(ullm::test::error_code_of([&] { (void)store->get("t", "s"); }) == "session_store_failed");
    server.start();
    // The data died with the server (no persistence), and the scripts with it.
    CHECK_FALSE(store->get("t", "s").has_value());
    CHECK(store->put("t", "s", "fresh", 0) == 1);
}

TEST_CASE("RedisSessionStore never shows the password", "[session_store][redis]") {
    auto& server = ullm::test::RedisServer::instance();
    const std::string secret = "s3cr%et-pw";
    for (const int port : {server.port(), 1}) {
        try {
            (void)ullm::RedisSessionStore::open(
                {.port = port, .username = "someone", .password = secret});
            FAIL("opening must fail");
        } catch (const ullm::SessionStoreError& error) {
            INFO(error.what());
            CHECK(error.code() == "session_store_failed");
            CHECK(std::string(error.what()).find("s3cr") == std::string::npos);
        }
    }
}

#endif

}  // namespace session_store_test
