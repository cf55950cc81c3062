#pragma once

// Counts how many of something (tool calls, requests a server answers) run at once, and the
// most that ever did, for tests of concurrency bounds. Thread-safe.

#include <atomic>

namespace ullm::test {

class ConcurrencyCounter {
public:
    // One running: counted from `enter()` until it goes.
    class Running {
    public:
        explicit Running(ConcurrencyCounter& counter) noexcept : counter_(&counter) {}
        ~Running() { --counter_->now_; }
        Running(const Running&) = delete;
        Running& operator=(const Running&) = delete;

    private:
        ConcurrencyCounter* counter_;
    };

    // Counts one more running, and raises the most seen when this makes more than ever.
    [[nodiscard]] Running enter() noexcept {
        const int running = ++now_;
        int seen = most_.load();
        while (running > seen && !most_.compare_exchange_weak(seen, running)) {
        }
        return Running(*this);
    }
    // How many run now.
    [[nodiscard]] int now() const noexcept { return now_.load(); }
    // The most that ever ran at once.
    [[nodiscard]] int most() const noexcept { return most_.load(); }

private:
    std::atomic<int> now_{0};
    std::atomic<int> most_{0};
};

}  // namespace ullm::test
