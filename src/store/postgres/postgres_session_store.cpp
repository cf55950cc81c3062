#include <ullm/store/postgres_session_store.hpp>

#include <ullm/core/error.hpp>

#include "../connection_pool.hpp"
#include "../store_rules.hpp"

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

constexpr Oid text_oid = 25;
constexpr Oid bytea_oid = 17;
constexpr Oid int8_oid = 20;

struct ConnDeleter {
    void operator()(PGconn* conn) const noexcept { PQfinish(conn); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

struct ResultDeleter {
    void operator()(PGresult* result) const noexcept { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// A bound parameter, sent in binary form: text and bytea as their bytes, bigint as 8
// big-endian bytes.
struct Param {
    Oid type;
    std::string bytes;
};

Param text_param(std::string_view value) {
    return {text_oid, std::string(value)};
}
Param bytea_param(std::string_view value) {
    return {bytea_oid, std::string(value)};
}
Param int8_param(std::int64_t value) {
    std::string bytes(8, '\0');
    auto bits = static_cast<std::uint64_t>(value);
    for (int i = 7; i >= 0; --i) {
        bytes[static_cast<std::size_t>(i)] = static_cast<char>(bits & 0xFFU);
        bits >>= 8U;
    }
    return {int8_oid, std::move(bytes)};
}

std::int64_t read_int8(const PGresult* result, int row, int column) {
    const char* data = PQgetvalue(result, row, column);
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) {
        bits = (bits << 8U) | static_cast<unsigned char>(data[i]);
    }
    return static_cast<std::int64_t>(bits);
}

std::string read_bytes(const PGresult* result, int row, int column) {
    return {PQgetvalue(result, row, column),
            static_cast<std::size_t>(PQgetlength(result, row, column))};
}

// `text` with every occurrence of `secret` replaced, so that a password can never leak through
// a server or libpq message.
std::string without(std::string text, const std::string& secret) {
    if (secret.empty()) return text;
    for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
        text.replace(at, secret.size(), "***");
        at += 3;
    }
    return text;
}

std::string trim_message(std::string message) {
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
        message.pop_back();
    }
    std::replace(message.begin(), message.end(), '\n', ' ');
    return message;
}

// The connection string's parsed keywords that describe where it goes, and its password.
struct Target {
    std::string description;
    std::string password;
};

Target parse_target(const std::string& connection_string) {
    char* error = nullptr;
    PQconninfoOption* options = PQconninfoParse(connection_string.c_str(), &error);
    if (options == nullptr) {
        // libpq's parse errors quote pieces of the string, which may be the password.
        PQfreemem(error);
        throw SessionStoreError(
            "postgres session store: the connection string is malformed (its text is not "
            "shown, since it may hold a password)");
    }
    std::string host;
    std::string port;
    std::string dbname;
    Target target;
    for (const PQconninfoOption* option = options; option->keyword != nullptr; ++option) {
        if (option->val == nullptr) continue;
        const std::string_view keyword = option->keyword;
        if (keyword == "host" || (keyword == "hostaddr" && host.empty())) host = option->val;
        if (keyword == "port") port = option->val;
        if (keyword == "dbname") dbname = option->val;
        if (keyword == "password") target.password = option->val;
    }
    PQconninfoFree(options);
    target.description = (host.empty() ? std::string("localhost") : host) + ":" +
                         (port.empty() ? std::string("5432") : port) + "/" + dbname;
    return target;
}

}  // namespace

struct PostgresSessionStore::Impl {
    PostgresStoreOptions options;
    Target target;

    detail::ConnectionPool<Conn> pool;

    [[noreturn]] void fail(const std::string& what, const std::string& detail,
                           bool retryable) const {
        throw SessionStoreError("postgres session store " + target.description + ": cannot " +
                                    what + ": " + without(trim_message(detail), target.password),
                                retryable);
    }

