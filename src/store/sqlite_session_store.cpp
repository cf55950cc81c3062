#include <ullm/store/sqlite_session_store.hpp>

#include <ullm/core/error.hpp>

#include "sqlite_support.hpp"
#include "store_rules.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ullm {

namespace {

constexpr int busy_timeout_ms = 5000;

constexpr std::string_view create_schema_sql = R"sql(
CREATE TABLE IF NOT EXISTS ullm_sessions (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    updated_at INTEGER NOT NULL,
    snapshot   BLOB    NOT NULL,
    PRIMARY KEY (tenant, session_id)
);
PRAGMA user_version = 1;
)sql";

constexpr const char* store_label = "sqlite session store";

[[noreturn]] void fail(sqlite3* db, int rc, const std::string& what, const std::string& path) {
    detail::sqlite_support::fail<SessionStoreError>(db, rc, store_label, what, path);
}

// One connection; closing it checkpoints the WAL when it is the last one.
class Connection {
public:
    Connection() = default;
    ~Connection() { sqlite3_close_v2(db_); }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    [[nodiscard]] sqlite3* get() const noexcept { return db_; }
    sqlite3** out() noexcept { return &db_; }

private:
    sqlite3* db_ = nullptr;
};

class Statement {
public:
    Statement(sqlite3* db, std::string_view sql, const std::string& path) {
        const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                          SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
        if (rc != SQLITE_OK) fail(db, rc, "prepare a statement", path);
    }
    ~Statement() { sqlite3_finalize(stmt_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    [[nodiscard]] sqlite3_stmt* get() const noexcept { return stmt_; }

private:
    sqlite3_stmt* stmt_ = nullptr;
};

// One run of a prepared statement: binds, steps, and resets it (bindings cleared) at scope
// exit so that it is ready for the next call and holds no read transaction open.
class Run {
public:
    Run(const Statement& statement, sqlite3* db, const std::string& path)
        : stmt_(statement.get()), db_(db), path_(path) {}
    ~Run() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    Run& text(int index, std::string_view value) {
        // A null pointer would bind SQL NULL; an empty key is the empty string.
        check(sqlite3_bind_text64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                                  SQLITE_STATIC, SQLITE_UTF8));
        return *this;
    }
    Run& blob(int index, std::string_view value) {
        check(sqlite3_bind_blob64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                                  SQLITE_STATIC));
        return *this;
    }
    Run& integer(int index, std::int64_t value) {
        check(sqlite3_bind_int64(stmt_, index, value));
        return *this;
    }

    // Steps once: true for a row, false when done. Throws `SessionStoreError` on failure.
    bool step(const char* what) {
        const int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, rc, what, path_);
    }

    [[nodiscard]] std::int64_t column_int(int index) const {
        return sqlite3_column_int64(stmt_, index);
    }
    [[nodiscard]] std::string column_bytes(int index) const {
        // Text or blob alike: the bytes as stored, without conversion.
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

// The stored version as the API counts it; a value the schema forbids means the file was
// changed behind the store's back.
std::uint64_t stored_version(std::int64_t value, const std::string& path) {
    if (value < 1) {
        throw SessionStoreError("sqlite session store " + path +
                                ": a stored version is not positive; the database was changed "
                                "outside ullm");
    }
    return static_cast<std::uint64_t>(value);
}

void exec(sqlite3* db, const char* sql, const std::string& what, const std::string& path) {
    detail::sqlite_support::exec<SessionStoreError>(db, sql, store_label, what, path);
}

void exec_waiting(sqlite3* db, const char* sql, const std::string& what, const std::string& path) {
    detail::sqlite_support::exec_waiting<SessionStoreError>(db, sql, store_label, what, path,
                                                            busy_timeout_ms);
}

}  // namespace

