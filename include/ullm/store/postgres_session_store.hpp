#pragma once

/// `PostgresSessionStore`: a `SessionStore` in a PostgreSQL database, shared by every process
/// that connects to it. Part of the optional `ullm::postgres` component (libpq).

#include <ullm/store/session_store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// How `PostgresSessionStore::open` connects.
struct PostgresStoreOptions {
    /// A libpq connection string (`host=... port=... dbname=... user=... password=...` or a
    /// `postgresql://` URI). TLS is set here too (`sslmode`, `sslrootcert`, `sslcert`,
    /// `sslkey`). It never appears in an error message.
    std::string connection_string;
    /// At most this many connections are open at once (1..64); a call waits for a free one.
    std::size_t pool_size = 4;
    /// How long a call waits for a free connection before failing (retryable).
    std::chrono::milliseconds checkout_timeout{5000};
    /// The server-side `statement_timeout` and `lock_timeout` of every connection.
    std::chrono::milliseconds statement_timeout{5000};
    /// The seconds libpq waits for a connection to open (`connect_timeout`, at least 2).
    int connect_timeout_seconds = 5;
    /// The longest a statement waits for the server's answer, whatever the server is doing
    /// (stopped, or behind a network that drops packets): the call then fails as retryable,
    /// and its connection is closed. Keep it above `statement_timeout`, which ends a slow
    /// statement on the server with a clearer error. Positive.
    std::chrono::milliseconds read_timeout{15000};
};

/// Keeps snapshots in PostgreSQL: one table, `ullm_sessions`, keyed by (tenant, session id)
/// with `COLLATE "C"` (so paging orders ids byte by byte, as the other stores do), the version,
/// the time of the last write (milliseconds since the epoch) and the snapshot as `bytea`
/// (exactly the bytes written, as SQLite's BLOB keeps them). A versioned write is one
/// statement that compares and sets the version. The schema is created on first use, under an
/// advisory lock so that processes starting together take turns, and its version is the row of
/// `ullm_schema`; a newer version is refused.
///
/// Calls share a bounded pool of connections and are thread-safe. A connection that broke
/// (the server restarted) is dropped and a new one is opened by the next call, so after a
/// restart the call that noticed fails with a retryable `SessionStoreError` and the next one
/// succeeds. Errors name the host, port and database, never the password or the connection
/// string.
class PostgresSessionStore final : public SessionStore {
public:
    /// The schema version this ullm creates and reads.
    static constexpr int schema_version = 1;

    /// Connects, creates or checks the schema, and returns the store. Throws
    /// `SessionStoreError` when the connection string is malformed, the server cannot be
    /// reached (retryable) or the schema is newer than this ullm reads.
    [[nodiscard]] static std::shared_ptr<PostgresSessionStore> open(
        const PostgresStoreOptions& options);

    ~PostgresSessionStore() override;
    PostgresSessionStore(const PostgresSessionStore&) = delete;
    PostgresSessionStore& operator=(const PostgresSessionStore&) = delete;

    /// Where the store connects: `host:port/dbname` as parsed from the connection string.
    [[nodiscard]] const std::string& target() const noexcept;

    [[nodiscard]] std::optional<StoredSession> get(std::string_view tenant,
                                                   std::string_view session_id) override;
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override;
    bool remove(std::string_view tenant, std::string_view session_id) override;
    [[nodiscard]] SessionPage list(std::string_view tenant,
                                   const SessionListOptions& options = {}) override;

private:
    struct Impl;
    explicit PostgresSessionStore(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace ullm
