#include <ullm/store/usage_ledger.hpp>

#include <ullm/client/usage_recorder.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/store/sqlite_usage_ledger.hpp>

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/temp_dir.hpp"

#if defined(ULLM_HAVE_POSTGRES)
#include <ullm/store/postgres_usage_ledger.hpp>

#include <sys/wait.h>
#include <cstdio>

#include "support/postgres_server.hpp"
#include "support/server_process.hpp"
#endif

namespace usage_ledger_test {

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::system_clock;
using ullm::test::error_code_of;

// 2026-12-03T00:00:00Z, a day boundary.
const Clock::time_point day_two = Clock::time_point(std::chrono::milliseconds(1796256000000));

ullm::UsageRecord make_record(std::string id, std::string tenant, std::string session,
                              std::string provider, std::string model, Clock::time_point at,
                              std::int64_t input, std::optional<double> cost) {
    ullm::UsageRecord record;
    record.id = std::move(id);
    record.tenant = std::move(tenant);
    record.session_id = std::move(session);
    record.provider = std::move(provider);
    record.model = std::move(model);
    record.usage.input_tokens = input;
    record.usage.output_tokens = input / 2;
    record.usage.cached_read_tokens = input / 4;
    record.usage.cached_write_tokens = 1;
    record.usage.reasoning_tokens = input / 10;
    record.usage.cost_usd = cost;
    record.started_at = at;
    record.finished_at = at + 1500ms;
    record.streamed = input % 2 == 1;
    return record;
}

// Six records across a day boundary (23:59:59.999 and 00:00:00.000) and an hour boundary.
std::vector<ullm::UsageRecord> sample_records() {
    return {
        make_record("r1", "acme", "s1", "openai", "gpt-4o", day_two - 2h, 100, 0.5),
        make_record("r2", "acme", "s1", "openai", "gpt-4o-mini", day_two - 1ms, 10, 0.25),
        make_record("r3", "acme", "s2", "anthropic", "claude", day_two, 1000, std::nullopt),
        make_record("r4", "globex", "s1", "openai", "gpt-4o", day_two + 59min, 40, 1.0),
        make_record("r5", "globex", "s3", "gemini", "gemini-2.5", day_two + 1h, 7, 0.125),
        make_record("r6", "acme", "s1", "openai", "gpt-4o", day_two + 25h, 1, std::nullopt),
    };
}

std::int64_t total_requests(ullm::UsageLedger& ledger, const ullm::UsageQuery& query = {}) {
    const auto rows = ledger.aggregate(query);
    REQUIRE(rows.size() == 1);
    return rows[0].requests;
}

// A minimal RFC 4180 reader: fields split at commas outside quotes, records at CRLF outside
// quotes, doubled quotes inside quotes.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
    std::vector<std::vector<std::string>> rows(1);
    std::string field;
    bool quoted = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (quoted) {
            if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
                field += '"';
                ++i;
            } else if (c == '"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ',') {
            rows.back().push_back(field);
            field.clear();
        } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
            rows.back().push_back(field);
            field.clear();
            rows.emplace_back();
            ++i;
        } else {
            field += c;
        }
    }
    if (rows.back().empty() && field.empty()) rows.pop_back();
    return rows;
}

using LedgerFactory = std::function<std::shared_ptr<ullm::UsageLedger>()>;