struct SqliteSessionStore::Impl {
    std::string path;
    std::mutex mutex;
    // Declared first so that it is closed after every statement is finalised.
    Connection connection;
    std::unique_ptr<Statement> begin;
    std::unique_ptr<Statement> commit;
    std::unique_ptr<Statement> rollback;
    std::unique_ptr<Statement> select_one;
    std::unique_ptr<Statement> select_version;
    std::unique_ptr<Statement> insert;
    std::unique_ptr<Statement> update;
    std::unique_ptr<Statement> erase;
    std::unique_ptr<Statement> list;

    [[nodiscard]] sqlite3* db() const noexcept { return connection.get(); }
    Run run(const std::unique_ptr<Statement>& statement) { return {*statement, db(), path}; }

    std::unique_ptr<Statement> prepare(std::string_view sql) {
        return std::make_unique<Statement>(db(), sql, path);
    }

    // A `BEGIN IMMEDIATE` transaction, rolled back unless committed.
    class WriteTransaction {
    public:
        explicit WriteTransaction(Impl& impl) : impl_(impl) {
            Run begin_write = impl_.run(impl_.begin);
            begin_write.step("begin a write transaction");
        }
        ~WriteTransaction() {
            if (!open_) return;
            // Fails harmlessly when SQLite already rolled back after an error.
            Run undo = impl_.run(impl_.rollback);
            sqlite3_step(impl_.rollback->get());
        }
        WriteTransaction(const WriteTransaction&) = delete;
        WriteTransaction& operator=(const WriteTransaction&) = delete;

        void commit() {
            Run finish = impl_.run(impl_.commit);
            finish.step("commit");
            open_ = false;
        }

    private:
        Impl& impl_;
        bool open_ = true;
    };