    Conn connect() {
        const std::string timeout = std::to_string(std::max(2, options.connect_timeout_seconds));
        // Keywords after the expanded connection string override it; those before are defaults.
        const std::array<const char*, 6> keywords{"connect_timeout", "application_name", "dbname",
                                                  "client_encoding", nullptr};
        const std::array<const char*, 6> values{timeout.c_str(), "ullm",
                                                options.connection_string.c_str(), "UTF8", nullptr};
        Conn conn(PQconnectdbParams(keywords.data(), values.data(), 1));
        if (conn == nullptr) fail("connect", "out of memory", true);
        if (PQstatus(conn.get()) != CONNECTION_OK) {
            fail("connect", PQerrorMessage(conn.get()), true);
        }
        // The server's notices ("already exists, skipping", shutdown warnings) are not ours to
        // print; errors arrive with their results.
        PQsetNoticeProcessor(
            conn.get(), [](void*, const char*) {}, nullptr);
        const std::string settings =
            "SET statement_timeout = " + std::to_string(options.statement_timeout.count()) +
            "; SET lock_timeout = " + std::to_string(options.statement_timeout.count());
        const Result set(PQexec(conn.get(), settings.c_str()));
        if (PQresultStatus(set.get()) != PGRES_COMMAND_OK) {
            fail("configure a connection", PQerrorMessage(conn.get()), true);
        }
        return conn;
    }

    // Runs one statement with binary parameters and binary results; throws on failure.
    Result exec(PGconn* conn, const char* sql, const std::vector<Param>& params,
                const std::string& what) {
        std::vector<Oid> types;
        std::vector<const char*> values;
        std::vector<int> lengths;
        std::vector<int> formats;
        for (const Param& param : params) {
            types.push_back(param.type);
            values.push_back(param.bytes.data());
            lengths.push_back(static_cast<int>(param.bytes.size()));
            formats.push_back(1);
        }
        Result result(PQexecParams(conn, sql, static_cast<int>(params.size()), types.data(),
                                   values.data(), lengths.data(), formats.data(), 1));
        const ExecStatusType status = PQresultStatus(result.get());
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) return result;
        const char* state =
            result != nullptr ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
        const std::string sqlstate = state != nullptr ? state : "";
        // A lost connection, a server shutting down or starting, a timeout, a lock or
        // serialisation failure: trying again later may work.
        const bool retryable = PQstatus(conn) != CONNECTION_OK || sqlstate.rfind("08", 0) == 0 ||
                               sqlstate.rfind("57", 0) == 0 || sqlstate == "40001" ||
                               sqlstate == "40P01" || sqlstate == "55P03" || sqlstate == "53300";
        std::string detail = PQerrorMessage(conn);
        if (!sqlstate.empty()) detail += " (sqlstate " + sqlstate + ")";
        fail(what, detail, retryable);
    }

    // Runs `body(conn)` on a pooled connection; one that broke or was left inside a
    // transaction is not kept.
    template <typename Body>
    auto with_connection(Body&& body) {
        return pool.run(
            [&] { return connect(); },
            [&] {
                fail("get a connection",
                     "all " + std::to_string(options.pool_size) + " connections stayed busy for " +
                         std::to_string(options.checkout_timeout.count()) + " ms",
                     true);
            },
            [](PGconn* conn) {
                return PQstatus(conn) == CONNECTION_OK && PQtransactionStatus(conn) == PQTRANS_IDLE;
            },
            std::forward<Body>(body));
    }

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
                const Result created(PQexec(conn, create_schema_sql));
                if (PQresultStatus(created.get()) != PGRES_COMMAND_OK) {
                    fail("create the schema", PQerrorMessage(conn),
                         PQstatus(conn) != CONNECTION_OK);
                }
            }
            exec(conn, "COMMIT", {}, "commit the schema");
        } catch (...) {
            if (PQstatus(conn) == CONNECTION_OK) PQclear(PQexec(conn, "ROLLBACK"));
            throw;
        }
    }
};

PostgresSessionStore::PostgresSessionStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PostgresSessionStore::~PostgresSessionStore() = default;

std::shared_ptr<PostgresSessionStore> PostgresSessionStore::open(
    const PostgresStoreOptions& options) {
    if (options.pool_size < 1 || options.pool_size > 64) {
        throw SessionStoreError("postgres session store: the pool size must be 1..64, not " +
                                std::to_string(options.pool_size));
    }
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->target = parse_target(options.connection_string);
    impl->pool.size = options.pool_size;
    impl->pool.wait = options.checkout_timeout;
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