void check_usage_ledger_contract(const LedgerFactory& make) {
    const auto ledger = make();

    SECTION("an empty ledger aggregates to one row of zeros") {
        const auto rows = ledger->aggregate({});
        REQUIRE(rows.size() == 1);
        CHECK(rows[0].requests == 0);
        CHECK(rows[0].usage.input_tokens == 0);
        CHECK_FALSE(rows[0].usage.cost_usd.has_value());
        CHECK(ledger->aggregate({.group_by = {ullm::UsageGroup::model}}).empty());
    }

    SECTION("a retried record counts once; another record under its id is refused") {
        const auto records = sample_records();
        ledger->record(records[0]);
        ledger->record(records[0]);
        ledger->record_all(records);
        ledger->record_all(records);
        CHECK(total_requests(*ledger) == 6);

        auto changed = records[1];
        changed.model = "gpt-5";
        CHECK(error_code_of([&] { ledger->record(changed); }) == "usage_record_conflict");
        auto other_tenant = records[1];
        other_tenant.tenant = "globex";
        CHECK(error_code_of([&] { ledger->record(other_tenant); }) == "usage_record_conflict");
        // A batch holding a conflict writes nothing, not even its new records.
        const std::vector<ullm::UsageRecord> batch{
            make_record("new-1", "acme", "s9", "openai", "gpt-4o", day_two, 5, 0.1), changed};
        CHECK(error_code_of([&] { ledger->record_all(batch); }) == "usage_record_conflict");
        CHECK(total_requests(*ledger) == 6);
        // Kept to the millisecond: a retry with finer times is the same record.
        auto finer = records[2];
        finer.started_at += 300us;
        finer.finished_at += 999us;
        ledger->record(finer);
        CHECK(total_requests(*ledger) == 6);
        std::vector<ullm::UsageRecord> read;
        ledger->for_each({}, [&](const ullm::UsageRecord& record) { read.push_back(record); });
        CHECK(read == records);
    }

    SECTION("a batch holding one record twice keeps it once; two records under one id conflict") {
        auto records = sample_records();
        records.push_back(records[2]);
        ledger->record_all(records);
        CHECK(total_requests(*ledger) == 6);
        auto twin = make_record("twin", "acme", "s1", "openai", "gpt-4o", day_two, 5, 0.1);
        auto other = twin;
        other.usage.output_tokens += 1;
        const std::vector<ullm::UsageRecord> batch{
            make_record("new-2", "acme", "s9", "openai", "gpt-4o", day_two, 5, 0.1), twin, other};
        CHECK(error_code_of([&] { ledger->record_all(batch); }) == "usage_record_conflict");
        CHECK(total_requests(*ledger) == 6);
        ledger->record_all({});
        CHECK(total_requests(*ledger) == 6);
    }

    SECTION("a batch of 5,000 records with hostile bytes reads back exactly") {
        const std::string nul("\0", 1);
        std::vector<ullm::UsageRecord> records;
        for (int i = 0; i < 5000; ++i) {
            auto record = make_record("b" + nul + std::to_string(i) + "'\"%_*:\xc3\xa9",
                                      "tenant" + nul + std::to_string(i % 7), "s\\" + nul, "p",
                                      std::string(static_cast<std::size_t>(i % 300), 'm'),
                                      day_two + std::chrono::milliseconds(i), i,
                                      i % 3 == 0 ? std::nullopt : std::optional<double>(i * 0.001));
            record.usage.cached_write_tokens = std::int64_t{1} << 40;  // eight bytes on the wire
            records.push_back(std::move(record));
        }
        ledger->record_all(records);
        ledger->record_all(records);  // a retried batch counts once
        CHECK(total_requests(*ledger) == 5000);
        std::vector<ullm::UsageRecord> read;
        ledger->for_each({}, [&](const ullm::UsageRecord& record) { read.push_back(record); });
        CHECK(read == records);
    }

    SECTION("totals: tokens by kind, known costs summed, unknown ones counted") {
        ledger->record_all(sample_records());
        const auto rows = ledger->aggregate({});
        REQUIRE(rows.size() == 1);
        const auto& total = rows[0];
        CHECK(total.requests == 6);
        CHECK(total.usage.input_tokens == 1158);
        CHECK(total.usage.output_tokens == 50 + 5 + 500 + 20 + 3 + 0);
        CHECK(total.usage.cached_read_tokens == 25 + 2 + 250 + 10 + 1 + 0);
        CHECK(total.usage.cached_write_tokens == 6);
        CHECK(total.usage.reasoning_tokens == 10 + 1 + 100 + 4 + 0 + 0);
        REQUIRE(total.usage.cost_usd.has_value());
        CHECK(*total.usage.cost_usd == Approx(1.875));
        CHECK(total.requests_without_cost == 2);
    }

    SECTION("grouping by each key") {
        ledger->record_all(sample_records());
        using G = ullm::UsageGroup;
        const auto by_tenant = ledger->aggregate({.group_by = {G::tenant}});
        REQUIRE(by_tenant.size() == 2);
        CHECK(by_tenant[0].tenant == "acme");
        CHECK(by_tenant[0].requests == 4);
        CHECK(by_tenant[0].requests_without_cost == 2);
        CHECK(by_tenant[1].tenant == "globex");
        CHECK(by_tenant[1].usage.input_tokens == 47);
        CHECK(by_tenant[1].model.empty());

        const auto by_session = ledger->aggregate({.group_by = {G::session}});
        REQUIRE(by_session.size() == 3);
        CHECK(by_session[0].session_id == "s1");
        CHECK(by_session[0].requests == 4);

        const auto by_provider = ledger->aggregate({.group_by = {G::provider}});
        REQUIRE(by_provider.size() == 3);
        CHECK(by_provider[0].provider == "anthropic");
        CHECK_FALSE(by_provider[0].usage.cost_usd.has_value());
        CHECK(by_provider[0].requests_without_cost == 1);
        CHECK(by_provider[2].provider == "openai");
        CHECK(by_provider[2].requests == 4);

        const auto by_model = ledger->aggregate({.group_by = {G::model}});
        REQUIRE(by_model.size() == 4);
        CHECK(by_model[2].model == "gpt-4o");
        CHECK(by_model[2].requests == 3);
        CHECK(*by_model[2].usage.cost_usd == Approx(1.5));

        const auto by_tenant_model = ledger->aggregate({.group_by = {G::tenant, G::model}});
        REQUIRE(by_tenant_model.size() == 5);
        CHECK(by_tenant_model[4].tenant == "globex");
        CHECK(by_tenant_model[4].model == "gpt-4o");
        CHECK(by_tenant_model[4].requests == 1);
    }

    SECTION("grouping by hour and day across a range boundary") {
        ledger->record_all(sample_records());
        using G = ullm::UsageGroup;
        const auto by_day = ledger->aggregate({.group_by = {G::day}});
        REQUIRE(by_day.size() == 3);
        CHECK(by_day[0].period == day_two - 24h);
        CHECK(by_day[0].requests == 2);  // 22:00 and 23:59:59.999
        CHECK(by_day[1].period == day_two);
        CHECK(by_day[1].requests == 3);
        CHECK(by_day[2].period == day_two + 24h);

        const auto by_hour = ledger->aggregate({.group_by = {G::hour}});
        REQUIRE(by_hour.size() == 5);
        CHECK(by_hour[1].period == day_two - 1h);
        CHECK(by_hour[1].requests == 1);
        CHECK(by_hour[2].period == day_two);
        CHECK(by_hour[2].requests == 2);  // 00:00:00.000 and 00:59
        CHECK(by_hour[3].period == day_two + 1h);

        // [since, until): the record at `until` is out, the one at `since` in.
        const auto first_day =
            ledger->aggregate({.since = day_two - 1ms, .until = day_two, .group_by = {G::day}});
        REQUIRE(first_day.size() == 1);
        CHECK(first_day[0].requests == 1);
        CHECK(first_day[0].usage.input_tokens == 10);
        CHECK(total_requests(*ledger, {.since = day_two, .until = day_two}) == 0);
        CHECK(total_requests(*ledger, {.since = day_two}) == 4);
        CHECK(total_requests(*ledger, {.until = day_two}) == 2);
        CHECK(total_requests(*ledger, {.since = day_two, .until = day_two + 1h}) == 2);
    }

    SECTION("invalid queries and records are refused with stable codes") {
        using G = ullm::UsageGroup;
        CHECK(error_code_of([&] {
                  (void)ledger->aggregate({.since = day_two, .until = day_two - 1ms});
              }) == "invalid_usage_query");
        CHECK(error_code_of([&] {
                  (void)ledger->aggregate({.group_by = {G::hour, G::day}});
              }) == "invalid_usage_query");
        CHECK(error_code_of([&] {
                  (void)ledger->aggregate({.group_by = {G::model, G::model}});
              }) == "invalid_usage_query");
        std::ostringstream out;
        CHECK(error_code_of([&] {
                  ledger->export_csv({.since = day_two, .until = day_two - 1h}, out);
              }) == "invalid_usage_query");

        auto record = sample_records()[0];
        record.id.clear();
        CHECK(error_code_of([&] { ledger->record(record); }) == "invalid_usage_record");
        record.id = std::string(257, 'x');
        CHECK(error_code_of([&] { ledger->record(record); }) == "invalid_usage_record");
        record = sample_records()[0];
        record.usage.output_tokens = -1;
        CHECK(error_code_of([&] { ledger->record(record); }) == "invalid_usage_record");
        record = sample_records()[0];
        record.model = "bad \xc0\xaf utf-8";
        CHECK(error_code_of([&] { ledger->record(record); }) == "invalid_usage_record");
        record = sample_records()[0];
        record.finished_at = record.started_at - 1ms;
        CHECK(error_code_of([&] { ledger->record(record); }) == "invalid_usage_record");
        record = sample_records()[0];
        record.usage.cost_usd = -0.5;
        CHECK(error_code_of([&] { ledger->record_all({&record, 1}); }) == "invalid_usage_record");
        CHECK(total_requests(*ledger) == 0);
    }

    SECTION("hostile strings round-trip through record, aggregate and both exports") {
        const std::string nul("with\0nul", 8);
        const std::string tenant = "t'\"%_;--\n," + nul + "\xc3\xa9\xe2\x82\xac";
        std::string model = "m\",\"x\r\n'%_*:" + nul;
        const std::string pattern = "\xce\xbb\"',\n";
        while (model.size() + pattern.size() <= 10240) model += pattern;
        auto hostile = make_record("id'\"%_" + nul, tenant, "s\"" + nul, "p%_", model,
                                   day_two + 5min, 3, 0.75);
        ledger->record(hostile);
        ledger->record(make_record("plain", "t", "s", "p", "m", day_two, 1, 0.0));
        ledger->record(make_record("percent", "t%", "s", "p", "m", day_two, 1, 0.0));

        using G = ullm::UsageGroup;
        const auto rows = ledger->aggregate({.tenant = tenant, .group_by = {G::tenant, G::model}});
        REQUIRE(rows.size() == 1);
        CHECK(rows[0].tenant == tenant);
        CHECK(rows[0].model == model);
        CHECK(rows[0].requests == 1);

        std::vector<ullm::UsageRecord> read;
        ledger->for_each({.tenant = tenant},
                         [&](const ullm::UsageRecord& record) { read.push_back(record); });
        REQUIRE(read.size() == 1);
        CHECK(read[0] == hostile);

        std::ostringstream jsonl;
        ledger->export_jsonl({.tenant = tenant}, jsonl);
        std::istringstream lines(jsonl.str());
        std::string line;
        int count = 0;
        while (std::getline(lines, line)) {
            const auto value = ullm::json::parse(line);
            CHECK(value.at("id").get<std::string>() == hostile.id);
            CHECK(value.at("tenant").get<std::string>() == tenant);
            CHECK(value.at("model").get<std::string>() == model);
            CHECK(value.at("session_id").get<std::string>() == hostile.session_id);
            CHECK(value.at("cost_usd").get<double>() == 0.75);
            CHECK(value.at("started_at").get<std::string>() == "2026-12-03T00:05:00.000Z");
            CHECK(value.at("finished_at").get<std::string>() == "2026-12-03T00:05:01.500Z");
            CHECK(value.at("streamed").get<bool>());
            ++count;
        }
        CHECK(count == 1);

        std::ostringstream csv;
        ledger->export_csv({}, csv);
        const auto table = parse_csv(csv.str());
        REQUIRE(table.size() == 4);
        for (const auto& row : table) CHECK(row.size() == 14);
        CHECK(table[0][0] == "id");
        CHECK(table[0][10] == "cost_usd");
        const auto found = std::find_if(table.begin(), table.end(),
                                        [&](const auto& row) { return row[0] == hostile.id; });
        REQUIRE(found != table.end());
        CHECK((*found)[1] == tenant);
        CHECK((*found)[2] == hostile.session_id);
        CHECK((*found)[3] == "p%_");
        CHECK((*found)[4] == model);
        CHECK((*found)[5] == "3");
        CHECK((*found)[11] == "2026-12-03T00:05:00.000Z");
    }

    SECTION("a tenant filter never shows another tenant's records") {
        for (const std::string tenant : {"a", "A", "a%", "a_", "_", "%", "ab", "a "}) {
            ledger->record(make_record("id-" + tenant, tenant, "s", "p", "m", day_two, 2, 1.0));
        }
        for (const std::string tenant : {"a", "%", "_", "a%"}) {
            CHECK(total_requests(*ledger, {.tenant = tenant}) == 1);
            std::ostringstream csv;
            ledger->export_csv({.tenant = tenant}, csv);
            const auto table = parse_csv(csv.str());
            REQUIRE(table.size() == 2);
            CHECK(table[1][1] == tenant);
            std::ostringstream jsonl;
            ledger->export_jsonl({.tenant = tenant}, jsonl);
            CHECK(ullm::json::parse(jsonl.str()).at("tenant") == tenant);
            const auto by_model =
                ledger->aggregate({.tenant = tenant, .group_by = {ullm::UsageGroup::tenant}});
            REQUIRE(by_model.size() == 1);
            CHECK(by_model[0].tenant == tenant);
        }
        CHECK(total_requests(*ledger, {.tenant = "nobody"}) == 0);
        CHECK(total_requests(*ledger, {.tenant = ""}) == 0);
        CHECK(total_requests(*ledger) == 8);
    }
}

