#pragma once

/// Model prices and the cost of a request or response.

#include <ullm/core/json.hpp>
#include <ullm/core/usage.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// The price of one model, in USD per million tokens.
struct ModelPrice {
    double input = 0;                    ///< Uncached prompt tokens.
    double output = 0;                   ///< Generated tokens, reasoning included.
    std::optional<double> cached_read;   ///< Prompt tokens read from the cache (else `input`).
    std::optional<double> cached_write;  ///< Prompt tokens written to the cache (else `input`).
    std::string last_updated;            ///< When this price was last checked (YYYY-MM-DD).
    friend bool operator==(const ModelPrice&, const ModelPrice&) = default;
};

/// Prices keyed by `provider/model`. A key may end in `/*` to price every model of a provider
/// (local servers cost nothing). A model id with a dated or `-latest` suffix (e.g.
/// `gpt-4o-2024-08-06`, `claude-sonnet-4-20250514`) takes the price of its base name. A value
/// type; const members are thread-safe.
class PriceTable {
public:
    /// The table shipped with ullm (`src/providers/prices.json`, compiled in). Parsed once.
    [[nodiscard]] static const PriceTable& builtin();

    /// Parses `{"models": {"provider/model": {"input", "output", "cached_read"?,
    /// "cached_write"?, "lastUpdated"}}}`. Throws `ProviderCapabilityError`
    /// (`invalid_price_table`) naming the entry and the rule it breaks: prices must be finite
    /// and non-negative, `lastUpdated` a YYYY-MM-DD date, keys `provider/model`.
    [[nodiscard]] static PriceTable parse(const json& value);

    /// This table with `overrides` (same format as `parse`) applied: every override is
    /// validated before any is applied, so a bad one changes nothing.
    [[nodiscard]] PriceTable with_overrides(const json& overrides) const;

    /// The price of `model` at `provider`, or nullopt when unknown. `openai-responses` models
    /// without entries of their own have OpenAI's prices.
    [[nodiscard]] std::optional<ModelPrice> find(std::string_view provider,
                                                 std::string_view model) const;

    /// Like `find`, but throws `ProviderCapabilityError` (`unknown_model_pricing`, status
    /// 400) when the price is unknown — for budgets, which cannot work without one.
    [[nodiscard]] ModelPrice require(std::string_view provider, std::string_view model) const;

    /// The cost in USD of `usage` at `price`.
    [[nodiscard]] static double cost(const ModelPrice& price, const Usage& usage) noexcept;

    /// How many models the table prices.
    [[nodiscard]] std::size_t size() const noexcept { return prices_.size(); }

private:
    std::map<std::string, ModelPrice, std::less<>> prices_;
};

}  // namespace ullm
