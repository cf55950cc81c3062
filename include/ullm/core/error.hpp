#pragma once

/// The ullm error hierarchy. Every exception ullm throws derives from `ullm::Error`, carries a
/// stable code (`error_code()`, one of the closed set `ErrorCode`; `code()` is its text), an
/// HTTP-like `status()` and `retryable()`, and its `what()` starts with `[ullm.<code>]`. Every
/// code is listed in docs/errors.md.

#include <ullm/core/error_code.hpp>
#include <ullm/core/usage.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace ullm {

/// Where an error came from, when it came from a provider.
struct ErrorOrigin {
    std::string provider;    ///< e.g. "openai", "anthropic"; empty when not a provider error.
    std::string model;       ///< The exact model requested, when known.
    std::string request_id;  ///< The provider's request id, when it sent one.
};

class Error;

namespace detail {

/// `text` with every byte that starts no well-formed UTF-8 sequence replaced by U+FFFD, so
/// that an error message quoting a server's bytes can be logged as JSON.
[[nodiscard]] std::string valid_utf8(std::string text);

/// Internal: rewrites the message of an error that has not been shared yet (the client
/// redacts a request's secrets from what a provider's bytes put into an error, then rethrows
/// it with its type intact).
struct ErrorEditor {
    static void set_message(Error& error, const std::string& message);
};

}  // namespace detail

/// Root of every exception ullm throws. Immutable once thrown to the caller; safe to share.
/// `what()` and `message()` are always valid UTF-8 (invalid bytes become U+FFFD).
class Error : public std::runtime_error {
public:
    /// Builds an error with a stable code, a human message (no secrets), an HTTP-like status
    /// and whether retrying the same operation may succeed.
    Error(ErrorCode code, const std::string& message, int status = 500, bool retryable = false,
          ErrorOrigin origin = {})
        : std::runtime_error(std::string()),
          code_(code),
          status_(status),
          retryable_(retryable),
          origin_(std::move(origin)) {
        detail::note_reported(code);
        set_message(message);
    }

    /// The stable identifier of this kind of failure, e.g. `ErrorCode::conversation_busy`.
    [[nodiscard]] ErrorCode error_code() const noexcept { return code_; }
    /// The code's text, e.g. `conversation_busy` (`to_string(error_code())`).
    [[nodiscard]] const std::string& code() const noexcept {
        return detail::error_code_text(code_);
    }
    /// The message without the `[ullm.<code>]` prefix.
    [[nodiscard]] const std::string& message() const noexcept { return message_; }
    /// An HTTP-like status: 400 for bad input, 409 for conflicts, 5xx for provider faults.
    [[nodiscard]] int status() const noexcept { return status_; }
    /// Whether the same operation may succeed if tried again.
    [[nodiscard]] bool retryable() const noexcept { return retryable_; }
    /// The provider, model and request id this error came from, where known.
    [[nodiscard]] const ErrorOrigin& origin() const noexcept { return origin_; }
    [[nodiscard]] const std::string& provider() const noexcept { return origin_.provider; }
    [[nodiscard]] const std::string& model() const noexcept { return origin_.model; }
    [[nodiscard]] const std::string& request_id() const noexcept { return origin_.request_id; }

private:
    friend struct detail::ErrorEditor;

    void set_message(const std::string& message) {
        message_ = detail::valid_utf8(message);
        static_cast<std::runtime_error&>(*this) =
            std::runtime_error("[ullm." + code() + "] " + message_);
    }

    ErrorCode code_;
    std::string message_;
    int status_;
    bool retryable_;
    ErrorOrigin origin_;
};

inline void detail::ErrorEditor::set_message(Error& error, const std::string& message) {
    error.set_message(message);
}

/// A canonical message, part or usage record failed to parse. `path()` is the JSON pointer of
/// the offending value and `constraint()` the rule it broke. Code `invalid_message`, status 400.
class InvalidMessageError : public Error {
public:
    InvalidMessageError(std::string path, std::string constraint)
        : Error(ErrorCode::invalid_message,
                "at " + (path.empty() ? std::string("/") : path) + ": " + constraint, 400),
          path_(std::move(path)),
          constraint_(std::move(constraint)) {}
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const std::string& constraint() const noexcept { return constraint_; }

private:
    std::string path_;
    std::string constraint_;
};

/// A tool definition broke a rule of define_tool (name, description, schema, duplicates).
/// Codes: `invalid_tool_name`, `invalid_tool_description`, `invalid_tool_schema`,
/// `unsupported_schema_keyword`, `duplicate_tool_name`. Status 400, not retryable.
class ToolDefinitionError : public Error {
public:
    ToolDefinitionError(ErrorCode code, const std::string& message) : Error(code, message, 400) {}
};