// A ledger whose every write fails, for the recorder's failure counting.
class FailingLedger final : public ullm::UsageLedger {
public:
    void record(const ullm::UsageRecord&) override {
        throw ullm::UsageLedgerError("failing ledger: the disk is gone", true);
    }
    void record_all(std::span<const ullm::UsageRecord>) override {
        throw ullm::UsageLedgerError("failing ledger: the disk is gone", true);
    }
    std::vector<ullm::UsageRow> aggregate(const ullm::UsageQuery&) override { return {}; }
    void for_each(const ullm::UsageQuery&,
                  const std::function<void(const ullm::UsageRecord&)>&) override {}
};

}  // namespace

TEST_CASE("SqliteUsageLedger meets the usage ledger contract", "[usage_ledger]") {
    const ullm::test::TempDir dir("usage-ledger");
    check_usage_ledger_contract(
        [&] { return ullm::SqliteUsageLedger::open((dir / "usage.db").string()); });
}

TEST_CASE("SqliteUsageLedger keeps its records across opens and refuses a newer schema",
          "[usage_ledger]") {
    const ullm::test::TempDir dir("usage-ledger");
    const std::string path = (dir / "usage.db").string();
    ullm::SqliteUsageLedger::open(path)->record_all(sample_records());
    const auto reopened = ullm::SqliteUsageLedger::open(path);
    CHECK(total_requests(*reopened) == 6);

    {
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
        CHECK(sqlite3_exec(db, "UPDATE ullm_usage_schema SET version = 2", nullptr, nullptr,
                           nullptr) == SQLITE_OK);
        sqlite3_close(db);
    }
    try {
        (void)ullm::SqliteUsageLedger::open(path);
        FAIL("a newer schema must be refused");
    } catch (const ullm::UsageLedgerError& error) {
        CHECK(error.code() == "usage_ledger_failed");
        CHECK(std::string(error.what()).find("schema version 2") != std::string::npos);
    }
    CHECK(error_code_of([&] {
              (void)ullm::SqliteUsageLedger::open((dir / "no-such-dir" / "usage.db").string());
          }) == "usage_ledger_failed");
    CHECK(error_code_of([&] { (void)ullm::SqliteUsageLedger::open(dir.path().string()); }) ==
          "usage_ledger_failed");
}

