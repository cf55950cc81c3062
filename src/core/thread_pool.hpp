#pragma once

// Internal: `detail::ThreadPool`, up to a fixed number of threads that run posted work, started
// as work needs them and ended after a while idle. A client's tool callbacks (`ullm-tool`).

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace ullm::detail {

/// Runs posted work on at most `max_threads` threads: an idle thread takes it, else a new one
/// starts while there are fewer than `max_threads`, else it waits its turn in order. A thread
/// idle for `idle_for` ends. Work may block for as long as it likes; it holds its thread alone.
/// Work that waits for other work of the pool (a tool that runs a turn whose own tools need the
/// pool) says so with `Blocked`: the pool then has one more thread while it waits, so that the
/// work it waits for never queues behind it. The destructor never waits for work: what was
/// posted still runs, on the threads that remain, which end once the queue is empty.
/// Thread-safe.
class ThreadPool {
    struct Shared;

public:
    ThreadPool(std::string name, std::size_t max_threads,
               std::chrono::milliseconds idle_for = std::chrono::seconds(30))
        : shared_(std::make_shared<Shared>()) {
        shared_->name = std::move(name);
        shared_->max_threads = max_threads == 0 ? 1 : max_threads;
        shared_->idle_for = idle_for;
    }

    ~ThreadPool() {
        std::lock_guard lock(shared_->mutex);
        shared_->closing = true;
        shared_->changed.notify_all();
    }

    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    /// Queues `work`; false when no thread runs and none could start (the work is dropped).
    [[nodiscard]] bool post(std::function<void()> work) {
        std::lock_guard lock(shared_->mutex);
        shared_->queue.push_back(std::move(work));
        if (shared_->idle > shared_->queue.size() - 1) {
            shared_->changed.notify_one();
            return true;
        }
        if (start_thread(shared_)) return true;
        if (shared_->threads > 0) return true;
        shared_->queue.pop_back();
        return false;
    }

    /// Marks the calling thread, while this lives, as waiting for other work of its pool, when
    /// it is a thread of a pool (elsewhere it does nothing): its pool may run one more thread
    /// meanwhile, and starts it at once if work is waiting.
    class Blocked {
    public:
        Blocked() : shared_(current()) {
            if (shared_ == nullptr) return;
            std::lock_guard lock(shared_->mutex);
            ++shared_->blocked;
            if (shared_->queue.size() > shared_->idle) (void)start_thread(shared_);
        }
        ~Blocked() {
            if (shared_ == nullptr) return;
            std::lock_guard lock(shared_->mutex);
            --shared_->blocked;
        }
        Blocked(const Blocked&) = delete;
        Blocked& operator=(const Blocked&) = delete;

    private:
        std::shared_ptr<Shared> shared_;
    };

    /// Threads running now (idle ones included), and work waiting for one.
    [[nodiscard]] std::size_t threads() const {
        std::lock_guard lock(shared_->mutex);
        return shared_->threads;
    }
    [[nodiscard]] std::size_t waiting() const {
        std::lock_guard lock(shared_->mutex);
        return shared_->queue.size();
    }

private:
    struct Shared {
        std::string name;
        std::size_t max_threads = 1;
        std::chrono::milliseconds idle_for{};
        std::mutex mutex;
        std::condition_variable changed;
        std::deque<std::function<void()>> queue;
        std::size_t threads = 0;  ///< Started and not ended.
        std::size_t idle = 0;     ///< Of those, waiting for work.
        std::size_t blocked = 0;  ///< Of those, running work that waits for other work.
        bool closing = false;
    };

    // The pool the calling thread belongs to, or null.
    static std::shared_ptr<Shared>& current() {
        thread_local std::shared_ptr<Shared> pool;
        return pool;
    }

    // Starts a thread when fewer run than the bound (raised by one per blocked thread); call
    // with the mutex held.
    static bool start_thread(const std::shared_ptr<Shared>& shared) {
        if (shared->threads >= shared->max_threads + shared->blocked) return false;
        try {
            std::thread(loop, shared).detach();
            ++shared->threads;
            return true;
        } catch (...) {
            return false;  // no thread now: the work waits for one that runs, if any does
        }
    }

    static void loop(const std::shared_ptr<Shared>& shared) {
#if defined(__linux__)
        pthread_setname_np(pthread_self(), shared->name.substr(0, 15).c_str());
#endif
        current() = shared;
        std::unique_lock lock(shared->mutex);
        // More threads than the bound (one was started for a blocked one, which runs again).
        const auto over = [&] { return shared->threads > shared->max_threads + shared->blocked; };
        for (;;) {
            if (over()) break;
            ++shared->idle;
            const bool has_work = shared->changed.wait_for(
                lock, shared->idle_for, [&] { return !shared->queue.empty() || shared->closing; });
            --shared->idle;
            if (!has_work || shared->queue.empty()) break;  // idle too long, or closed and done
            if (over()) {
                shared->changed.notify_one();  // the work is for a thread within the bound
                break;
            }
            auto work = std::move(shared->queue.front());
            shared->queue.pop_front();
            lock.unlock();
            try {
                work();
            } catch (...) {
                // Work reports its own failures; a thread of the pool never dies of one.
            }
            work = nullptr;  // its captures go before the lock is taken again
            lock.lock();
        }
        --shared->threads;
        lock.unlock();
        current() = nullptr;
    }

    std::shared_ptr<Shared> shared_;
};

}  // namespace ullm::detail
