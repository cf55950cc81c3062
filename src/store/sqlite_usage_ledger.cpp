#include <ullm/store/sqlite_usage_ledger.hpp>

#include <ullm/core/error.hpp>

#include "sqlite_support.hpp"
#include "store_rules.hpp"
#include "usage_sql.hpp"

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ullm {

namespace {
namespace sqlite_ledger {

constexpr int busy_timeout_ms = 5000;

constexpr const char* create_schema_sql = R"sql(
CREATE TABLE ullm_usage (
    id                  BLOB    NOT NULL PRIMARY KEY,
    tenant              BLOB    NOT NULL,
    session_id          BLOB    NOT NULL,
    provider            BLOB    NOT NULL,
    model               BLOB    NOT NULL,
    input_tokens        INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    cached_read_tokens  INTEGER NOT NULL,
    cached_write_tokens INTEGER NOT NULL,
    reasoning_tokens    INTEGER NOT NULL,
    cost_usd            REAL,
    started_at          INTEGER NOT NULL,
    finished_at         INTEGER NOT NULL,
    streamed            INTEGER NOT NULL
);
CREATE INDEX ullm_usage_by_time ON ullm_usage (started_at);
CREATE INDEX ullm_usage_by_tenant_time ON ullm_usage (tenant, started_at);
INSERT INTO ullm_usage_schema (singleton, version) VALUES (1, 1);
)sql";

constexpr const char* ledger_label = "sqlite usage ledger";

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what, const std::string& path) {
    detail::sqlite_support::fail<UsageLedgerError>(db, rc, ledger_label, what, path);
}

void exec(sqlite3* db, const char* sql, const std::string& what, const std::string& path) {
    detail::sqlite_support::exec<UsageLedgerError>(db, sql, ledger_label, what, path);
}

struct StatementDeleter {
    void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};
using Statement = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

// One run of a prepared statement, reset (bindings cleared) at scope exit.
class Run {
public:
    Run(sqlite3_stmt* stmt, sqlite3* db, const std::string& path)
        : stmt_(stmt), db_(db), path_(path) {}
    ~Run() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    Run& bytes(int index, std::string_view value) {
        check(sqlite3_bind_blob64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                                  SQLITE_STATIC));
        return *this;
    }
    Run& integer(int index, std::int64_t value) {
        check(sqlite3_bind_int64(stmt_, index, value));
        return *this;
    }
    Run& real(int index, const std::optional<double>& value) {
        check(value ? sqlite3_bind_double(stmt_, index, *value) : sqlite3_bind_null(stmt_, index));
        return *this;
    }
    bool step(const char* what) {
        const int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, rc, what, path_);
    }
    [[nodiscard]] std::int64_t integer(int index) const {
        return sqlite3_column_int64(stmt_, index);
    }
    [[nodiscard]] std::optional<double> real(int index) const {
        if (sqlite3_column_type(stmt_, index) == SQLITE_NULL) return std::nullopt;
        return sqlite3_column_double(stmt_, index);
    }
    [[nodiscard]] std::string bytes(int index) const {
        const void* data = sqlite3_column_blob(stmt_, index);
        const int size = sqlite3_column_bytes(stmt_, index);
        if (data == nullptr || size <= 0) return {};
        return {static_cast<const char*>(data), static_cast<std::size_t>(size)};
    }

private:
    void check(int rc) {
        if (rc != SQLITE_OK) fail(db_, rc, "bind a value", path_);
    }
    sqlite3_stmt* stmt_;
    sqlite3* db_;
    const std::string& path_;
};

}  // namespace sqlite_ledger
}  // namespace

struct SqliteUsageLedger::Impl {
    std::string path;
    std::mutex mutex;
    sqlite3* db = nullptr;
    sqlite_ledger::Statement insert;
    sqlite_ledger::Statement find;
    sqlite_ledger::Statement begin;
    sqlite_ledger::Statement commit;
    sqlite_ledger::Statement rollback;
    // Aggregate and listing statements, prepared on first use, by their SQL.
    std::map<std::string, sqlite_ledger::Statement> queries;

    Impl() = default;
    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl() {
        queries.clear();
        insert.reset();
        find.reset();
        begin.reset();
        commit.reset();
        rollback.reset();
        sqlite3_close_v2(db);
    }