TEST_CASE("UsageRecorder writes each report once with a unique id and never throws",
          "[usage_ledger]") {
    const auto ledger = ullm::SqliteUsageLedger::open(":memory:");
    const auto recorder =
        ullm::UsageRecorder::make(ledger, {.tenant = "acme", .session_id = "chat-1"});
    const auto on_usage = recorder->callback();
    ullm::UsageReport report;
    report.provider = "openai";
    report.model = "gpt-4o";
    report.usage.input_tokens = 12;
    report.usage.output_tokens = 3;
    report.usage.cost_usd = 0.01;
    report.streamed = true;
    on_usage(report);
    on_usage(report);
    ullm::UsageReport skipped;
    skipped.budget_skipped = true;
    on_usage(skipped);
    CHECK(recorder->recorded() == 2);
    CHECK(recorder->failures() == 0);
    const auto rows = ledger->aggregate(
        {.tenant = "acme", .group_by = {ullm::UsageGroup::session, ullm::UsageGroup::model}});
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].session_id == "chat-1");
    CHECK(rows[0].requests == 2);
    CHECK(rows[0].usage.input_tokens == 24);
    CHECK(*rows[0].usage.cost_usd == Approx(0.02));
    std::vector<std::string> ids;
    ledger->for_each({}, [&](const ullm::UsageRecord& record) {
        ids.push_back(record.id);
        CHECK(record.streamed);
    });
    REQUIRE(ids.size() == 2);
    CHECK(ids[0] != ids[1]);
    // Another recorder on the same ledger never reuses an id.
    ullm::UsageRecorder::make(ledger)->callback()(report);
    CHECK(total_requests(*ledger) == 3);

    const auto failing = ullm::UsageRecorder::make(std::make_shared<FailingLedger>());
    CHECK_NOTHROW(failing->callback()(report));
    CHECK(failing->failures() == 1);
    CHECK(failing->recorded() == 0);
    CHECK(failing->last_error().find("usage_ledger_failed") != std::string::npos);
}

