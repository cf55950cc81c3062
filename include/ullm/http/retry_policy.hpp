#pragma once

/// When and how long to wait before retrying a failed request.

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string_view>

namespace ullm {

/// Retry settings and the arithmetic of backoff. A value type; every member function is const
/// and thread-safe.
struct RetryPolicy {
    /// Attempts in all, the first included; 1 disables retries.
    int max_attempts = 3;
    /// Backoff before the first retry; each later retry multiplies it by `multiplier`.
    std::chrono::milliseconds initial_backoff{500};
    double multiplier = 2.0;
    /// Upper bound of any computed backoff.
    std::chrono::milliseconds max_backoff{std::chrono::seconds(30)};
    /// Fraction of random jitter: a backoff `b` becomes a value in `[b·(1−jitter), b]`.
    double jitter = 0.25;
    /// Upper bound of a server-requested delay (`Retry-After`, Gemini `retryDelay`); a server
    /// asking for longer than this is not retried.
    std::chrono::milliseconds max_server_delay{std::chrono::seconds(60)};

    /// Whether a request that failed with HTTP `status` should be retried: 408, 429 and
    /// 500–599 (529 included); never 400, 401, 403 or any other 4xx.
    [[nodiscard]] static bool retryable_status(int status) noexcept;

    /// The exponential backoff before retry number `retry` (1 = first retry), with jitter
    /// drawn from `random` (a uniform value in [0, 1)).
    [[nodiscard]] std::chrono::milliseconds backoff(int retry, double random) const noexcept;

    /// The delay before retry number `retry`: the server's hint when it gave one (and it is
    /// within `max_server_delay`), else `backoff`. nullopt when no retry should happen
    /// (attempts exhausted, or the server asks for longer than `max_server_delay`).
    [[nodiscard]] std::optional<std::chrono::milliseconds> delay_before(
        int retry, std::optional<std::chrono::milliseconds> server_hint, double random) const;

    /// Parses a `Retry-After` value: delay-seconds (`"120"`, also fractional `"1.5"`) or an
    /// HTTP-date, relative to `now`. A date in the past means zero. nullopt when unparseable.
    [[nodiscard]] static std::optional<std::chrono::milliseconds> parse_retry_after(
        std::string_view value,
        std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

    /// Parses a protobuf Duration string as Gemini sends in `RetryInfo.retryDelay` (`"37s"`,
    /// `"1.5s"`). nullopt when unparseable.
    [[nodiscard]] static std::optional<std::chrono::milliseconds> parse_duration(
        std::string_view value);

    /// Sleeps for `delay` unless `stop` is requested first. Returns false when cancelled.
    static bool sleep(std::chrono::milliseconds delay, const std::stop_token& stop);

    /// A uniform random number in [0, 1) from a thread-local generator, for `backoff`.
    [[nodiscard]] static double random_unit() noexcept;
};

}  // namespace ullm
