#include <ullm/http/retry_policy.hpp>

#include "../core/text.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>

namespace ullm {

namespace {

// Parses "12", "1.5" as seconds; rejects anything else (signs, units, empty).
std::optional<double> parse_seconds(std::string_view text) {
    if (text.empty()) return std::nullopt;
    for (const char c : text) {
        if ((c < '0' || c > '9') && c != '.') return std::nullopt;
    }
    double seconds = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (result.ec != std::errc() || result.ptr != text.data() + text.size()) return std::nullopt;
    if (!std::isfinite(seconds)) return std::nullopt;
    return seconds;
}

// Beyond any sensible delay (a year); what a server asks past it is capped, avoiding overflow.
constexpr double max_delay_seconds = 365.0 * 24 * 3600;

std::chrono::milliseconds seconds_to_ms(double seconds) {
    return std::chrono::milliseconds(
        static_cast<std::int64_t>(std::ceil(std::min(seconds, max_delay_seconds) * 1000.0)));
}

}  // namespace

bool RetryPolicy::retryable_status(int status) noexcept {
    return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

std::chrono::milliseconds RetryPolicy::backoff(int retry, double random) const noexcept {
    const double base = static_cast<double>(initial_backoff.count()) *
                        std::pow(std::max(multiplier, 1.0), std::max(retry - 1, 0));
    const double capped = std::min(base, static_cast<double>(max_backoff.count()));
    const double spread = std::clamp(jitter, 0.0, 1.0) * std::clamp(random, 0.0, 1.0);
    return std::chrono::milliseconds(static_cast<std::int64_t>(capped * (1.0 - spread)));
}

std::optional<std::chrono::milliseconds> RetryPolicy::delay_before(
    int retry, std::optional<std::chrono::milliseconds> server_hint, double random) const {
    if (retry < 1 || retry >= max_attempts) return std::nullopt;
    if (server_hint) {
        if (*server_hint > max_server_delay) return std::nullopt;
        return std::max(*server_hint, std::chrono::milliseconds(0));
    }
    return backoff(retry, random);
}

std::optional<std::chrono::milliseconds> RetryPolicy::parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now) {
    value = detail::trim_space(value);
    if (const auto seconds = parse_seconds(value)) return seconds_to_ms(*seconds);
    if (value.empty() || value.size() > 64) return std::nullopt;
    // curl_getdate understands IMF-fixdate, RFC 850 and asctime dates, as RFC 9110 requires.
    const std::string text(value);
    const time_t when = curl_getdate(text.c_str(), nullptr);
    if (when == -1) return std::nullopt;
    // A date far in the future (year 2300, 9999) does not fit system_clock's nanoseconds:
    // compare in seconds first and cap the delay as the seconds form is capped.
    const auto now_seconds = std::chrono::floor<std::chrono::seconds>(now.time_since_epoch());
    const double ahead = static_cast<double>(when) - static_cast<double>(now_seconds.count());
    if (ahead > max_delay_seconds) return seconds_to_ms(max_delay_seconds);
    const auto target = std::chrono::system_clock::from_time_t(when);
    if (target <= now) return std::chrono::milliseconds(0);
    return std::chrono::ceil<std::chrono::milliseconds>(target - now);
}

std::optional<std::chrono::milliseconds> RetryPolicy::parse_duration(std::string_view value) {
    value = detail::trim_space(value);
    if (value.size() < 2 || value.back() != 's') return std::nullopt;
    const auto seconds = parse_seconds(value.substr(0, value.size() - 1));
    if (!seconds) return std::nullopt;
    return seconds_to_ms(*seconds);
}

bool RetryPolicy::sleep(std::chrono::milliseconds delay, const std::stop_token& stop) {
    if (stop.stop_requested()) return false;
    if (delay.count() <= 0) return true;
    std::mutex mutex;
    std::condition_variable_any woken;
    std::unique_lock lock(mutex);
    (void)woken.wait_for(lock, stop, delay, [] { return false; });
    return !stop.stop_requested();
}

double RetryPolicy::random_unit() noexcept {
    thread_local std::mt19937_64 engine{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

}  // namespace ullm