TEST_CASE("UsageRecorder records the report's start, else its finish, as started_at",
          "[usage_ledger]") {
    const auto ledger = ullm::SqliteUsageLedger::open(":memory:");
    const auto on_usage = ullm::UsageRecorder::make(ledger)->callback();
    const auto before = std::chrono::floor<std::chrono::milliseconds>(Clock::now());
    ullm::UsageReport report;
    report.provider = "openai";
    report.model = "with-start";
    report.started_at = before - 90s;
    on_usage(report);
    report.model = "without-start";
    report.started_at = {};
    on_usage(report);
    // A start after the report (the wall clock was set back meanwhile) is not kept: the ledger
    // refuses a record that finishes before it starts.
    report.model = "start-in-the-future";
    report.started_at = Clock::now() + 1h;
    on_usage(report);
    std::vector<ullm::UsageRecord> records;
    ledger->for_each({}, [&](const ullm::UsageRecord& record) { records.push_back(record); });
    REQUIRE(records.size() == 3);
    CHECK(records[0].model == "with-start");
    CHECK(records[0].started_at == before - 90s);
    CHECK(records[0].finished_at >= before);
    for (const std::size_t i : {1U, 2U}) {
        CHECK(records[i].started_at == records[i].finished_at);
        CHECK(records[i].started_at >= before);
    }
}