    void open_connection() {
        const int rc = sqlite3_open_v2(
            path.c_str(), connection.out(),
            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
        if (rc != SQLITE_OK) fail(db(), rc, "open the database", path);
        sqlite3_extended_result_codes(db(), 1);
        sqlite3_busy_timeout(db(), busy_timeout_ms);
        // WAL: readers never block the writer. FULL: the WAL is flushed at every commit, so a
        // committed turn survives a power cut, not only a crash of the process; one fsync per
        // put is cheap next to the model call that produced the snapshot.
        exec_waiting(db(), "PRAGMA journal_mode = WAL", "switch to WAL mode", path);
        exec(db(), "PRAGMA synchronous = FULL", "set synchronous mode", path);
    }

    void migrate() {
        // BEGIN IMMEDIATE: two processes creating the schema at once take turns.
        exec(db(), "BEGIN IMMEDIATE", "begin the schema transaction", path);
        try {
            std::int64_t found = 0;
            {
                const Statement version(db(), "PRAGMA user_version", path);
                Run read(version, db(), path);
                if (read.step("read the schema version")) found = read.column_int(0);
            }
            if (found > schema_version || found < 0) {
                throw SessionStoreError(
                    "sqlite session store " + path + ": the database has schema version " +
                    std::to_string(found) + ", newer than this ullm reads (" +
                    std::to_string(schema_version) + "); upgrade ullm or use another file");
            }
            if (found == 0) exec(db(), create_schema_sql.data(), "create the schema", path);
            exec(db(), "COMMIT", "commit the schema", path);
        } catch (...) {
            sqlite3_exec(db(), "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
    }

    void prepare_all() {
        begin = prepare("BEGIN IMMEDIATE");
        commit = prepare("COMMIT");
        rollback = prepare("ROLLBACK");
        select_one = prepare(
            "SELECT version, updated_at, snapshot FROM ullm_sessions "
            "WHERE tenant = ?1 AND session_id = ?2");
        select_version =
            prepare("SELECT version FROM ullm_sessions WHERE tenant = ?1 AND session_id = ?2");
        insert = prepare(
            "INSERT INTO ullm_sessions (tenant, session_id, version, updated_at, snapshot) "
            "VALUES (?1, ?2, ?3, ?4, ?5)");
        update = prepare(
            "UPDATE ullm_sessions SET version = ?3, updated_at = ?4, snapshot = ?5 "
            "WHERE tenant = ?1 AND session_id = ?2");
        erase = prepare("DELETE FROM ullm_sessions WHERE tenant = ?1 AND session_id = ?2");
        list = prepare(
            "SELECT session_id, version, updated_at FROM ullm_sessions "
            "WHERE tenant = ?1 AND session_id > ?2 ORDER BY session_id LIMIT ?3");
    }
};

SqliteSessionStore::SqliteSessionStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteSessionStore::~SqliteSessionStore() = default;

std::shared_ptr<SqliteSessionStore> SqliteSessionStore::open(const std::string& path) {
    if (path.empty()) {
        throw SessionStoreError(
            "sqlite session store: the database path is empty; use \":memory:\" for a private "
            "in-memory database");
    }
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->open_connection();
    impl->migrate();
    impl->prepare_all();
    return std::shared_ptr<SqliteSessionStore>(new SqliteSessionStore(std::move(impl)));
}

const std::string& SqliteSessionStore::path() const noexcept {
    return impl_->path;
}

std::optional<StoredSession> SqliteSessionStore::get(std::string_view tenant,
                                                     std::string_view session_id) {
    validate_session_key(tenant, session_id);
    const std::lock_guard lock(impl_->mutex);
    Run select = impl_->run(impl_->select_one);
    select.text(1, tenant).text(2, session_id);
    if (!select.step("read a session")) return std::nullopt;
    return StoredSession{std::string(tenant), std::string(session_id),
                         stored_version(select.column_int(0), impl_->path), select.column_bytes(2),
                         detail::from_unix_ms(select.column_int(1))};
}

std::uint64_t SqliteSessionStore::put(std::string_view tenant, std::string_view session_id,
                                      std::string_view snapshot, std::uint64_t expected_version) {
    validate_session_key(tenant, session_id);
    const std::lock_guard lock(impl_->mutex);
    Impl::WriteTransaction transaction(*impl_);
    std::uint64_t actual = 0;
    {
        Run select = impl_->run(impl_->select_version);
        select.text(1, tenant).text(2, session_id);
        if (select.step("read a session version")) {
            actual = stored_version(select.column_int(0), impl_->path);
        }
    }
    if (actual != expected_version) detail::throw_conflict(expected_version, actual);
    if (expected_version >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw SessionStoreError("sqlite session store " + impl_->path +
                                ": the session version cannot grow any further");
    }
    const std::uint64_t version = expected_version + 1;
    {
        Run write = impl_->run(expected_version == 0 ? impl_->insert : impl_->update);
        write.text(1, tenant)
            .text(2, session_id)
            .integer(3, static_cast<std::int64_t>(version))
            .integer(4, detail::to_unix_ms(detail::now_ms()))
            .blob(5, snapshot);
        write.step("write a session");
    }
    transaction.commit();
    return version;
}

bool SqliteSessionStore::remove(std::string_view tenant, std::string_view session_id) {
    validate_session_key(tenant, session_id);
    const std::lock_guard lock(impl_->mutex);
    Run erase = impl_->run(impl_->erase);
    erase.text(1, tenant).text(2, session_id);
    erase.step("remove a session");
    return sqlite3_changes(impl_->db()) > 0;
}

SessionPage SqliteSessionStore::list(std::string_view tenant, const SessionListOptions& options) {
    const detail::ListQuery query = detail::parse_list_query(tenant, options);
    std::vector<SessionSummary> rows;
    rows.reserve(query.limit + 1);
    const std::lock_guard lock(impl_->mutex);
    Run select = impl_->run(impl_->list);
    select.text(1, tenant)
        .text(2, query.after)
        .integer(3, static_cast<std::int64_t>(query.limit + 1));
    while (select.step("list sessions")) {
        rows.push_back(SessionSummary{select.column_bytes(0),
                                      stored_version(select.column_int(1), impl_->path),
                                      detail::from_unix_ms(select.column_int(2))});
    }
    return detail::finish_page(std::move(rows), query.limit);
}

}  // namespace ullm
