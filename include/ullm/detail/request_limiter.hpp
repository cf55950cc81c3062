#pragma once

/// Internal to the client (a header for its tests): `detail::RequestLimiter`, the queue in
/// front of one provider that holds requests to its `ProviderLimits` (in flight, per minute),
/// serving lanes in turn.

#include <ullm/client/provider_limits.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

namespace ullm::detail {

/// Grants requests the right to start under one provider's limits. Thread-safe. A request asks
/// with `request` (async) or `acquire` (blocking); once granted it holds a `Permit` until it
/// ends. Requests that must wait are served lane by lane in turn, each lane in order, and a
/// request at the head of the turn is never overtaken (a large one is not starved by small
/// ones).
class RequestLimiter : public std::enable_shared_from_this<RequestLimiter> {
public:
    using Clock = std::chrono::steady_clock;
    /// Runs work after a delay (the client's callback thread).
    using Schedule = std::function<void(Clock::duration, std::function<void()>)>;
    /// The time now (a test may turn it by hand).
    using Now = std::function<Clock::time_point()>;

    /// How long a start counts against the per-minute limits.
    static constexpr Clock::duration window = std::chrono::minutes(1);

    /// One start in the per-minute window.
    struct Charge {
        Clock::time_point at;
        std::int64_t tokens = 0;
        bool in_window = true;
    };

    /// A granted request's right to be in flight, until destroyed. Move-only.
    class Permit {
    public:
        Permit() = default;
        Permit(Permit&& other) noexcept = default;
        Permit& operator=(Permit&& other) noexcept {
            if (this != &other) {
                release();
                limiter_ = std::move(other.limiter_);
                charge_ = std::move(other.charge_);
            }
            return *this;
        }
        Permit(const Permit&) = delete;
        Permit& operator=(const Permit&) = delete;
        ~Permit() { release(); }

        /// Counts `tokens` (what the request used) against the window instead of its estimate.
        void settle(std::int64_t tokens) noexcept;
        /// Ends the request's time in flight now (the destructor does it otherwise).
        void release() noexcept;
        [[nodiscard]] bool held() const noexcept { return limiter_ != nullptr; }

    private:
        friend class RequestLimiter;
        Permit(std::shared_ptr<RequestLimiter> limiter, std::shared_ptr<Charge> charge)
            : limiter_(std::move(limiter)), charge_(std::move(charge)) {}
        std::shared_ptr<RequestLimiter> limiter_;
        std::shared_ptr<Charge> charge_;
    };

    /// Told once whether a request may start: a permit, or the error that ends it
    /// (`QueueFullError`, `QueueTimeoutError` after `max_queue_wait`, or `CancelledError`
    /// once withdrawn).
    using Granted = std::function<void(Permit, std::exception_ptr)>;

    /// A request waiting in the queue.
    struct Waiter {
        std::uint64_t lane = 0;
        std::int64_t tokens = 0;
        Granted granted;
    };

    RequestLimiter(std::string provider, ProviderLimits limits, Schedule schedule,
                   Now now = &Clock::now);

    /// Asks for a permit for a request estimated at `tokens`. `granted` runs once: at once on
    /// this thread when the request may start or the queue is full, else later on the thread
    /// that frees room (a permit's release, or the schedule's timer). Returns the waiter to
    /// withdraw while it waits, or null when `granted` already ran.
    std::shared_ptr<Waiter> request(std::uint64_t lane, std::int64_t tokens, Granted granted);

    /// Takes `waiter` out of the queue and tells it `CancelledError`; nothing when it was
    /// granted already.
    void withdraw(const std::shared_ptr<Waiter>& waiter);

    /// Waits for a permit; throws `QueueFullError`, or `CancelledError` when `stop` is
    /// requested while it waits.
    Permit acquire(std::uint64_t lane, std::int64_t tokens, const std::stop_token& stop);

    /// Starts nothing before `until` (the provider asked to be left alone: a `429` with a
    /// `Retry-After`); a later call may extend the hold, never shorten it.
    void hold_until(Clock::time_point until);

    /// Requests in flight, and waiting (for tests and diagnostics).
    [[nodiscard]] std::size_t in_flight() const;
    [[nodiscard]] std::size_t queued() const;

private:
    using Grant = std::pair<std::shared_ptr<Waiter>, Permit>;

    // Whether a request of `tokens` may start at `now`; else when room may come by time alone
    // (`Clock::time_point::max()`: only a release makes room). Called with the mutex held.
    bool fits(std::int64_t tokens, Clock::time_point now, Clock::time_point& opens);
    // Starts a request of `tokens` now. Called with the mutex held.
    Permit start(std::int64_t tokens, Clock::time_point now);
    // Grants the waiters that may start now, in turn, and arms the timer for the rest.
    // Called with the mutex held; the grants are delivered by the caller, unlocked.
    std::vector<Grant> pump();
    void arm(Clock::time_point opens);
    void on_release(const std::shared_ptr<Charge>& charge, bool settle_only,
                    std::int64_t tokens) noexcept;
    static void deliver(std::vector<Grant>&& grants) noexcept;
    // Takes `waiter` out of the queue and tells it `error`; nothing when it is not queued.
    void remove(const std::shared_ptr<Waiter>& waiter, const std::exception_ptr& error);

    std::string provider_;
    ProviderLimits limits_;
    Schedule schedule_;
    Now now_;
    mutable std::mutex mutex_;
    std::size_t in_flight_ = 0;
    std::deque<std::shared_ptr<Charge>> window_;
    std::int64_t window_tokens_ = 0;
    std::map<std::uint64_t, std::deque<std::shared_ptr<Waiter>>> lanes_;
    std::deque<std::uint64_t> turns_;  // lanes with waiters, the next to serve first
    std::size_t queued_ = 0;
    Clock::time_point timer_at_ = Clock::time_point::max();
    Clock::time_point held_until_{};
};

}  // namespace ullm::detail