TEST_CASE("usage group names parse back", "[usage_ledger]") {
    for (const auto group :
         {ullm::UsageGroup::tenant, ullm::UsageGroup::session, ullm::UsageGroup::provider,
          ullm::UsageGroup::model, ullm::UsageGroup::hour, ullm::UsageGroup::day}) {
        CHECK(ullm::parse_usage_group(ullm::to_string(group)) == group);
    }
    CHECK_FALSE(ullm::parse_usage_group("week").has_value());
}

#if defined(ULLM_HAVE_POSTGRES)

namespace {

std::shared_ptr<ullm::PostgresUsageLedger> open_postgres_ledger(const std::string& dbname) {
    auto& server = ullm::test::PostgresServer::instance();
    return ullm::PostgresUsageLedger::open({.connection_string = server.connection_string(dbname)});
}

}  // namespace

TEST_CASE("PostgresUsageLedger meets the usage ledger contract", "[usage_ledger][postgres]") {
    check_usage_ledger_contract([] {
        return open_postgres_ledger(ullm::test::PostgresServer::instance().create_database());
    });
}

TEST_CASE("PostgresUsageLedger refuses a newer schema", "[usage_ledger][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    open_postgres_ledger(db)->record(sample_records()[0]);
    CHECK(total_requests(*open_postgres_ledger(db)) == 1);
    server.sql(db, "UPDATE ullm_usage_schema SET version = 2");
    try {
        (void)open_postgres_ledger(db);
        FAIL("a newer schema must be refused");
    } catch (const ullm::UsageLedgerError& error) {
        CHECK(error.code() == "usage_ledger_failed");
        CHECK_FALSE(error.retryable());
        CHECK(std::string(error.what()).find("schema version 2") != std::string::npos);
    }
}

