#pragma once

// Internal to the SQLite stores (session store, usage ledger): errors mapped to the store's
// error type, and statements run once without a prepared statement.

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace ullm::detail::sqlite_support {

/// Throws `StoreError(message, retryable)` for the failed call `what`: `label` and `path`, the
/// connection's message (never a bound value) and the SQLite code; retryable for SQLITE_BUSY
/// and SQLITE_LOCKED.
template <class StoreError>
[[noreturn]] void fail(sqlite3* db, int rc, const std::string& label, const std::string& what,
                       const std::string& path) {
    const int primary = rc & 0xFF;
    const bool retryable = primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
    const std::string detail = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    throw StoreError(label + " " + path + ": cannot " + what + ": " + detail + " (sqlite code " +
                         std::to_string(rc) + ")",
                     retryable);
}

/// Runs `sql` (no parameters, no rows); throws through `fail` when it fails.
template <class StoreError>
void exec(sqlite3* db, const char* sql, const std::string& label, const std::string& what,
          const std::string& path) {
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) fail<StoreError>(db, rc, label, what, path);
}

/// Like `exec`, retrying for up to `busy_timeout_ms` while the database is locked. For the one
/// statement SQLite does not wait on by itself: switching a new file to WAL while another
/// process opens it returns SQLITE_BUSY at once.
template <class StoreError>
void exec_waiting(sqlite3* db, const char* sql, const std::string& label, const std::string& what,
                  const std::string& path, int busy_timeout_ms) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
        const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
        if (rc == SQLITE_OK) return;
        if ((rc & 0xFF) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
            fail<StoreError>(db, rc, label, what, path);
        }
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
}

}  // namespace ullm::detail::sqlite_support
