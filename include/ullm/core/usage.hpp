#pragma once

/// Token usage and cost, with one meaning for every provider: `input_tokens` includes cached
/// tokens; cache reads and cache writes are counted separately; `reasoning_tokens` are part of
/// `output_tokens`.

#include <ullm/core/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ullm {

/// Tokens and cost of one response, or a running total. A value type.
struct Usage {
    std::int64_t input_tokens = 0;         ///< All prompt tokens, cached ones included.
    std::int64_t output_tokens = 0;        ///< All generated tokens, reasoning included.
    std::int64_t cached_read_tokens = 0;   ///< Prompt tokens served from the provider's cache.
    std::int64_t cached_write_tokens = 0;  ///< Prompt tokens written to the provider's cache.
    std::int64_t reasoning_tokens = 0;     ///< Hidden reasoning tokens (inside output_tokens).
    std::optional<double> cost_usd;        ///< Cost in USD, when the model's price is known.

    friend bool operator==(const Usage&, const Usage&) = default;

    /// Adds `other` field by field. The cost is the sum of the known costs; it stays unset
    /// only while no side knows its cost.
    Usage& operator+=(const Usage& other) noexcept;

    /// input + output tokens.
    [[nodiscard]] std::int64_t total_tokens() const noexcept {
        return input_tokens + output_tokens;
    }
};

/// `{"input_tokens": …, …, "cost_usd": … | null}`.
[[nodiscard]] json usage_to_json(const Usage& usage);

/// Parses a usage record; throws `InvalidMessageError` under `path` for missing or negative
/// counts, non-integers, unknown keys, or a cost that is not a finite non-negative number.
[[nodiscard]] Usage parse_usage(const json& value, const std::string& path = "");

void to_json(json& out, const Usage& usage);
void from_json(const json& in, Usage& usage);

}  // namespace ullm