/// Model-provided tool arguments failed strict validation. `path()` is the JSON pointer of the
/// failing argument. Code `invalid_tool_arguments`, status 400. The message is written for
/// the model: it becomes the tool's error result.
class ToolArgumentError : public Error {
public:
    ToolArgumentError(std::string path, const std::string& reason)
        : Error(ErrorCode::invalid_tool_arguments,
                "argument " + (path.empty() ? std::string("(root)") : path) + " " + reason, 400),
          path_(std::move(path)),
          reason_(reason) {}
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const std::string& reason() const noexcept { return reason_; }

private:
    std::string path_;
    std::string reason_;
};

/// Thrown by a tool callback to answer the model with exactly `message` as the tool's error
/// result (a registry adds no prefix). Status 400, not retryable.
class ToolResultError : public Error {
public:
    /// The error's code and the outcome's are `code` (default `tool_error`).
    explicit ToolResultError(const std::string& message, ErrorCode code = ErrorCode::tool_error)
        : Error(code, message, 400, false), outcome_code_(to_string(code)) {}
    /// With a code of the tool's own for the outcome (`ToolOutcome::error_code`, e.g.
    /// `not_found`); the error's own code is `tool_error`. An empty one means `tool_error`.
    ToolResultError(const std::string& message, std::string outcome_code)
        : Error(ErrorCode::tool_error, message, 400, false),
          outcome_code_(outcome_code.empty() ? std::string(to_string(ErrorCode::tool_error))
                                             : std::move(outcome_code)) {}
    /// The code the tool's outcome carries.
    [[nodiscard]] const std::string& outcome_code() const noexcept { return outcome_code_; }

private:
    std::string outcome_code_;
};

/// The transport could not complete a request: `connection_failed` (could not connect, reset,
/// disconnected mid-body; retryable), `timeout` (connect or idle timeout; retryable),
/// `tls_error` (certificate or handshake failure; not retryable).
class TransportError : public Error {
public:
    TransportError(ErrorCode code, const std::string& message, bool retryable)
        : Error(code, message, 503, retryable) {}
};

/// The operation was cancelled through its stop token or `cancel()`. Code `cancelled`,
/// status 499, not retryable.
class CancelledError : public Error {
public:
    explicit CancelledError(const std::string& message = "the operation was cancelled")
        : Error(ErrorCode::cancelled, message, 499, false) {}
};

/// A stream ended before its terminal event, or with a partial event. Code `stream_truncated`,
/// status 502, retryable.
class StreamTruncatedError : public Error {
public:
    explicit StreamTruncatedError(const std::string& message, ErrorOrigin origin = {})
        : Error(ErrorCode::stream_truncated, message, 502, true, std::move(origin)) {}
};

/// The provider rejected the credentials (401/403). Code `authentication_failed`, never retried.
class AuthenticationError : public Error {
public:
    AuthenticationError(const std::string& message, int status, ErrorOrigin origin = {})
        : Error(ErrorCode::authentication_failed, message, status, false, std::move(origin)) {}
};

/// The provider rate-limited the request (429). Code `rate_limited`, retryable; `retry_after()`
/// is the delay the provider asked for, when it gave one.
class RateLimitError : public Error {
public:
    RateLimitError(const std::string& message, ErrorOrigin origin = {},
                   std::optional<std::chrono::milliseconds> retry_after = std::nullopt)
        : Error(ErrorCode::rate_limited, message, 429, true, std::move(origin)),
          retry_after_(retry_after) {}
    [[nodiscard]] std::optional<std::chrono::milliseconds> retry_after() const noexcept {
        return retry_after_;
    }

private:
    std::optional<std::chrono::milliseconds> retry_after_;
};

/// The request does not fit the model's context window. Code `context_length_exceeded`,
/// status 400, not retryable.
class ContextLimitError : public Error {
public:
    explicit ContextLimitError(const std::string& message, ErrorOrigin origin = {})
        : Error(ErrorCode::context_length_exceeded, message, 400, false, std::move(origin)) {}
};