TEST_CASE("PostgresUsageLedger reports a stopped server and works again after a restart",
          "[usage_ledger][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    const auto ledger = open_postgres_ledger(db);
    const auto records = sample_records();
    ledger->record(records[0]);
    server.kill();
    try {
        ledger->record(records[1]);
        FAIL("a write to a stopped server must fail");
    } catch (const ullm::UsageLedgerError& error) {
        CHECK(error.code() == "usage_ledger_failed");
        CHECK(error.retryable());
        CHECK(std::string(error.what()).find("127.0.0.1:" + std::to_string(server.port())) !=
              std::string::npos);
    }
    CHECK(error_code_of([&] { (void)ledger->aggregate({}); }) == "usage_ledger_failed");
    CHECK(error_code_of([&] { ledger->record_all(records); }) == "usage_ledger_failed");
    server.start();
    ledger->record(records[1]);
    ledger->record_all(records);
    CHECK(total_requests(*ledger) == 6);
}

TEST_CASE("PostgresUsageLedger fails a batch to a server that stops answering, writing nothing",
          "[usage_ledger][postgres]") {
    auto& server = ullm::test::PostgresServer::instance();
    const auto ledger = ullm::PostgresUsageLedger::open(
        {.connection_string = server.connection_string(server.create_database()),
         .read_timeout = 400ms});
    ledger->record_all(sample_records());
    // A batch large enough that its COPY data fills the socket's buffers while the server is
    // frozen: the call must end at the deadline, not wait for ever.
    std::vector<ullm::UsageRecord> batch;
    for (int i = 0; i < 20000; ++i) {
        batch.push_back(make_record("frozen-" + std::to_string(i), "acme", "s", "openai",
                                    std::string(200, 'm'), day_two, i, 0.5));
    }
    server.pause();
    const auto started = std::chrono::steady_clock::now();
    std::string code;
    bool retryable = false;
    try {
        ledger->record_all(batch);
    } catch (const ullm::UsageLedgerError& error) {
        code = error.code();
        retryable = error.retryable();
    }
    const auto took = std::chrono::steady_clock::now() - started;
    server.resume();
    CHECK(code == "usage_ledger_failed");
    CHECK(retryable);
    CHECK(took < 10s);
    // Nothing of the batch was committed, and the ledger goes on.
    CHECK(total_requests(*ledger) == 6);
    ledger->record_all(std::span(batch).first(100));
    CHECK(total_requests(*ledger) == 106);

    // Frozen while the batch is under way (its COPY takes most of a second): all or nothing.
    for (int i = 0; i < 30000; ++i) {
        batch.push_back(make_record("late-" + std::to_string(i), "acme", "s", "openai",
                                    std::string(200, 'm'), day_two, i, 0.5));
    }
    std::thread freezer([&] {
        std::this_thread::sleep_for(100ms);
        server.pause();
    });
    code.clear();
    try {
        ledger->record_all(batch);
    } catch (const ullm::UsageLedgerError& error) {
        code = error.code();
    }
    freezer.join();
    server.resume();
    const std::int64_t total = total_requests(*ledger);
    if (code.empty()) {
        CHECK(total == 50006);  // it committed before the freeze
    } else {
        CHECK(code == "usage_ledger_failed");
        CHECK(total == 106);
    }
}

#if defined(ULLM_TEST_CLI)

namespace {

// What a run of the built `ullm` program printed, and how it ended.
struct CliRun {
    int status = -1;  ///< The exit status, or -1 when it did not exit normally.
    std::string out;
    std::string err;
};

// `text` as one shell word.
std::string shell_quoted(const std::string& text) {
    std::string quoted = "'";
    for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

// Runs `ullm` with `args`, its stdout read through a pipe and its stderr through a file.
CliRun run_cli(const std::vector<std::string>& args) {
    const ullm::test::TempDir dir("cli-usage");
    const std::string err_path = (dir / "stderr.txt").string();
    std::string command = shell_quoted(ULLM_TEST_CLI);
    for (const auto& arg : args) command += " " + shell_quoted(arg);
    command += " 2>" + shell_quoted(err_path);
    CliRun run;
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        run.out.append(buffer, n);
    const int status = ::pclose(pipe);
    if (status != -1 && WIFEXITED(status)) run.status = WEXITSTATUS(status);
    run.err = ullm::test::read_text_file(err_path);
    return run;
}

// The lines of `text`, each split into its words: the table's columns are padded with spaces.
std::vector<std::vector<std::string>> table_words(const std::string& text) {
    std::vector<std::vector<std::string>> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::vector<std::string> split;
        for (std::string word; words >> word;) split.push_back(word);
        lines.push_back(std::move(split));
    }
    return lines;
}

using Words = std::vector<std::vector<std::string>>;

}  // namespace

