#pragma once

/// Maps provider failures (HTTP status, error body, in-stream error event) to the ullm error
/// hierarchy, one way for every adapter.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/http/http_types.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// What an adapter read from a provider's error: the HTTP status (or the status the error
/// type implies, for in-stream errors), the provider's own type and code, and its message.
struct ProviderFailure {
    int status = 500;
    std::string type;  ///< e.g. "rate_limit_error", "RESOURCE_EXHAUSTED", "invalid_request_error".
    std::string code;  ///< e.g. "context_length_exceeded", "insufficient_quota".
    std::string message;  ///< The provider's message (sanitised before it is shown).
    /// The delay the provider asked for: `Retry-After`, else Gemini's `retryDelay`.
    std::optional<std::chrono::milliseconds> retry_after;
};

/// Throws the `Error` that `failure` maps to: 401/403 → `AuthenticationError`; 429 →
/// `RateLimitError`; a context-window overflow (by code or message) → `ContextLimitError`;
/// 529 or an overloaded type → `ProviderError` `provider_overloaded`; 408 and 5xx →
/// `ProviderError` `provider_error` (retryable); other 4xx → `ProviderError` `invalid_request`.
/// `retry_after` travels with the retryable errors (`RateLimitError`, `ProviderError`).
/// The message is sanitised: control characters removed, at most 1,000 characters.
[[noreturn]] void throw_provider_failure(const ProviderFailure& failure, const ErrorOrigin& origin);

/// A provider message made safe to show: control characters replaced by spaces, whitespace
/// runs collapsed, cut to `limit` characters, credential-looking tokens (`sk-…`, `AIza…`)
/// redacted.
[[nodiscard]] std::string sanitise_provider_message(std::string_view message,
                                                    std::size_t limit = 1000);

/// Parses a response body as JSON. Throws `ProviderError` `invalid_provider_response` (502)
/// naming what was wrong, never echoing more than a short prefix of the body.
[[nodiscard]] json parse_provider_json(std::string_view body, const ErrorOrigin& origin,
                                       std::string_view what = "response body");

/// The delay a response's headers ask for before a retry: `retry-after-ms` (OpenAI and
/// Anthropic), else `Retry-After` in seconds or as an HTTP date; nullopt when neither parses.
[[nodiscard]] std::optional<std::chrono::milliseconds> retry_hint(const HttpResponseHead& head);

/// Throws `ProviderError` `invalid_provider_response` with `message`.
[[noreturn]] void throw_invalid_response(const std::string& message, const ErrorOrigin& origin);

/// Throws `ProviderError` `response_cancelled` (409): background response `id` (may be empty)
/// was cancelled before it finished.
[[noreturn]] void throw_cancelled_response(std::string_view id, const ErrorOrigin& origin);

}  // namespace ullm
