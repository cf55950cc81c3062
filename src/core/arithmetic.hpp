#pragma once

// Internal: integer arithmetic on counts read from the wire or summed over many turns.

#include <cstdint>
#include <limits>

namespace ullm::detail {

/// `a + b`, clamped to the range of `std::int64_t` instead of overflowing.
constexpr std::int64_t saturating_add(std::int64_t a, std::int64_t b) noexcept {
    constexpr auto max = std::numeric_limits<std::int64_t>::max();
    constexpr auto min = std::numeric_limits<std::int64_t>::min();
    if (b > 0 && a > max - b) return max;
    if (b < 0 && a < min - b) return min;
    return a + b;
}

}  // namespace ullm::detail