/// The provider failed: 5xx (`provider_error`), 529 (`provider_overloaded`), a body that is not
/// what the API documents (`invalid_provider_response`, status 502), or a request the provider
/// refused as invalid (`invalid_request`, status 400).
/// `retry_after()` is the delay the provider asked for (`Retry-After` on a 503), when it gave one.
class ProviderError : public Error {
public:
    ProviderError(ErrorCode code, const std::string& message, int status, bool retryable,
                  ErrorOrigin origin = {},
                  std::optional<std::chrono::milliseconds> retry_after = std::nullopt)
        : Error(code, message, status, retryable, std::move(origin)), retry_after_(retry_after) {}
    [[nodiscard]] std::optional<std::chrono::milliseconds> retry_after() const noexcept {
        return retry_after_;
    }

private:
    std::optional<std::chrono::milliseconds> retry_after_;
};

/// Something the provider, model or library cannot do: an option the provider does not support
/// (`unsupported_option`), a model no provider serves (`unknown_model_route`) or whose provider
/// has no credentials (`provider_not_configured`), a model without a price where one is needed
/// (`unknown_model_pricing`). Status 400, not retryable.
class ProviderCapabilityError : public Error {
public:
    ProviderCapabilityError(ErrorCode code, const std::string& message)
        : Error(code, message, 400, false) {}
};

/// An option, or a value the caller handed in, is invalid: the code names it (e.g.
/// `invalid_max_tool_rounds`, `invalid_tenant`, `invalid_cursor`). Nothing was sent or
/// changed. Status 400, not retryable.
class InvalidOptionError : public Error {
public:
    InvalidOptionError(ErrorCode code, const std::string& message)
        : Error(code, message, 400, false) {}
};

/// A request found its provider's queue full (`ProviderLimits::max_queued`): too many requests
/// were already waiting for the provider's limits. Nothing was sent. Code `queue_full`, status
/// 503, not retried by the client (the caller decides whether to try again later).
class QueueFullError : public Error {
public:
    QueueFullError(const std::string& message, ErrorOrigin origin = {})
        : Error(ErrorCode::queue_full, message, 503, false, std::move(origin)) {}
};

/// A request waited in its provider's queue longer than `ProviderLimits::max_queue_wait`
/// allows. Nothing was sent. Code `queue_timeout`, status 503, not retried by the client.
class QueueTimeoutError : public Error {
public:
    QueueTimeoutError(const std::string& message, ErrorOrigin origin = {})
        : Error(ErrorCode::queue_timeout, message, 503, false, std::move(origin)) {}
};

/// A conversation turn asked for more tool rounds than `max_tool_rounds` allows. Code
/// `max_tool_rounds_exceeded`, status 422, not retryable. `max_rounds()` is the limit.
class MaxToolRoundsError : public Error {
public:
    explicit MaxToolRoundsError(int max_rounds)
        : Error(ErrorCode::max_tool_rounds_exceeded,
                "the model asked for another tool round after " + std::to_string(max_rounds) +
                    " round(s); raise max_tool_rounds or change the prompt",
                422, false),
          max_rounds_(max_rounds) {}
    [[nodiscard]] int max_rounds() const noexcept { return max_rounds_; }

private:
    int max_rounds_;
};

/// The next model request would exceed the spend cap of the conversation or of the turn.
/// Code `budget_exceeded`, status 402, not retryable. `remaining_usd()` is what the cap still
/// allowed and `estimated_usd()` what the request could cost.
class BudgetExceededError : public Error {
public:
    BudgetExceededError(const std::string& message, double remaining_usd, double estimated_usd)
        : Error(ErrorCode::budget_exceeded, message, 402, false),
          remaining_usd_(remaining_usd),
          estimated_usd_(estimated_usd) {}
    [[nodiscard]] double remaining_usd() const noexcept { return remaining_usd_; }
    [[nodiscard]] double estimated_usd() const noexcept { return estimated_usd_; }

private:
    double remaining_usd_;
    double estimated_usd_;
};

/// A conversation snapshot is malformed; nothing was restored. `path()` is the JSON pointer of
/// the failing value and `constraint()` the rule it broke. Code `invalid_conversation_snapshot`,
/// status 422, not retryable.
class InvalidConversationSnapshotError : public Error {
public:
    InvalidConversationSnapshotError(std::string path, std::string constraint)
        : Error(ErrorCode::invalid_conversation_snapshot,
                "at " + (path.empty() ? std::string("/") : path) + ": " + constraint, 422),
          path_(std::move(path)),
          constraint_(std::move(constraint)) {}
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const std::string& constraint() const noexcept { return constraint_; }

private:
    std::string path_;
    std::string constraint_;
};

/// A turn, stream or `clear()` was started while a tool callback of the same conversation is
/// running (or, for `clear()`, while a turn is in progress). Code `conversation_busy`,
/// status 409, not retryable.
class ConversationBusyError : public Error {
public:
    explicit ConversationBusyError(const std::string& message)
        : Error(ErrorCode::conversation_busy, message, 409, false) {}
};