TEST_CASE("ullm usage --postgres prints the totals and records of a PostgreSQL ledger",
          "[usage_ledger][postgres][cli]") {
    auto& server = ullm::test::PostgresServer::instance();
    const std::string db = server.create_database();
    const std::string url = server.connection_string(db);
    const auto ledger = open_postgres_ledger(db);
    // Two tenants, two models; one record without a cost.
    const std::vector<ullm::UsageRecord> records = {
        make_record("a1", "acme", "s1", "openai", "gpt-4o", day_two, 100, 0.5),
        make_record("a2", "acme", "s1", "openai", "gpt-4o-mini", day_two + 1h, 10, 0.25),
        make_record("a3", "acme", "s2", "openai", "gpt-4o", day_two + 2h, 1000, std::nullopt),
        make_record("g1", "globex", "s9", "openai", "gpt-4o-mini", day_two + 3h, 40, 1.0),
    };
    ledger->record_all(records);

    SECTION("--by model totals every tenant's records") {
        const CliRun run = run_cli({"usage", "--postgres", url, "--by", "model"});
        CHECK(run.status == 0);
        CHECK(run.err.empty());
        CHECK(table_words(run.out) ==
              Words{{"model", "requests", "input", "output", "cache", "read", "cache", "write",
                     "reasoning", "cost", "USD", "no", "cost"},
                    {"gpt-4o", "2", "1100", "550", "275", "2", "110", "0.500000", "1"},
                    {"gpt-4o-mini", "2", "50", "25", "12", "2", "5", "1.250000", "0"},
                    {"total", "4", "1150", "575", "287", "4", "115", "1.750000", "1"}});
    }
    SECTION("--tenant keeps one tenant's records") {
        const CliRun run =
            run_cli({"usage", "--postgres", url, "--by", "model", "--tenant", "globex"});
        CHECK(run.status == 0);
        const auto lines = table_words(run.out);
        REQUIRE(lines.size() == 3);
        CHECK(lines[1] == std::vector<std::string>{"gpt-4o-mini", "1", "40", "20", "10", "1", "4",
                                                   "1.000000", "0"});
        CHECK(lines[2][0] == "total");
        CHECK(lines[2][1] == "1");
    }
    SECTION("--csv prints the records as the ledger exports them") {
        const CliRun run = run_cli({"usage", "--postgres", url, "--csv", "--tenant", "acme"});
        CHECK(run.status == 0);
        std::ostringstream expected;
        ledger->export_csv({.tenant = "acme"}, expected);
        CHECK(run.out == expected.str());
        // A header and acme's three records, in order of their start.
        CHECK(std::count(run.out.begin(), run.out.end(), '\n') == 4);
        CHECK(run.out.find("\r\n\"a1\",\"acme\",") != std::string::npos);
        CHECK(run.out.find("\"a3\"") > run.out.find("\"a2\""));
        CHECK(run.out.find("\"g1\"") == std::string::npos);
    }
    SECTION("a server that cannot be reached exits with 1 and keeps the password to itself") {
        const std::string unreachable = "postgresql://ullm:hunter2-secret@127.0.0.1:" +
                                        std::to_string(ullm::test::free_loopback_port()) + "/" +
                                        db + "?connect_timeout=5";
        const CliRun run = run_cli({"usage", "--postgres", unreachable, "--by", "model"});
        CHECK(run.status == 1);
        CHECK(run.out.empty());
        CHECK(run.err.find("ullm usage: [ullm.usage_ledger_failed]") == 0);
        CHECK(run.err.find("127.0.0.1") != std::string::npos);
        CHECK(run.err.find("hunter2") == std::string::npos);
    }
}

#endif  // ULLM_TEST_CLI

#endif

}  // namespace usage_ledger_test
