#pragma once

// Internal: `detail::WorkThread`, an executor with one thread of its own, started on the first
// post, that also runs work after a delay. A client's callback thread (`ullm-cb`).

#include <ullm/core/executor.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <pthread.h>
#endif

namespace ullm::detail {

/// Runs posted work in order on one thread, and timed work once its time has come. The
/// destructor runs what was posted before it and drops timed work not yet due; it joins the
/// thread, unless it runs on that thread (the last owner let go inside a work item), in which
/// case the thread finishes the queue and leaves on its own. Thread-safe.
class WorkThread final : public Executor {
public:
    using Clock = std::chrono::steady_clock;

    explicit WorkThread(std::string name) : name_(std::move(name)) {}

    ~WorkThread() override {
        {
            std::lock_guard lock(shared_->mutex);
            shared_->stopping = true;
        }
        shared_->changed.notify_all();
        if (!thread_.joinable()) return;
        if (thread_.get_id() == std::this_thread::get_id()) {
            thread_.detach();  // the loop holds `shared_` and leaves when this item returns
        } else {
            thread_.join();
        }
    }

    WorkThread(const WorkThread&) = delete;
    WorkThread& operator=(const WorkThread&) = delete;

    void post(std::function<void()> work) noexcept override {
        post_at(Clock::time_point::min(), std::move(work));
    }

    /// Runs `work` once `delay` has passed (or at once when it is not positive).
    void post_after(Clock::duration delay, std::function<void()> work) noexcept {
        post_at(delay.count() > 0 ? Clock::now() + delay : Clock::time_point::min(),
                std::move(work));
    }

    /// Whether the calling thread is this executor's thread.
    [[nodiscard]] bool on_this_thread() const noexcept {
        std::lock_guard lock(shared_->mutex);
        return thread_.get_id() == std::this_thread::get_id();
    }

private:
    struct Shared {
        std::mutex mutex;
        std::condition_variable changed;
        std::deque<std::function<void()>> ready;
        std::multimap<Clock::time_point, std::function<void()>> timed;
        bool stopping = false;
    };

    void post_at(Clock::time_point when, std::function<void()> work) noexcept {
        {
            std::lock_guard lock(shared_->mutex);
            if (!shared_->stopping && (thread_.joinable() || start())) {
                if (when == Clock::time_point::min()) {
                    shared_->ready.push_back(std::move(work));
                } else {
                    shared_->timed.emplace(when, std::move(work));
                }
                work = nullptr;
                // Under the lock: once it is released, the work may run and let go of the
                // last owner of this executor.
                shared_->changed.notify_one();
            }
        }
        // No thread to run it (stopped, or none could start): a result is never lost.
        if (work) work();
    }

    // Starts the thread; false when the system refused one. Called with the mutex held.
    bool start() noexcept {
        try {
            thread_ = std::thread([shared = shared_, name = name_] { loop(*shared, name); });
            return true;
        } catch (...) {
            return false;
        }
    }

    static void loop(Shared& shared, const std::string& name) {
#if defined(__linux__)
        pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
#endif
        std::unique_lock lock(shared.mutex);
        for (;;) {
            while (!shared.timed.empty() && shared.timed.begin()->first <= Clock::now()) {
                shared.ready.push_back(std::move(shared.timed.begin()->second));
                shared.timed.erase(shared.timed.begin());
            }
            if (!shared.ready.empty()) {
                std::function<void()> work = std::move(shared.ready.front());
                shared.ready.pop_front();
                lock.unlock();
                work();
                work = nullptr;  // its captures go before the lock is taken again
                lock.lock();
                continue;
            }
            if (shared.stopping) return;
            if (shared.timed.empty()) {
                shared.changed.wait(lock);
            } else {
                shared.changed.wait_until(lock, shared.timed.begin()->first);
            }
        }
    }

    std::string name_;
    std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
    std::thread thread_;  // guarded by shared_->mutex until the destructor
};

}  // namespace ullm::detail
