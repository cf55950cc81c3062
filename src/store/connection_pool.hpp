#pragma once

// Internal to the server-backed session stores (PostgreSQL, Redis): a bounded pool of
// connections shared by the store's callers.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace ullm::detail {

/// At most `size` connections open at once; idle ones are reused, and a caller waits up to
/// `wait` for one to come free. A connection that broke is dropped together with the idle
/// ones (the server went away, so they are broken too), and the next call connects afresh.
/// `Conn` is a `std::unique_ptr` to the client library's connection.
template <class Conn>
class ConnectionPool {
public:
    std::size_t size = 4;
    std::chrono::milliseconds wait{5000};

    /// Runs `body(connection)` on a pooled connection and returns what it returns. `open()`
    /// makes a new connection, `busy()` throws when none came free in time, and
    /// `healthy(connection)` says afterwards (also after a throw) whether to keep it.
    template <class Open, class Busy, class Healthy, class Body>
    auto run(Open&& open, Busy&& busy, Healthy&& healthy, Body&& body) {
        Conn conn = checkout(open, busy);
        try {
            auto value = body(conn.get());
            const bool keep = healthy(conn.get());
            checkin(std::move(conn), keep);
            return value;
        } catch (...) {
            const bool keep = healthy(conn.get());
            checkin(std::move(conn), keep);
            throw;
        }
    }

private:
    template <class Open, class Busy>
    Conn checkout(Open& open, Busy& busy) {
        std::unique_lock lock(mutex_);
        if (!freed_.wait_for(lock, wait, [&] { return !idle_.empty() || open_count_ < size; })) {
            busy();
        }
        if (!idle_.empty()) {
            Conn conn = std::move(idle_.back());
            idle_.pop_back();
            return conn;
        }
        ++open_count_;
        lock.unlock();
        try {
            return open();
        } catch (...) {
            lock.lock();
            --open_count_;
            freed_.notify_one();
            throw;
        }
    }

    void checkin(Conn conn, bool keep) {
        std::vector<Conn> dropped;  // closed after the lock is released
        {
            const std::lock_guard lock(mutex_);
            if (keep) {
                idle_.push_back(std::move(conn));
            } else {
                open_count_ -= 1 + idle_.size();
                dropped = std::move(idle_);
                idle_.clear();
            }
            freed_.notify_all();
        }
    }

    std::mutex mutex_;
    std::condition_variable freed_;
    std::vector<Conn> idle_;
    std::size_t open_count_ = 0;
};

}  // namespace ullm::detail
