#pragma once

/// Context managers decide which messages are sent to the model when a conversation grows:
/// the `ContextManager` interface, `SlidingWindowStrategy`, `SummarisationStrategy`, and the
/// validation every manager's output goes through.

#include <ullm/core/message.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ullm {

/// Decides what part of a conversation is sent. A conversation calls it before every model
/// round with an isolated copy of the messages it would send (history plus the current turn,
/// without the system prompt); whatever the manager does to its copies is discarded. The
/// output of `trim` is validated with `validate_context` and copied before use, and never
/// changes the stored transcript. Exceptions a manager throws propagate unchanged.
/// Implementations must be thread-safe when shared between conversations.
class ContextManager {
public:
    virtual ~ContextManager() = default;

    /// Whether `messages` should be trimmed before they are sent.
    [[nodiscard]] virtual bool should_trim(std::vector<Message> messages) = 0;

    /// The messages to send instead of `messages`.
    [[nodiscard]] virtual std::vector<Message> trim(std::vector<Message> messages) = 0;
};

/// A rough token count of a message: about 4 characters per token of its canonical JSON form
/// (without the replay sidecar, which is opaque provider state; inline image and document
/// data count by their size), at least 1. Thread-safe.
[[nodiscard]] std::int64_t estimate_tokens(const Message& message);

/// Whether a message is pinned: its metadata has `"pinned": true`. Context managers never drop
/// pinned messages.
[[nodiscard]] bool is_pinned(const Message& message);

/// Checks a context manager's output before it is used: the output is not empty when
/// `input_size > 0`; no message has the system role; every message is a valid canonical
/// message (by its JSON round trip: finite numbers, valid UTF-8, at most 256 levels deep,
/// parts its role may hold); every tool message directly follows an assistant message with
/// tool calls and answers only those calls, each once; the call ids of one message are
/// distinct; and every tool call is answered by the next message, unless its message is the
/// last one (its results are still to come). Throws `ProviderCapabilityError`
/// `invalid_context_manager_output` (status 400) naming the message index and the rule.
/// Thread-safe.
void validate_context(const std::vector<Message>& output, std::size_t input_size);

/// Options of `SlidingWindowStrategy`; at least one limit must be set.
struct SlidingWindowOptions {
    std::optional<std::size_t> max_messages;  ///< At most this many messages are sent (≥ 1).
    std::optional<std::int64_t> max_tokens;   ///< At most about this many tokens (≥ 1).
};

/// Keeps the most recent messages inside a window of messages and/or tokens (by
/// `estimate_tokens`). An assistant message with tool calls and the tool messages after it are
/// kept or dropped together. Always kept, even when they alone exceed the limits: pinned
/// messages (in their original order) and the turn being answered (the latest user message and
/// every message after it, such as the tool rounds of that turn). The remaining room is filled
/// with the most recent units, newest first, stopping at the first that does not fit. Without
/// a user message or pinned message the newest unit is always kept, so the output is never
/// empty. The output may begin with an assistant message, never with a tool message (for valid
/// input). Stateless; thread-safe.
class SlidingWindowStrategy : public ContextManager {
public:
    /// Throws `ProviderCapabilityError` `invalid_context_window` when no limit is set or a limit
    /// is 0.
    explicit SlidingWindowStrategy(SlidingWindowOptions options);
    [[nodiscard]] bool should_trim(std::vector<Message> messages) override;
    [[nodiscard]] std::vector<Message> trim(std::vector<Message> messages) override;

private:
    SlidingWindowOptions options_;
};

/// Turns older messages into a summary text. Receives the messages to summarise (which may
/// begin with an earlier summary message) and returns the summary.
using Summariser = std::function<std::string(const std::vector<Message>& messages)>;

/// Options of `SummarisationStrategy`.
struct SummarisationOptions {
    std::size_t max_messages = 20;       ///< Summarise once more than this many messages (≥ 2).
    std::size_t keep_last_messages = 4;  ///< Sent verbatim after the summary (1..max_messages-1).
    Summariser summarizer;               ///< Must be set.
};

/// Once the messages exceed `max_messages`, sends
/// `[summary] + pinned messages of the summarised part + tail`. The tail is the last
/// `keep_last_messages`, moved earlier so that it does not begin with a tool message and
/// includes the latest user message (the turn being answered). Before the tail, pinned
/// messages (with their tool call or result partner) stay verbatim and are not given to the
/// summariser; everything else is summarised into one user message
/// `"Summary of the earlier conversation:\n<text>"` with metadata
/// `{"summary": true, "summarised_messages": N}` (N original messages).
///
/// The last summary and the exact messages it covers are remembered: when the messages to
/// summarise begin with them, the summariser receives only the earlier summary message plus
/// the messages added since (and is not called when nothing was added); otherwise it
/// summarises from scratch. One summary is remembered per strategy, so a strategy shared
/// between conversations stays correct but summarises more. An empty or blank summary throws
/// `ProviderCapabilityError` `invalid_context_manager_output`. Thread-safe; the summariser is
/// called without a lock held. Exceptions the summariser throws propagate unchanged and leave
/// the remembered summary as it was.
class SummarisationStrategy : public ContextManager {
public:
    /// Throws `ProviderCapabilityError` `invalid_context_window` for invalid options (limits out
    /// of range, no summariser).
    explicit SummarisationStrategy(SummarisationOptions options);
    [[nodiscard]] bool should_trim(std::vector<Message> messages) override;
    [[nodiscard]] std::vector<Message> trim(std::vector<Message> messages) override;

private:
    SummarisationOptions options_;
    std::mutex mutex_;
    std::vector<Message> summarised_prefix_;  ///< The messages the cached summary covers.
    std::optional<Message> summary_;          ///< The cached summary message.
};

}  // namespace ullm
