#include <ullm/store/postgres_session_store.hpp>

#include <ullm/core/error.hpp>

#include "../store_rules.hpp"
#include "libpq_client.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ullm {

namespace {

// Any constant: the key of the advisory lock that serialises schema creation.
constexpr std::int64_t schema_lock_key = 0x756c6c6d5f736573;  // "ullm_ses"

constexpr const char* create_schema_sql = R"sql(
CREATE TABLE ullm_sessions (
    tenant     text   COLLATE "C" NOT NULL,
    session_id text   COLLATE "C" NOT NULL,
    version    bigint NOT NULL CHECK (version >= 1),
    updated_at bigint NOT NULL,
    snapshot   bytea  NOT NULL,
    PRIMARY KEY (tenant, session_id)
);
INSERT INTO ullm_schema (singleton, version) VALUES (true, 1);
)sql";

using namespace detail::pg;  // NOLINT(google-build-using-namespace): this file's helpers

}  // namespace

struct PostgresSessionStore::Impl : detail::pg::Client<SessionStoreError> {
    std::uint64_t stored_version(std::int64_t value) const {
        if (value < 1) {
            throw SessionStoreError("postgres session store " + target.description +
                                    ": a stored version is not positive; the database was "
                                    "changed outside ullm");
        }
        return static_cast<std::uint64_t>(value);
    }

    void migrate(PGconn* conn) {
        exec(conn, "BEGIN", {}, "begin the schema transaction");
        try {
            exec(conn, "SELECT pg_advisory_xact_lock($1)", {int8_param(schema_lock_key)},
                 "lock the schema");
            exec(conn,
                 "CREATE TABLE IF NOT EXISTS ullm_schema ("
                 "singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton), "
                 "version bigint NOT NULL)",
                 {}, "create the schema table");
            const Result found =
                exec(conn, "SELECT version FROM ullm_schema", {}, "read the schema version");
            const std::int64_t version =
                PQntuples(found.get()) == 0 ? 0 : read_int8(found.get(), 0, 0);
            if (version > schema_version || version < 0) {
                throw SessionStoreError("postgres session store " + target.description +
                                        ": the database has schema version " +
                                        std::to_string(version) + ", newer than this ullm reads (" +
                                        std::to_string(schema_version) +
                                        "); upgrade ullm or use another database");
            }
            if (version == 0) {
                run_sql(conn, create_schema_sql, "create the schema");
            }
            exec(conn, "COMMIT", {}, "commit the schema");
        } catch (...) {
            rollback(conn);
            throw;
        }
    }
};

PostgresSessionStore::PostgresSessionStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PostgresSessionStore::~PostgresSessionStore() = default;

std::shared_ptr<PostgresSessionStore> PostgresSessionStore::open(
    const PostgresStoreOptions& options) {
    auto impl = std::make_unique<Impl>();
    impl->configure("postgres session store", options);
    impl->with_connection([&](PGconn* conn) {
        impl->migrate(conn);
        return 0;
    });
    return std::shared_ptr<PostgresSessionStore>(new PostgresSessionStore(std::move(impl)));
}

const std::string& PostgresSessionStore::target() const noexcept {
    return impl_->target.description;
}

std::optional<StoredSession> PostgresSessionStore::get(std::string_view tenant,
                                                       std::string_view session_id) {
    validate_session_key(tenant, session_id);
    return impl_->with_connection([&](PGconn* conn) -> std::optional<StoredSession> {
        const Result row =
            impl_->exec(conn,
                        "SELECT version, updated_at, snapshot FROM ullm_sessions "
                        "WHERE tenant = $1 AND session_id = $2",
                        {text_param(tenant), text_param(session_id)}, "read a session");
        if (PQntuples(row.get()) == 0) return std::nullopt;
        return StoredSession{std::string(tenant), std::string(session_id),
                             impl_->stored_version(read_int8(row.get(), 0, 0)),
                             read_bytes(row.get(), 0, 2),
                             detail::from_unix_ms(read_int8(row.get(), 0, 1))};
    });
}

std::uint64_t PostgresSessionStore::put(std::string_view tenant, std::string_view session_id,
                                        std::string_view snapshot, std::uint64_t expected_version) {
    validate_session_key(tenant, session_id);
    if (expected_version >= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        throw SessionStoreError("postgres session store " + impl_->target.description +
                                ": the session version cannot grow any further");
    }
    const auto expected = static_cast<std::int64_t>(expected_version);
    const std::int64_t now = detail::to_unix_ms(detail::now_ms());
    return impl_->with_connection([&](PGconn* conn) -> std::uint64_t {
        // The compare and the set are one statement: the row lock serialises writers, and a
        // writer that waited re-checks the version against the committed row.
        const char* sql =
            expected == 0
                ? "INSERT INTO ullm_sessions (tenant, session_id, version, updated_at, snapshot) "
                  "VALUES ($1, $2, $3 + 1, $4, $5) ON CONFLICT (tenant, session_id) DO NOTHING "
                  "RETURNING version"
                : "UPDATE ullm_sessions SET version = $3 + 1, updated_at = $4, snapshot = $5 "
                  "WHERE tenant = $1 AND session_id = $2 AND version = $3 RETURNING version";
        const Result written =
            impl_->exec(conn, sql,
                        {text_param(tenant), text_param(session_id), int8_param(expected),
                         int8_param(now), bytea_param(snapshot)},
                        "write a session");
        if (PQntuples(written.get()) == 1) return expected_version + 1;
        // Nothing written: report the version that won (a later statement sees it committed).
        const Result found = impl_->exec(
            conn, "SELECT version FROM ullm_sessions WHERE tenant = $1 AND session_id = $2",
            {text_param(tenant), text_param(session_id)}, "read a session version");
        const std::uint64_t actual =
            PQntuples(found.get()) == 0 ? 0 : impl_->stored_version(read_int8(found.get(), 0, 0));
        detail::throw_conflict(expected_version, actual);
    });
}

bool PostgresSessionStore::remove(std::string_view tenant, std::string_view session_id) {
    validate_session_key(tenant, session_id);
    return impl_->with_connection([&](PGconn* conn) {
        const Result erased =
            impl_->exec(conn, "DELETE FROM ullm_sessions WHERE tenant = $1 AND session_id = $2",
                        {text_param(tenant), text_param(session_id)}, "remove a session");
        return std::string_view(PQcmdTuples(erased.get())) != "0";
    });
}

SessionPage PostgresSessionStore::list(std::string_view tenant, const SessionListOptions& options) {
    const detail::ListQuery query = detail::parse_list_query(tenant, options);
    std::vector<SessionSummary> rows = impl_->with_connection([&](PGconn* conn) {
        const Result page =
            impl_->exec(conn,
                        "SELECT session_id, version, updated_at FROM ullm_sessions "
                        "WHERE tenant = $1 AND session_id > $2 ORDER BY session_id LIMIT $3",
                        {text_param(tenant), text_param(query.after),
                         int8_param(static_cast<std::int64_t>(query.limit + 1))},
                        "list sessions");
        std::vector<SessionSummary> found;
        const int count = PQntuples(page.get());
        found.reserve(static_cast<std::size_t>(count));
        for (int row = 0; row < count; ++row) {
            found.push_back(SessionSummary{read_bytes(page.get(), row, 0),
                                           impl_->stored_version(read_int8(page.get(), row, 1)),
                                           detail::from_unix_ms(read_int8(page.get(), row, 2))});
        }
        return found;
    });
    return detail::finish_page(std::move(rows), query.limit);
}

}  // namespace ullm
