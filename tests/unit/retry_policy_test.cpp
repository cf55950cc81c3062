#include <ullm/http/retry_policy.hpp>

#include <thread>

#include "support/catch.hpp"

namespace retry_policy_test {

using namespace std::chrono_literals;
using ullm::RetryPolicy;

TEST_CASE("retryable statuses are 408, 429, 5xx and 529 only", "[retry]") {
    for (const int status : {408, 429, 500, 502, 503, 504, 529}) {
        CHECK(RetryPolicy::retryable_status(status));
    }
    for (const int status : {200, 400, 401, 403, 404, 409, 413, 422}) {
        CHECK_FALSE(RetryPolicy::retryable_status(status));
    }
}

TEST_CASE("backoff grows exponentially, is capped, and jitter only shortens it", "[retry]") {
    RetryPolicy policy;
    policy.initial_backoff = 100ms;
    policy.multiplier = 2.0;
    policy.max_backoff = 1000ms;
    policy.jitter = 0.5;
    CHECK(policy.backoff(1, 0.0) == 100ms);
    CHECK(policy.backoff(2, 0.0) == 200ms);
    CHECK(policy.backoff(3, 0.0) == 400ms);
    CHECK(policy.backoff(10, 0.0) == 1000ms);
    CHECK(policy.backoff(2, 0.999) >= 100ms);
    CHECK(policy.backoff(2, 0.999) <= 200ms);
    CHECK(policy.backoff(2, 0.5) == 150ms);
}

TEST_CASE("delay_before prefers the server's hint and stops after the last attempt", "[retry]") {
    RetryPolicy policy;  // 3 attempts: retries 1 and 2
    policy.initial_backoff = 100ms;
    policy.jitter = 0;
    CHECK(policy.delay_before(1, std::nullopt, 0.3) == 100ms);
    CHECK(policy.delay_before(1, 2500ms, 0.3) == 2500ms);
    CHECK(policy.delay_before(2, std::nullopt, 0.3) == 200ms);
    CHECK_FALSE(policy.delay_before(3, std::nullopt, 0.3).has_value());
    policy.max_server_delay = 10s;
    CHECK_FALSE(policy.delay_before(1, 11s, 0.3).has_value());
    policy.max_attempts = 1;
    CHECK_FALSE(policy.delay_before(1, std::nullopt, 0.3).has_value());
}

TEST_CASE("Retry-After accepts delay-seconds and HTTP dates", "[retry]") {
    const auto now = std::chrono::system_clock::from_time_t(784111777);  // 1994-11-06 08:49:37Z
    CHECK(RetryPolicy::parse_retry_after("120", now) == 120000ms);
    CHECK(RetryPolicy::parse_retry_after(" 0 ", now) == 0ms);
    CHECK(RetryPolicy::parse_retry_after("1.5", now) == 1500ms);
    CHECK(RetryPolicy::parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now) == 10000ms);
    CHECK(RetryPolicy::parse_retry_after("Sunday, 06-Nov-94 08:49:57 GMT", now) == 20000ms);
    CHECK(RetryPolicy::parse_retry_after("Sun Nov  6 08:50:37 1994", now) == 60000ms);
    CHECK(RetryPolicy::parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now) == 0ms);
    CHECK_FALSE(RetryPolicy::parse_retry_after("", now).has_value());
    CHECK_FALSE(RetryPolicy::parse_retry_after("-5", now).has_value());
    CHECK_FALSE(RetryPolicy::parse_retry_after("soon", now).has_value());
}

TEST_CASE("Gemini retryDelay durations parse", "[retry]") {
    CHECK(RetryPolicy::parse_duration("37s") == 37000ms);
    CHECK(RetryPolicy::parse_duration("1.25s") == 1250ms);
    CHECK(RetryPolicy::parse_duration("0s") == 0ms);
    CHECK_FALSE(RetryPolicy::parse_duration("37").has_value());
    CHECK_FALSE(RetryPolicy::parse_duration("s").has_value());
    CHECK_FALSE(RetryPolicy::parse_duration("3ms").has_value());
}

TEST_CASE("sleep returns early and reports cancellation", "[retry]") {
    std::stop_source source;
    std::thread stopper([&] {
        std::this_thread::sleep_for(20ms);
        source.request_stop();
    });
    const auto started = std::chrono::steady_clock::now();
    CHECK_FALSE(RetryPolicy::sleep(10s, source.get_token()));
    stopper.join();
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    CHECK(RetryPolicy::sleep(1ms, std::stop_token{}));
    CHECK_FALSE(RetryPolicy::sleep(0ms, source.get_token()));
}

TEST_CASE("random_unit stays within [0, 1)", "[retry]") {
    for (int i = 0; i < 1000; ++i) {
        const double value = RetryPolicy::random_unit();
        CHECK(value >= 0.0);
        CHECK(value < 1.0);
    }
}

TEST_CASE("a Retry-After date far in the future is longer than any delay, not overflowed",
          "[retry]") {
    const auto now = std::chrono::system_clock::from_time_t(1764547200);  // 2025-12-01Z
    for (const auto* date : {"Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 2300 00:00:00 GMT",
                             "Sat, 01 Jan 2262 00:00:00 GMT"}) {
        INFO(date);
        const auto hint = RetryPolicy::parse_retry_after(date, now);
        REQUIRE(hint.has_value());
        CHECK(*hint >= std::chrono::hours(24 * 365));
        // Longer than max_server_delay: not retried, instead of retried at once.
        CHECK_FALSE(RetryPolicy{}.delay_before(1, hint, 0.5).has_value());
    }
    CHECK(RetryPolicy::parse_retry_after("Tue, 01 Dec 2026 00:00:00 GMT", now) ==
          std::chrono::milliseconds(std::chrono::hours(24 * 365)));
}

}  // namespace retry_policy_test
