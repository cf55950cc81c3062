#pragma once

/// `SessionStore`: where conversations persist their snapshots, keyed by tenant and session
/// id, with optimistic versioning.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// One stored snapshot and its version.
struct StoredSession {
    std::string tenant;         ///< The tenant it belongs to ("" is the default tenant).
    std::string session_id;     ///< The conversation's session id.
    std::uint64_t version = 0;  ///< 1 after the first write, +1 for every later write.
    std::string snapshot;       ///< The snapshot as written (JSON text); opaque to the store.
    std::chrono::system_clock::time_point updated_at;  ///< When it was last written.
};

/// A listed session: its key and version, without the snapshot.
struct SessionSummary {
    std::string session_id;
    std::uint64_t version = 0;
    std::chrono::system_clock::time_point updated_at;
    friend bool operator==(const SessionSummary&, const SessionSummary&) = default;
};

/// How to page through `SessionStore::list`.
struct SessionListOptions {
    std::size_t limit = 100;  ///< At most this many sessions per page (1..1000).
    std::string cursor;       ///< The `next_cursor` of the previous page (opaque); empty for the
                              ///< first page.
};

/// One page of sessions, ordered by session id byte by byte (as `std::string` compares).
struct SessionPage {
    std::vector<SessionSummary> sessions;
    std::string next_cursor;  ///< Empty on the last page.
};

/// Storage for conversation snapshots. Each record is keyed by (tenant, session id): a session
/// id under one tenant is invisible to every other tenant. Writes are guarded by versions: a
/// writer states the version it read, and the store refuses the write when another writer got
/// there first. Implementations are thread-safe, and a crash at any point of a write leaves
/// either the previous or the new snapshot, never a torn one.
///
/// Keys: a tenant is empty or 1..128 bytes, a session id 1..256 bytes; both valid UTF-8 without
/// control characters. Other keys throw `ProviderCapabilityError` (`invalid_tenant`,
/// `invalid_session_id`).
class SessionStore {
public:
    virtual ~SessionStore() = default;

    /// The stored session, or nullopt when there is none under this tenant. Throws
    /// `SessionStoreError` when the storage cannot be read.
    [[nodiscard]] virtual std::optional<StoredSession> get(std::string_view tenant,
                                                           std::string_view session_id) = 0;

    /// Writes `snapshot` if the stored version is `expected_version` (0: the session must not
    /// exist yet) and returns the new version (`expected_version + 1`). Throws
    /// `SessionStoreConflictError` on a version mismatch (nothing is written) and
    /// `SessionStoreError` when the storage fails.
    virtual std::uint64_t put(std::string_view tenant, std::string_view session_id,
                              std::string_view snapshot, std::uint64_t expected_version) = 0;

    /// Deletes the session; returns whether it existed. Throws `SessionStoreError`.
    virtual bool remove(std::string_view tenant, std::string_view session_id) = 0;

    /// The tenant's sessions ordered by session id, one page at a time. A cursor stays valid
    /// while sessions are written and removed: the next page starts after the last id seen, so
    /// a full pass sees every session that existed throughout, once. Throws
    /// `ProviderCapabilityError` (`invalid_tenant`, `invalid_list_limit`, `invalid_cursor`)
    /// and `SessionStoreError`.
    [[nodiscard]] virtual SessionPage list(std::string_view tenant,
                                           const SessionListOptions& options = {}) = 0;
};

/// Checks a tenant and a session id against the key rules above; throws
/// `ProviderCapabilityError` (`invalid_tenant`, `invalid_session_id`). Thread-safe.
void validate_session_key(std::string_view tenant, std::string_view session_id);

}  // namespace ullm
