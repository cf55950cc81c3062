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
/// The destructor never waits for work: what was posted still runs, on the threads that remain,
/// which end once the queue is empty. Thread-safe.
class ThreadPool {
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
        if (shared_->threads < shared_->max_threads) {
            try {
                std::thread(loop, shared_).detach();
                ++shared_->threads;
                return true;
            } catch (...) {
                // No thread now: the work waits for one that runs, if any does.
            }
        }
        if (shared_->threads > 0) return true;
        shared_->queue.pop_back();
        return false;
    }

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
        bool closing = false;
    };

    static void loop(const std::shared_ptr<Shared>& shared) {
#if defined(__linux__)
        pthread_setname_np(pthread_self(), shared->name.substr(0, 15).c_str());
#endif
        std::unique_lock lock(shared->mutex);
        for (;;) {
            ++shared->idle;
            const bool has_work = shared->changed.wait_for(
                lock, shared->idle_for, [&] { return !shared->queue.empty() || shared->closing; });
            --shared->idle;
            if (!has_work || shared->queue.empty()) break;  // idle too long, or closed and done
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
    }

    std::shared_ptr<Shared> shared_;
};

}  // namespace ullm::detail