    sqlite_ledger::Statement prepare(const std::string& sql) {
        sqlite3_stmt* stmt = nullptr;
        const int rc = sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size()),
                                          SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        sqlite_ledger::Statement owned(stmt);
        if (rc != SQLITE_OK) sqlite_ledger::fail(db, rc, "prepare a statement", path);
        return owned;
    }

    sqlite3_stmt* query(const std::string& sql) {
        auto found = queries.find(sql);
        if (found == queries.end()) found = queries.emplace(sql, prepare(sql)).first;
        return found->second.get();
    }

    void open_connection() {
        const int rc = sqlite3_open_v2(
            path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
            nullptr);
        if (rc != SQLITE_OK) sqlite_ledger::fail(db, rc, "open the database", path);
        sqlite3_extended_result_codes(db, 1);
        sqlite3_busy_timeout(db, sqlite_ledger::busy_timeout_ms);
        detail::sqlite_support::exec_waiting<UsageLedgerError>(
            db, "PRAGMA journal_mode = WAL", sqlite_ledger::ledger_label, "switch to WAL mode",
            path, sqlite_ledger::busy_timeout_ms);
        // NORMAL in WAL mode: a crash of the process loses nothing committed; a power cut may
        // lose the last commits, which for a ledger is worth the fsync it saves per write.
        sqlite_ledger::exec(db, "PRAGMA synchronous = NORMAL", "set synchronous mode", path);
    }

    void migrate() {
        sqlite_ledger::exec(db, "BEGIN IMMEDIATE", "begin the schema transaction", path);
        try {
            sqlite_ledger::exec(db,
                                "CREATE TABLE IF NOT EXISTS ullm_usage_schema ("
                                "singleton INTEGER PRIMARY KEY CHECK (singleton = 1), "
                                "version INTEGER NOT NULL)",
                                "create the schema table", path);
            std::int64_t found = 0;
            {
                const auto version = prepare("SELECT version FROM ullm_usage_schema");
                sqlite_ledger::Run read(version.get(), db, path);
                if (read.step("read the schema version")) found = read.integer(0);
            }
            if (found > schema_version || found < 0) {
                throw UsageLedgerError("sqlite usage ledger " + path +
                                       ": the database has ledger schema version " +
                                       std::to_string(found) + ", newer than this ullm reads (" +
                                       std::to_string(schema_version) + ")");
            }
            if (found == 0) {
                sqlite_ledger::exec(db, sqlite_ledger::create_schema_sql, "create the schema",
                                    path);
            }
            sqlite_ledger::exec(db, "COMMIT", "commit the schema", path);
        } catch (...) {
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
    }

    // Inserts one validated, normalized record; an equal one already kept is left alone.
    void insert_one(const UsageRecord& record) {
        {
            sqlite_ledger::Run run(insert.get(), db, path);
            run.bytes(1, record.id)
                .bytes(2, record.tenant)
                .bytes(3, record.session_id)
                .bytes(4, record.provider)
                .bytes(5, record.model)
                .integer(6, record.usage.input_tokens)
                .integer(7, record.usage.output_tokens)
                .integer(8, record.usage.cached_read_tokens)
                .integer(9, record.usage.cached_write_tokens)
                .integer(10, record.usage.reasoning_tokens)
                .real(11, record.usage.cost_usd)
                .integer(12, detail::to_unix_ms(record.started_at))
                .integer(13, detail::to_unix_ms(record.finished_at))
                .integer(14, record.streamed ? 1 : 0);
            run.step("write a usage record");
            if (sqlite3_changes(db) == 1) return;
        }
        sqlite_ledger::Run run(find.get(), db, path);
        run.bytes(1, record.id);
        if (!run.step("read a usage record")) {
            throw UsageLedgerError("sqlite usage ledger " + path +
                                   ": a usage record was neither written nor found");
        }
        if (read_record(run) != record) detail::throw_usage_conflict(record.id);
    }

    static UsageRecord read_record(const sqlite_ledger::Run& run) {
        UsageRecord record;
        record.id = run.bytes(0);
        record.tenant = run.bytes(1);
        record.session_id = run.bytes(2);
        record.provider = run.bytes(3);
        record.model = run.bytes(4);
        record.usage.input_tokens = run.integer(5);
        record.usage.output_tokens = run.integer(6);
        record.usage.cached_read_tokens = run.integer(7);
        record.usage.cached_write_tokens = run.integer(8);
        record.usage.reasoning_tokens = run.integer(9);
        record.usage.cost_usd = run.real(10);
        record.started_at = detail::from_unix_ms(run.integer(11));
        record.finished_at = detail::from_unix_ms(run.integer(12));
        record.streamed = run.integer(13) != 0;
        return record;
    }

    void bind_filter(sqlite_ledger::Run& run, const UsageQuery& query) {
        run.integer(1, query.since ? detail::to_unix_ms(*query.since)
                                   : std::numeric_limits<std::int64_t>::min());
        run.integer(2, query.until ? detail::to_unix_ms(*query.until)
                                   : std::numeric_limits<std::int64_t>::max());
        if (query.tenant) run.bytes(3, *query.tenant);
    }
};