/// A session store write found a different version than the writer expected: another writer
/// got there first. Code `session_store_conflict`, status 409, retryable (reload and retry).
class SessionStoreConflictError : public Error {
public:
    SessionStoreConflictError(const std::string& message, std::uint64_t expected_version,
                              std::uint64_t actual_version)
        : Error(ErrorCode::session_store_conflict, message, 409, true),
          expected_version_(expected_version),
          actual_version_(actual_version) {}
    /// The version the writer expected (0: the session must not exist yet).
    [[nodiscard]] std::uint64_t expected_version() const noexcept { return expected_version_; }
    /// The version found (0: the session does not exist).
    [[nodiscard]] std::uint64_t actual_version() const noexcept { return actual_version_; }

private:
    std::uint64_t expected_version_;
    std::uint64_t actual_version_;
};

/// A session store could not read or write its storage (I/O error, full disk, a database it
/// cannot open, a record that is not what it wrote). Code `session_store_failed`, status 500,
/// retryable when the cause may be transient (`database is locked`, `EINTR`).
class SessionStoreError : public Error {
public:
    SessionStoreError(const std::string& message, bool retryable = false)
        : Error(ErrorCode::session_store_failed, message, 500, retryable) {}
};

/// A usage record was written under an id that the ledger keeps with other fields (a retry
/// with equal fields is not an error). Code `usage_record_conflict`, status 409, not
/// retryable. Listed in docs/errors.md.
class UsageRecordConflictError : public Error {
public:
    explicit UsageRecordConflictError(const std::string& message)
        : Error(ErrorCode::usage_record_conflict, message, 409, false) {}
};

/// A usage ledger could not read or write its storage (a database that cannot be opened or
/// reached, went away, timed out or has a newer schema). Code `usage_ledger_failed`, status
/// 500, retryable when the failure may pass. Listed in docs/errors.md.
class UsageLedgerError : public Error {
public:
    UsageLedgerError(const std::string& message, bool retryable = false)
        : Error(ErrorCode::usage_ledger_failed, message, 500, retryable) {}
};

/// A dialog rule was broken: a reserved tool name (`reserved_tool_name`), a malformed or
/// unresolvable link (`invalid_link`, `unknown_cell`), a cell of the wrong kind
/// (`not_a_data_cell`, `not_a_handler_cell`, `not_a_pattern_cell`), a bad cell id, value, schema
/// or pattern result (`invalid_cell_id`, `invalid_cell_value`, `invalid_cell_schema`,
/// `invalid_pattern_result`), or a forbidden write (`pattern_write_denied`,
/// `handler_write_denied`). Status 400, not retryable. Inside a dialog turn these become tool
/// error results with the message shown to the model. Listed in docs/errors.md.
class DialogError : public Error {
public:
    DialogError(ErrorCode code, const std::string& message) : Error(code, message, 400, false) {}
};

/// `generate_object` ended without the model calling `presentResult`. Code
/// `missing_structured_result`, status 422, retryable (another attempt may call it).
class MissingStructuredResultError : public Error {
public:
    explicit MissingStructuredResultError(const std::string& message)
        : Error(ErrorCode::missing_structured_result, message, 422, true) {}
};

/// A structured-output reply could not be taken: it is not JSON (`structured_output_not_json`),
/// breaks the schema or does not decode into the requested type (`structured_output_invalid`),
/// was cut off by the output limit (`structured_output_truncated`), or was asked for although
/// the model refused (`structured_output_refused`). `raw_text()` is the model's reply,
/// `path()` the JSON pointer of the first problem (empty when it concerns the whole reply),
/// `usage()` what every round of the call used, repairs included. Status 422; retryable except
/// for a refusal.
class StructuredOutputError : public Error {
public:
    StructuredOutputError(ErrorCode code, const std::string& message, std::string raw_text,
                          std::string path, Usage usage, ErrorOrigin origin = {})
        : Error(code, message, 422, code != ErrorCode::structured_output_refused,
                std::move(origin)),
          raw_text_(std::move(raw_text)),
          path_(std::move(path)),
          usage_(usage) {}
    [[nodiscard]] const std::string& raw_text() const noexcept { return raw_text_; }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }
    [[nodiscard]] const Usage& usage() const noexcept { return usage_; }

private:
    std::string raw_text_;
    std::string path_;
    Usage usage_;
};

}  // namespace ullm
