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

/// A rough token count of a message: about 4 characters per token of its JSON form, at least 1.
[[nodiscard]] std::int64_t estimate_tokens(const Message& message);

/// Whether a message is pinned: its metadata has `"pinned": true`. Context managers never drop
/// pinned messages.
[[nodiscard]] bool is_pinned(const Message& message);

/// Checks a context manager's output before it is used: every message is a valid canonical
/// message (by its JSON round trip), no message has the system role, every tool message
/// answers tool calls of the assistant message right before it (by id, each call answered),
/// and the output is not empty when `input_size > 0`. Throws `ProviderCapabilityError`
/// `invalid_context_manager_output` (status 400) naming the index and the rule. Thread-safe.
void validate_context(const std::vector<Message>& output, std::size_t input_size);

/// Options of `SlidingWindowStrategy`; at least one limit must be set.
struct SlidingWindowOptions {
    std::optional<std::size_t> max_messages;  ///< At most this many messages are sent (≥ 1).
    std::optional<std::int64_t> max_tokens;   ///< At most about this many tokens (≥ 1).
};

/// Keeps the most recent messages inside a window of messages and/or tokens. Never drops a
/// pinned message or the latest user message, and never separates a tool call from its result
/// (a tool call and its results are kept or dropped together), so the window may exceed a
/// limit when those rules require it. Stateless; thread-safe.
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
    std::size_t keep_last_messages = 4;  ///< Sent verbatim after the summary (< max_messages).
    Summariser summarizer;               ///< Must be set.
};

/// Once the messages exceed `max_messages`, replaces all but the last `keep_last_messages`
/// (moved earlier as needed so that no tool result is separated from its call, and pinned
/// messages kept) with one user message holding the summary, marked in its metadata with
/// `{"summary": true, "summarised_messages": N}`. The summary of a prefix is remembered, so a
/// later trim of the same conversation only summarises the earlier summary plus the messages
/// added since. Thread-safe; the summariser is called without a lock held. Exceptions the
/// summariser throws propagate unchanged.
class SummarisationStrategy : public ContextManager {
public:
    /// Throws `ProviderCapabilityError` `invalid_context_window` for invalid options.
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
