#pragma once

/// `MemorySessionStore`: a `SessionStore` that keeps every snapshot in memory, for tests and
/// short-lived processes.

#include <ullm/store/session_store.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// Keeps snapshots in this process's memory; they are gone when the store is destroyed. Meets
/// the whole `SessionStore` contract (versions, tenant isolation, paging, key rules) so that
/// code tested against it behaves the same on the file and SQLite stores. Every member is
/// thread-safe (one mutex guards the records); it never throws `SessionStoreError`.
class MemorySessionStore final : public SessionStore {
public:
    /// An empty store.
    MemorySessionStore() = default;

    MemorySessionStore(const MemorySessionStore&) = delete;
    MemorySessionStore& operator=(const MemorySessionStore&) = delete;

    /// See `SessionStore::get`. Throws `ProviderCapabilityError` for an invalid key.
    [[nodiscard]] std::optional<StoredSession> get(std::string_view tenant,
                                                   std::string_view session_id) override;

    /// See `SessionStore::put`. Throws `ProviderCapabilityError` for an invalid key and
    /// `SessionStoreConflictError` on a version mismatch.
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override;

    /// See `SessionStore::remove`. Throws `ProviderCapabilityError` for an invalid key.
    bool remove(std::string_view tenant, std::string_view session_id) override;

    /// See `SessionStore::list`. Throws `ProviderCapabilityError` (`invalid_tenant`,
    /// `invalid_list_limit`, `invalid_cursor`).
    [[nodiscard]] SessionPage list(std::string_view tenant,
                                   const SessionListOptions& options = {}) override;

private:
    struct Record {
        std::uint64_t version = 0;
        std::string snapshot;
        std::chrono::system_clock::time_point updated_at;
    };
    using Sessions = std::map<std::string, Record, std::less<>>;

    std::mutex mutex_;
    std::map<std::string, Sessions, std::less<>> tenants_;
};

}  // namespace ullm
