#pragma once

// Internal: `detail::Strand`, an executor that runs its work one item at a time, in the order it
// was posted, on another executor (which may have many threads). An async conversation turn's
// steps and callbacks.

#include <ullm/core/executor.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

namespace ullm::detail {

/// Posts its work to `target` so that no two items run at once and each runs after the one
/// posted before it. Held by `shared_ptr` (a drain in flight holds it). Thread-safe.
class Strand final : public Executor, public std::enable_shared_from_this<Strand> {
public:
    explicit Strand(std::shared_ptr<Executor> target) : target_(std::move(target)) {}

    void post(std::function<void()> work) noexcept override {
        {
            std::lock_guard lock(mutex_);
            queue_.push_back(std::move(work));
            if (draining_) return;
            draining_ = true;
        }
        target_->post([self = shared_from_this()] { self->drain(); });
    }

private:
    // Runs what is queued, including what the work itself posts, then lets the next post start
    // a drain of its own.
    void drain() noexcept {
        for (;;) {
            std::function<void()> work;
            {
                std::lock_guard lock(mutex_);
                if (queue_.empty()) {
                    draining_ = false;
                    return;
                }
                work = std::move(queue_.front());
                queue_.pop_front();
            }
            try {
                work();
            } catch (...) {
                // Work reports its own failures; the strand goes on.
            }
        }
    }

    std::shared_ptr<Executor> target_;
    std::mutex mutex_;
    std::deque<std::function<void()>> queue_;
    bool draining_ = false;
};

}  // namespace ullm::detail
