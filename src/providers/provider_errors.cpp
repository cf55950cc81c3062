#include <ullm/providers/provider_errors.hpp>

#include <ullm/detail/json_checks.hpp>
#include <ullm/http/retry_policy.hpp>

#include "../core/text.hpp"
#include "json_readers.hpp"

#include <algorithm>
#include <cctype>
#include <initializer_list>

namespace ullm {

namespace {

bool mentions(const std::string& haystack, std::initializer_list<std::string_view> needles) {
    return std::any_of(needles.begin(), needles.end(), [&](std::string_view needle) {
        return haystack.find(needle) != std::string::npos;
    });
}

bool is_context_overflow(const ProviderFailure& failure) {
    const std::string code = detail::lower_ascii(failure.code);
    if (code == "context_length_exceeded" || code == "string_above_max_length") return true;
    if (failure.status != 400 && failure.status != 413 && failure.status != 422) return false;
    const std::string text = detail::lower_ascii(failure.message);
    return mentions(text,
                    {"context length", "context window", "maximum context", "prompt is too long",
                     "input is too long", "too many tokens", "exceeds the maximum number of tokens",
                     "input token count", "reduce the length"});
}

// Replaces a credential-looking token that starts at `pos` with [redacted].
void redact_token(std::string& text, std::string_view prefix) {
    for (auto pos = text.find(prefix); pos != std::string::npos; pos = text.find(prefix, pos)) {
        auto end = pos + prefix.size();
        while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) != 0 ||
                                     text[end] == '-' || text[end] == '_')) {
            ++end;
        }
        if (end - pos < prefix.size() + 8) {
            pos = end;
            continue;
        }
        text.replace(pos, end - pos, "[redacted]");
        pos += 10;
    }
}

}  // namespace

std::string sanitise_provider_message(std::string_view message, std::size_t limit) {
    std::string out;
    out.reserve(std::min(message.size(), limit + 3));
    bool space = false;
    for (const char c : message) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f || c == ' ') {
            space = !out.empty();
            continue;
        }
        if (space) out.push_back(' ');
        space = false;
        out.push_back(c);
        if (out.size() >= limit) {
            // Do not cut a UTF-8 sequence in half.
            while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) {
                out.pop_back();
            }
            if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
            out += "…";
            break;
        }
    }
    for (const std::string_view prefix : {"sk-", "AIza", "sk_"}) redact_token(out, prefix);
    return out;
}

std::optional<std::chrono::milliseconds> retry_hint(const HttpResponseHead& head) {
    if (const auto ms = head.header("retry-after-ms")) {
        if (const auto parsed = RetryPolicy::parse_retry_after(*ms)) {
            // Parsed as seconds: the number was milliseconds.
            return std::chrono::milliseconds(parsed->count() / 1000);
        }
    }
    if (const auto value = head.header("retry-after"))
        return RetryPolicy::parse_retry_after(*value);
    return std::nullopt;
}

void throw_invalid_response(const std::string& message, const ErrorOrigin& origin) {
    throw ProviderError(ErrorCode::invalid_provider_response, message, 502, false, origin);
}

void throw_cancelled_response(std::string_view id, const ErrorOrigin& origin) {
    throw ProviderError(ErrorCode::response_cancelled,
                        "the background response " +
                            (id.empty() ? std::string() : std::string(id) + " ") +
                            "was cancelled before it finished",
                        409, false, origin);
}

json parse_provider_json(std::string_view body, const ErrorOrigin& origin, std::string_view what) {
    json value = detail::parse_json_exact(body);
    if (value.is_discarded()) detail::throw_not_json(body, origin, what);
    return value;
}

void detail::throw_not_json(std::string_view body, const ErrorOrigin& origin,
                            std::string_view what) {
    std::string prefix = sanitise_provider_message(body.substr(0, 120), 120);
    throw_invalid_response(
        std::string(what) + " is not valid JSON" +
            (prefix.empty() ? std::string(" (empty)") : ": starts with \"" + prefix + "\""),
        origin);
}

void throw_provider_failure(const ProviderFailure& failure, const ErrorOrigin& origin) {
    std::string message = sanitise_provider_message(failure.message);
    if (message.empty()) message = "HTTP " + std::to_string(failure.status);
    if (!failure.type.empty() || !failure.code.empty()) {
        message += " (" + failure.type +
                   (failure.type.empty() || failure.code.empty() ? "" : ", ") + failure.code + ")";
    }
    const std::string type = detail::lower_ascii(failure.type);
    const int status = failure.status;
    if (status == 401 || status == 403) throw AuthenticationError(message, status, origin);
    if (status == 429 || type == "rate_limit_error" || type == "resource_exhausted") {
        throw RateLimitError(message, origin, failure.retry_after);
    }
    if (is_context_overflow(failure)) throw ContextLimitError(message, origin);
    if (status == 529 || type == "overloaded_error") {
        throw ProviderError(ErrorCode::provider_overloaded, message, 529, true, origin,
                            failure.retry_after);
    }
    if (status == 408 || status >= 500) {
        throw ProviderError(ErrorCode::provider_error, message, status, true, origin,
                            failure.retry_after);
    }
    throw ProviderError(ErrorCode::invalid_request, message, status, false, origin);
}

}  // namespace ullm
