#include <ullm/detail/request_limiter.hpp>

#include <ullm/core/error.hpp>

#include <algorithm>
#include <condition_variable>
#include <utility>

namespace ullm::detail {

void RequestLimiter::Permit::settle(std::int64_t tokens) noexcept {
    if (limiter_) limiter_->on_release(charge_, true, tokens);
}

void RequestLimiter::Permit::release() noexcept {
    if (const auto limiter = std::move(limiter_)) {
        limiter_ = nullptr;
        limiter->on_release(charge_, false, 0);
    }
    charge_ = nullptr;
}

RequestLimiter::RequestLimiter(std::string provider, ProviderLimits limits, Schedule schedule,
                               Now now)
    : provider_(std::move(provider)),
      limits_(limits),
      schedule_(std::move(schedule)),
      now_(std::move(now)) {}

bool RequestLimiter::fits(std::int64_t tokens, Clock::time_point now, Clock::time_point& opens) {
    while (!window_.empty() && window_.front()->at + window <= now) {
        window_.front()->in_window = false;
        window_tokens_ -= window_.front()->tokens;
        window_.pop_front();
    }
    opens = Clock::time_point::max();
    if (now < held_until_) {
        opens = held_until_;
        return false;
    }
    if (limits_.max_in_flight != 0 && in_flight_ >= limits_.max_in_flight) return false;
    const bool rpm_full =
        limits_.requests_per_minute != 0 && window_.size() >= limits_.requests_per_minute;
    const bool tpm_full = limits_.tokens_per_minute != 0 && !window_.empty() &&
                          window_tokens_ + tokens > limits_.tokens_per_minute;
    if (rpm_full || tpm_full) {
        opens = window_.front()->at + window;
        return false;
    }
    return true;
}

RequestLimiter::Permit RequestLimiter::start(std::int64_t tokens, Clock::time_point now) {
    ++in_flight_;
    auto charge = std::make_shared<Charge>(Charge{now, tokens, false});
    if (limits_.requests_per_minute != 0 || limits_.tokens_per_minute != 0) {
        charge->in_window = true;
        window_.push_back(charge);
        window_tokens_ += tokens;
    }
    return {shared_from_this(), std::move(charge)};
}

std::vector<RequestLimiter::Grant> RequestLimiter::pump() {
    std::vector<Grant> grants;
    const auto now = now_();
    auto opens = Clock::time_point::max();
    while (!turns_.empty()) {
        const std::uint64_t lane = turns_.front();
        const auto queue = lanes_.find(lane);
        std::shared_ptr<Waiter> waiter = queue->second.front();
        if (!fits(waiter->tokens, now, opens)) break;
        queue->second.pop_front();
        --queued_;
        turns_.pop_front();
        if (queue->second.empty()) {
            lanes_.erase(queue);
        } else {
            turns_.push_back(lane);
        }
        Permit permit = start(waiter->tokens, now);
        grants.emplace_back(std::move(waiter), std::move(permit));
    }
    if (!turns_.empty() && opens != Clock::time_point::max()) arm(opens);
    return grants;
}

void RequestLimiter::arm(Clock::time_point opens) {
    if (opens >= timer_at_) return;  // a timer that fires no later is armed already
    timer_at_ = opens;
    schedule_(opens - now_(), [weak = weak_from_this(), opens] {
        const auto self = weak.lock();
        if (!self) return;
        std::vector<Grant> grants;
        {
            std::lock_guard lock(self->mutex_);
            if (self->timer_at_ == opens) self->timer_at_ = Clock::time_point::max();
            grants = self->pump();
        }
        deliver(std::move(grants));
    });
}

void RequestLimiter::on_release(const std::shared_ptr<Charge>& charge, bool settle_only,
                                std::int64_t tokens) noexcept {
    std::vector<Grant> grants;
    {
        std::lock_guard lock(mutex_);
        if (settle_only) {
            if (charge->in_window) window_tokens_ += tokens - charge->tokens;
            charge->tokens = tokens;
        } else {
            --in_flight_;
        }
        try {
            grants = pump();
        } catch (...) {
            // Out of memory while granting: the waiters stay queued for the next release.
        }
    }
    deliver(std::move(grants));
}

void RequestLimiter::deliver(std::vector<Grant>&& grants) noexcept {
    for (auto& [waiter, permit] : grants) {
        try {
            waiter->granted(std::move(permit), nullptr);
        } catch (...) {
            // A waiter's callback cannot fail the others.
        }
    }
}

std::shared_ptr<RequestLimiter::Waiter> RequestLimiter::request(std::uint64_t lane,
                                                                std::int64_t tokens,
                                                                Granted granted) {
    Permit permit;
    bool refused = false;
    std::shared_ptr<Waiter> waiter;
    {
        std::lock_guard lock(mutex_);
        const auto now = now_();
        auto opens = Clock::time_point::max();
        if (turns_.empty() && fits(tokens, now, opens)) {
            permit = start(tokens, now);
        } else if (queued_ >= limits_.max_queued) {
            refused = true;
        } else {
            waiter = std::make_shared<Waiter>(Waiter{lane, tokens, std::move(granted)});
            auto& queue = lanes_[lane];
            if (queue.empty()) turns_.push_back(lane);
            queue.push_back(waiter);
            ++queued_;
            if (opens != Clock::time_point::max()) arm(opens);
            if (limits_.max_queue_wait.count() > 0) {
                schedule_(limits_.max_queue_wait, [weak = weak_from_this(),
                                                   weak_waiter = std::weak_ptr<Waiter>(waiter)] {
                    const auto self = weak.lock();
                    const auto expired = weak_waiter.lock();
                    if (!self || !expired) return;
                    self->remove(expired,
                                 std::make_exception_ptr(QueueTimeoutError(
                                     "the request waited " +
                                         std::to_string(self->limits_.max_queue_wait.count()) +
                                         " ms for the limits of provider " + self->provider_ +
                                         " (ProviderLimits::max_queue_wait)",
                                     {self->provider_, "", ""})));
                });
            }
            return waiter;
        }
    }
    if (refused) {
        granted({}, std::make_exception_ptr(QueueFullError(
                        "the queue of provider " + provider_ +
                            " is full: " + std::to_string(limits_.max_queued) +
                            " requests already wait for its limits (ProviderLimits::max_queued)",
                        {provider_, "", ""})));
    } else {
        granted(std::move(permit), nullptr);
    }
    return nullptr;
}

void RequestLimiter::withdraw(const std::shared_ptr<Waiter>& waiter) {
    remove(waiter, std::make_exception_ptr(CancelledError(
                       "the request was cancelled while it waited for the limits of provider " +
                       provider_)));
}

void RequestLimiter::remove(const std::shared_ptr<Waiter>& waiter,
                            const std::exception_ptr& error) {
    bool found = false;
    std::vector<Grant> grants;
    {
        std::lock_guard lock(mutex_);
        const auto queue = lanes_.find(waiter->lane);
        if (queue != lanes_.end()) {
            auto& waiting = queue->second;
            const auto at = std::find(waiting.begin(), waiting.end(), waiter);
            if (at != waiting.end()) {
                found = true;
                waiting.erase(at);
                --queued_;
                if (waiting.empty()) {
                    lanes_.erase(queue);
                    turns_.erase(std::find(turns_.begin(), turns_.end(), waiter->lane));
                }
                // The one removed may have held back the others.
                grants = pump();
            }
        }
    }
    if (found) {
        try {
            waiter->granted({}, error);
        } catch (...) {
            // As in `deliver`.
        }
    }
    deliver(std::move(grants));
}

RequestLimiter::Permit RequestLimiter::acquire(std::uint64_t lane, std::int64_t tokens,
                                               const std::stop_token& stop) {
    struct Outcome {
        std::mutex mutex;
        std::condition_variable decided;
        bool done = false;
        Permit permit;
        std::exception_ptr error;
    };
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    const auto outcome = std::make_shared<Outcome>();
    const auto waiter = request(lane, tokens, [outcome](Permit permit, std::exception_ptr error) {
        // Notified under the lock: the waiter returns once it sees
        // `done`, and `outcome` is shared.
        std::lock_guard lock(outcome->mutex);
        outcome->permit = std::move(permit);
        outcome->error = std::move(error);
        outcome->done = true;
        outcome->decided.notify_all();
    });
    if (waiter) {
        const std::stop_callback on_stop(stop, [this, waiter] { withdraw(waiter); });
        std::unique_lock lock(outcome->mutex);
        outcome->decided.wait(lock, [&] { return outcome->done; });
    }
    std::lock_guard lock(outcome->mutex);
    if (outcome->error) std::rethrow_exception(outcome->error);
    return std::move(outcome->permit);
}

void RequestLimiter::hold_until(Clock::time_point until) {
    std::lock_guard lock(mutex_);
    held_until_ = std::max(held_until_, until);
}

std::size_t RequestLimiter::in_flight() const {
    std::lock_guard lock(mutex_);
    return in_flight_;
}

std::size_t RequestLimiter::queued() const {
    std::lock_guard lock(mutex_);
    return queued_;
}

}  // namespace ullm::detail
