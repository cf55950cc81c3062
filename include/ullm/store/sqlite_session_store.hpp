#pragma once

/// `SqliteSessionStore`: the embedded default `SessionStore`, one SQLite database file.

#include <ullm/store/session_store.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// Keeps snapshots in a SQLite database: one table, `ullm_sessions`, keyed by (tenant,
/// session id), with the version, the time of the last write (milliseconds since the epoch)
/// and the snapshot bytes. The database is opened in WAL mode with `synchronous=FULL`, so a
/// `put` that returned survives a power cut, and a crash at any point (even `SIGKILL` mid-write)
/// leaves the previous or the new snapshot. A versioned write is one `BEGIN IMMEDIATE`
/// transaction, so writers in other threads and other processes that share the file are
/// serialised; a writer waits up to 5 seconds for another one's lock before failing with a
/// retryable `SessionStoreError`.
///
/// The schema version is kept in `PRAGMA user_version`, so the file belongs to the store: do
/// not share it with tables of your own. Each store object owns one connection, guarded by a
/// mutex: every member is thread-safe (calls on one object run one at a time). Do not use a
/// store across `fork()`; open a new one in the child.
class SqliteSessionStore final : public SessionStore {
public:
    /// The schema version this ullm creates and reads.
    static constexpr int schema_version = 1;

    /// Opens (creating when missing) the database at `path`, or a private in-memory database
    /// for `":memory:"`, and creates or checks the schema. Throws `SessionStoreError` when the
    /// file cannot be opened, is not a SQLite database, or has a newer schema version than
    /// this ullm reads.
    [[nodiscard]] static std::shared_ptr<SqliteSessionStore> open(const std::string& path);

    ~SqliteSessionStore() override;
    SqliteSessionStore(const SqliteSessionStore&) = delete;
    SqliteSessionStore& operator=(const SqliteSessionStore&) = delete;

    /// The path the store was opened with.
    [[nodiscard]] const std::string& path() const noexcept;

    /// See `SessionStore::get`. Throws `ProviderCapabilityError` for an invalid key and
    /// `SessionStoreError` when the database fails.
    [[nodiscard]] std::optional<StoredSession> get(std::string_view tenant,
                                                   std::string_view session_id) override;

    /// See `SessionStore::put`. Throws `ProviderCapabilityError` for an invalid key,
    /// `SessionStoreConflictError` on a version mismatch (nothing written) and
    /// `SessionStoreError` when the database fails (retryable when it stayed locked).
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override;

    /// See `SessionStore::remove`. Throws `ProviderCapabilityError` for an invalid key and
    /// `SessionStoreError`.
    bool remove(std::string_view tenant, std::string_view session_id) override;

    /// See `SessionStore::list`. Throws `ProviderCapabilityError` (`invalid_tenant`,
    /// `invalid_list_limit`, `invalid_cursor`) and `SessionStoreError`.
    [[nodiscard]] SessionPage list(std::string_view tenant,
                                   const SessionListOptions& options = {}) override;

private:
    struct Impl;
    explicit SqliteSessionStore(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace ullm
