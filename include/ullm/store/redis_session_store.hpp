#pragma once

/// `RedisSessionStore`: a `SessionStore` in Redis, shared by every process that connects to the
/// server. Part of the optional `ullm::redis` component (hiredis).

#include <ullm/store/session_store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// How `RedisSessionStore::open` connects and names its keys.
struct RedisStoreOptions {
    std::string host = "127.0.0.1";
    int port = 6379;
    /// `AUTH` after every connect when not empty (with `username` for a Redis 6 ACL user). Never
    /// appears in an error message.
    std::string username;
    std::string password;
    /// Every key starts with `<key_prefix>:`; 1..64 of `A-Z a-z 0-9 _ . -`. One per application.
    std::string key_prefix = "ullm";
    /// When positive, a session expires this long after its last write.
    std::chrono::milliseconds ttl{0};
    /// At most this many connections are open at once (1..64); a call waits for a free one.
    std::size_t pool_size = 4;
    /// The connect, read and write timeout of every connection, and how long a call waits for a
    /// free connection.
    std::chrono::milliseconds timeout{5000};
};

/// Keeps each session in a hash, `<prefix>:s:{<hex tenant>}:<hex session id>` (fields `v`
/// version, `t` last write in ms, `d` snapshot bytes), and each tenant's session ids in a sorted
/// set, `<prefix>:i:{<hex tenant>}`, which `list` pages through in byte order. Keys are the hex
/// of the ids, so no id can reach another's key or a glob pattern. A versioned write is one Lua
/// script (`EVALSHA`, loaded again when the server lost it) that compares and sets the version,
/// updates the index and sets the TTL atomically.
///
/// Calls share a bounded pool of connections and are thread-safe. A broken connection is dropped
/// (with the idle ones) and the next call connects again: after a server restart, the call that
/// noticed fails with a retryable `SessionStoreError` and the next one succeeds. hiredis 0.14
/// (Debian 12) has no TLS: use a TLS tunnel or a private network.
class RedisSessionStore final : public SessionStore {
public:
    /// Checks the options, connects and loads the scripts. Throws `SessionStoreError` when an
    /// option is invalid or the server cannot be reached (retryable).
    [[nodiscard]] static std::shared_ptr<RedisSessionStore> open(const RedisStoreOptions& options);

    ~RedisSessionStore() override;
    RedisSessionStore(const RedisSessionStore&) = delete;
    RedisSessionStore& operator=(const RedisSessionStore&) = delete;

    [[nodiscard]] std::optional<StoredSession> get(std::string_view tenant,
                                                   std::string_view session_id) override;
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override;
    bool remove(std::string_view tenant, std::string_view session_id) override;
    [[nodiscard]] SessionPage list(std::string_view tenant,
                                   const SessionListOptions& options = {}) override;

private:
    struct Impl;
    explicit RedisSessionStore(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace ullm