SqliteUsageLedger::SqliteUsageLedger(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteUsageLedger::~SqliteUsageLedger() = default;

std::shared_ptr<SqliteUsageLedger> SqliteUsageLedger::open(const std::string& path) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->open_connection();
    impl->migrate();
    impl->insert = impl->prepare(
        "INSERT INTO ullm_usage (id, tenant, session_id, provider, model, input_tokens, "
        "output_tokens, cached_read_tokens, cached_write_tokens, reasoning_tokens, cost_usd, "
        "started_at, finished_at, streamed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
        "?11, ?12, ?13, ?14) ON CONFLICT (id) DO NOTHING");
    impl->find = impl->prepare(std::string("SELECT ") + detail::usage_record_columns +
                               " FROM ullm_usage WHERE id = ?1");
    impl->begin = impl->prepare("BEGIN IMMEDIATE");
    impl->commit = impl->prepare("COMMIT");
    impl->rollback = impl->prepare("ROLLBACK");
    return std::shared_ptr<SqliteUsageLedger>(new SqliteUsageLedger(std::move(impl)));
}

const std::string& SqliteUsageLedger::path() const noexcept {
    return impl_->path;
}

void SqliteUsageLedger::record(const UsageRecord& record) {
    validate_usage_record(record);
    const UsageRecord normalized = normalized_usage_record(record);
    const std::lock_guard lock(impl_->mutex);
    impl_->insert_one(normalized);
}

void SqliteUsageLedger::record_all(std::span<const UsageRecord> records) {
    std::vector<UsageRecord> normalized;
    normalized.reserve(records.size());
    for (const UsageRecord& record : records) {
        validate_usage_record(record);
        normalized.push_back(normalized_usage_record(record));
    }
    const std::lock_guard lock(impl_->mutex);
    {
        sqlite_ledger::Run begin(impl_->begin.get(), impl_->db, impl_->path);
        begin.step("begin a transaction");
    }
    try {
        for (const UsageRecord& record : normalized) impl_->insert_one(record);
        sqlite_ledger::Run commit(impl_->commit.get(), impl_->db, impl_->path);
        commit.step("commit usage records");
    } catch (...) {
        if (sqlite3_get_autocommit(impl_->db) == 0) {
            sqlite_ledger::Run rollback(impl_->rollback.get(), impl_->db, impl_->path);
            sqlite3_step(impl_->rollback.get());
        }
        throw;
    }
}

std::vector<UsageRow> SqliteUsageLedger::aggregate(const UsageQuery& query) {
    validate_usage_query(query);
    const std::string sql = detail::usage_aggregate_sql(query, detail::UsageSqlDialect::sqlite);
    const std::lock_guard lock(impl_->mutex);
    sqlite_ledger::Run run(impl_->query(sql), impl_->db, impl_->path);
    impl_->bind_filter(run, query);
    std::vector<UsageRow> rows;
    while (run.step("aggregate usage")) {
        UsageRow row;
        int column = 0;
        for (const UsageGroup group : query.group_by) {
            if (group == UsageGroup::hour || group == UsageGroup::day) {
                row.period = detail::from_unix_ms(run.integer(column++));
            } else {
                detail::usage_row_key(row, group) = run.bytes(column++);
            }
        }
        row.requests = run.integer(column++);
        row.usage.input_tokens = run.integer(column++);
        row.usage.output_tokens = run.integer(column++);
        row.usage.cached_read_tokens = run.integer(column++);
        row.usage.cached_write_tokens = run.integer(column++);
        row.usage.reasoning_tokens = run.integer(column++);
        row.usage.cost_usd = run.real(column++);
        row.requests_without_cost = run.integer(column++);
        rows.push_back(std::move(row));
    }
    return rows;
}

void SqliteUsageLedger::for_each(const UsageQuery& query,
                                 const std::function<void(const UsageRecord&)>& visit) {
    validate_usage_query(query);
    const std::string sql = detail::usage_select_sql(query, detail::UsageSqlDialect::sqlite);
    const std::lock_guard lock(impl_->mutex);
    sqlite_ledger::Run run(impl_->query(sql), impl_->db, impl_->path);
    impl_->bind_filter(run, query);
    while (run.step("read usage records")) visit(Impl::read_record(run));
}

}  // namespace ullm
