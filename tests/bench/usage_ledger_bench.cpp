// Usage ledger figures: inserts per second (one record per call, and batches of 1,000 in one
// transaction) and the time of aggregate queries over 1,000,000 records, for SQLite and, when
// the PostgreSQL component is built, for a throwaway PostgreSQL server.
//
//   ullm_bench_usage_ledger [RECORDS]     (default 1000000)

#include <ullm/store/sqlite_usage_ledger.hpp>
#if defined(ULLM_BENCH_POSTGRES)
#include <ullm/store/postgres_usage_ledger.hpp>

#include "support/postgres_server.hpp"
#endif

#include <fmt/core.h>

#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Record `index`: 50 tenants, 1,000 sessions, 3 providers, 12 models, one a second from a
// fixed start (1,000,000 records span 12 days), wrapping after 30 days.
ullm::UsageRecord make_record(std::int64_t index, const std::string& run) {
    static const char* const providers[] = {"openai", "anthropic", "gemini"};
    ullm::UsageRecord record;
    record.id = run + "-" + std::to_string(index);
    record.tenant = "tenant-" + std::to_string(index % 50);
    record.session_id = "session-" + std::to_string(index % 1000);
    record.provider = providers[index % 3];
    record.model = "model-" + std::to_string(index % 12);
    record.usage.input_tokens = 100 + index % 900;
    record.usage.output_tokens = 20 + index % 300;
    record.usage.cached_read_tokens = index % 64;
    record.usage.reasoning_tokens = index % 7;
    if (index % 10 != 0) record.usage.cost_usd = 0.0001 * static_cast<double>(index % 100);
    const auto start = std::chrono::system_clock::time_point(std::chrono::hours(492000));
    record.started_at = start + std::chrono::seconds(index % (30 * 86400));
    record.finished_at = record.started_at + std::chrono::milliseconds(800);
    return record;
}

void run(const std::string& name, ullm::UsageLedger& ledger, std::int64_t total,
         std::int64_t single) {
    const std::string tag = std::to_string(::getpid());
    auto start = Clock::now();
    for (std::int64_t i = 0; i < single; ++i) ledger.record(make_record(i, tag + "s"));
    const double single_seconds = seconds_since(start);
    fmt::print("{}: {} single inserts: {:.0f} records/s\n", name, single,
               static_cast<double>(single) / single_seconds);

    constexpr std::int64_t batch = 1000;
    std::vector<ullm::UsageRecord> records;
    start = Clock::now();
    for (std::int64_t i = 0; i < total; i += batch) {
        records.clear();
        for (std::int64_t j = i; j < i + batch && j < total; ++j) {
            records.push_back(make_record(j, tag + "b"));
        }
        ledger.record_all(records);
    }
    const double batch_seconds = seconds_since(start);
    fmt::print("{}: {} records in batches of {}: {:.0f} records/s\n", name, total, batch,
               static_cast<double>(total) / batch_seconds);

    const auto time_query = [&](const char* label, const ullm::UsageQuery& query) {
        const auto begin = Clock::now();
        const auto rows = ledger.aggregate(query);
        fmt::print("{}: aggregate {} over {} records: {:.1f} ms ({} rows)\n", name, label,
                   total + single, seconds_since(begin) * 1000, rows.size());
    };
    time_query("total", {});
    time_query("by model", {.group_by = {ullm::UsageGroup::model}});
    time_query("by day", {.group_by = {ullm::UsageGroup::day}});
    time_query("by tenant, model",
               {.group_by = {ullm::UsageGroup::tenant, ullm::UsageGroup::model}});
    time_query("one tenant by day", {.tenant = "tenant-7", .group_by = {ullm::UsageGroup::day}});
    const auto since = std::chrono::system_clock::time_point(std::chrono::hours(492000 + 24));
    time_query("one day by model", {.since = since,
                                    .until = since + std::chrono::hours(24),
                                    .group_by = {ullm::UsageGroup::model}});
}

}  // namespace

int main(int argc, char** argv) {
    const std::int64_t total = argc > 1 ? std::atoll(argv[1]) : 1000000;
    const auto dir =
        std::filesystem::temp_directory_path() / ("ullm-usage-bench-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        const auto ledger = ullm::SqliteUsageLedger::open((dir / "usage.db").string());
        run("sqlite", *ledger, total, 2000);
    }
    std::filesystem::remove_all(dir);
#if defined(ULLM_BENCH_POSTGRES)
    auto& server = ullm::test::PostgresServer::instance();
    const auto ledger = ullm::PostgresUsageLedger::open(
        {.connection_string = server.connection_string(server.create_database())});
    run("postgres", *ledger, total, 2000);
#endif
    return 0;
}
