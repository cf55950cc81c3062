#pragma once

/// `FileSessionStore`: a `SessionStore` that keeps one file per session in a directory.

#include <ullm/store/session_store.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

namespace ullm {

/// Keeps each (tenant, session) in its own file under a directory on a local filesystem.
///
/// Layout: a `FORMAT` file names the layout version; each tenant has a directory and each
/// session a `.rec` file in it, both named by the lowercase hex of the key (split into
/// 200-character pieces, one directory level each, so any valid key fits the filesystem's name
/// limit). Names therefore never escape the directory and never collide, not even on a
/// case-insensitive filesystem. A record holds its version, the time it was written, its key
/// and a CRC-32 over everything, so a damaged file is reported, never returned.
///
/// Writes go to a temporary file in the record's directory, which is flushed (`fsync`) and
/// renamed over the record, and the directory is flushed too: a crash leaves the old or the
/// new record, never a torn one. Temporary files a crash leaves behind are ignored, and removed
/// by a later `list` of that tenant. The version check and the write of `put` and `remove` run
/// under an exclusive lock (`flock`) on the tenant's `lock` file, so writers in other threads
/// and other processes on the same machine are serialised; readers take no lock. Network
/// filesystems whose `flock` is not shared between hosts are not supported.
///
/// Files are created with mode 0600 and directories with 0700: snapshots hold conversations.
/// The store object holds only the directory path; every member is thread-safe.
class FileSessionStore final : public SessionStore {
public:
    /// Opens the store in `directory`, creating it (and its parents) when missing. Throws
    /// `SessionStoreError` when the directory cannot be created or written, or holds a store of
    /// another (newer) layout.
    explicit FileSessionStore(std::filesystem::path directory);

    /// The same as the constructor, as a shared pointer (the way stores are handed around).
    [[nodiscard]] static std::shared_ptr<FileSessionStore> open(
        const std::filesystem::path& directory);

    FileSessionStore(const FileSessionStore&) = delete;
    FileSessionStore& operator=(const FileSessionStore&) = delete;

    /// The directory the store lives in.
    [[nodiscard]] const std::filesystem::path& directory() const noexcept { return directory_; }

    /// See `SessionStore::get`. Throws `ProviderCapabilityError` for an invalid key and
    /// `SessionStoreError` when the record cannot be read or is damaged.
    [[nodiscard]] std::optional<StoredSession> get(std::string_view tenant,
                                                   std::string_view session_id) override;

    /// See `SessionStore::put`. Throws `ProviderCapabilityError` for an invalid key,
    /// `SessionStoreConflictError` on a version mismatch (nothing written) and
    /// `SessionStoreError` when the storage fails or the current record is damaged.
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override;

    /// See `SessionStore::remove`. Removes a damaged record too. Throws
    /// `ProviderCapabilityError` for an invalid key and `SessionStoreError`.
    bool remove(std::string_view tenant, std::string_view session_id) override;

    /// See `SessionStore::list`. Reads the header of each listed record (not the snapshot).
    /// Throws `ProviderCapabilityError` (`invalid_tenant`, `invalid_list_limit`,
    /// `invalid_cursor`) and `SessionStoreError` (a damaged record header included).
    [[nodiscard]] SessionPage list(std::string_view tenant,
                                   const SessionListOptions& options = {}) override;

private:
    std::filesystem::path directory_;
};

}  // namespace ullm
