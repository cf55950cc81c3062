#pragma once

/// The persisted form of a conversation (`ConversationSnapshot`), its running totals, and the
/// fail-closed codec between them and JSON.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// What a conversation has used so far, summed over every model round it paid for. A value
/// type.
struct ConversationTotals {
    std::int64_t input_tokens = 0;         ///< Prompt tokens, cached ones included.
    std::int64_t output_tokens = 0;        ///< Generated tokens, reasoning included.
    std::int64_t reasoning_tokens = 0;     ///< Hidden reasoning tokens (inside output).
    std::int64_t cached_read_tokens = 0;   ///< Prompt tokens read from the provider's cache.
    std::int64_t cached_write_tokens = 0;  ///< Prompt tokens written to the provider's cache.
    double cost_usd = 0;                   ///< Spend in USD (rounds without a price add 0).
    /// Model requests made: a round counts once its request is under way, so one cancelled
    /// or failed after it was sent counts too (its retries do not count again).
    std::int64_t rounds = 0;
    friend bool operator==(const ConversationTotals&, const ConversationTotals&) = default;

    /// Adds another set of totals, field by field (saturating).
    ConversationTotals& operator+=(const ConversationTotals& other) noexcept;

    /// Adds one model round's usage (its cost when known) and counts the round. Counts
    /// saturate instead of overflowing; negative counts and negative or non-finite costs add
    /// nothing.
    ConversationTotals& operator+=(const Usage& usage) noexcept;

    /// Adds the tokens and cost of `usage` as `+=` does, without counting a round (for a round
    /// already counted when its request went out).
    void add_tokens(const Usage& usage) noexcept;
};

/// `{"input_tokens": …, "output_tokens": …, …, "cost_usd": …, "rounds": …}`.
[[nodiscard]] json totals_to_json(const ConversationTotals& totals);

/// Everything a conversation persists. History and totals come from here on restore;
/// everything else a conversation does (system prompt, model, tools, budget, limits) comes from
/// the caller's current options, never from a snapshot.
struct ConversationSnapshot {
    /// The format version `snapshot_to_json` writes and `parse_snapshot` accepts.
    static constexpr int format_version = 1;

    std::string session_id;
    std::string tenant;
    std::vector<Message> messages;  ///< History without the system prompt, replay state kept.
    ConversationTotals totals;
    std::chrono::system_clock::time_point created_at;
    std::chrono::system_clock::time_point updated_at;
    friend bool operator==(const ConversationSnapshot&, const ConversationSnapshot&) = default;
};

/// Limits `parse_snapshot` enforces, so that a hostile or corrupt record cannot exhaust memory.
struct SnapshotLimits {
    std::size_t max_messages = 100'000;
    std::size_t max_bytes = 64u << 20;        ///< Of the JSON text, when parsing text.
    std::size_t max_replay_bytes = 4u << 20;  ///< Of one message's replay sidecar.
};

/// The snapshot as JSON: `{"format": "ullm.conversation", "version": 1, "session_id", "tenant",
/// "created_at", "updated_at" (RFC 3339, UTC, milliseconds: finer precision is dropped),
/// "totals", "messages"}` with each message's replay sidecar. Does not validate: what it
/// writes from a bad snapshot fails `parse_snapshot`. Thread-safe.
[[nodiscard]] json snapshot_to_json(const ConversationSnapshot& snapshot);

/// Parses a snapshot, failing closed: any malformed message, timestamp, total, unknown key,
/// non-finite number, over-deep nesting or exceeded limit throws
/// `InvalidConversationSnapshotError` with the JSON pointer and the rule it broke, and nothing
/// partial is returned. Thread-safe.
///
/// The rules: the root is an object with exactly the keys `snapshot_to_json` writes (a newer
/// `version` is reported as unsupported); no value nests deeper than 256 levels, no number is
/// non-finite, every string and key is valid UTF-8, and no key anywhere is `__proto__`,
/// `constructor` or `prototype`; `session_id` is 1..256 bytes and `tenant` 0..128, both
/// without control characters (C0, DEL, C1); timestamps are RFC 3339 `YYYY-MM-DDTHH:MM:SS`
/// with an optional fraction of 1..9 digits and `Z` or a `±HH:MM` offset (upper-case `T` and
/// `Z`, a real calendar date, no leap second, representable by `system_clock`), and
/// `created_at <= updated_at`; every total is present, the counts integers ≥ 0, the cost a
/// finite number ≥ 0, `reasoning_tokens <= output_tokens` and
/// `cached_read_tokens <= input_tokens`; at most `limits.max_messages` messages, each a valid
/// canonical message (its errors reported at `/messages/<i>/…`), none with the system role,
/// none with a replay sidecar over `limits.max_replay_bytes` (as compact JSON); tool messages
/// pair with tool calls as `validate_context` requires.
[[nodiscard]] ConversationSnapshot parse_snapshot(const json& value,
                                                  const SnapshotLimits& limits = {});

/// Parses snapshot JSON text (as a session store holds it), then as `parse_snapshot`. Text over
/// `limits.max_bytes` is refused before parsing; malformed JSON (trailing text, invalid UTF-8,
/// a number out of range) is an `InvalidConversationSnapshotError` at path "" naming the byte
/// offset; duplicate keys and nesting deeper than 256 levels are refused while parsing, at
/// their path. Thread-safe.
[[nodiscard]] ConversationSnapshot parse_snapshot_text(std::string_view text,
                                                       const SnapshotLimits& limits = {});

/// A time point as RFC 3339 UTC with milliseconds, e.g. "2026-11-29T22:58:25.123Z" (rounded
/// down to the millisecond). Thread-safe.
[[nodiscard]] std::string format_timestamp(std::chrono::system_clock::time_point time);

}  // namespace ullm
