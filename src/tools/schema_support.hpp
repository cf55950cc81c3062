#pragma once

// Internal to the strict validator: what the schema checker and the argument checker share
// (JSON pointers, messages, number comparisons, local references, compiled patterns).

#include <ullm/core/json.hpp>
#include <ullm/detail/json_checks.hpp>

#include <re2/re2.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ullm::detail::validation {

/// Compiled patterns by their source text; a pattern that appears twice is compiled once.
using PatternMap = std::map<std::string, std::shared_ptr<const re2::RE2>, std::less<>>;

/// The largest integer a double holds exactly (2^53).
inline constexpr double max_safe_integer = 9007199254740992.0;

/// JSON-pointer extension by a token or an index (RFC 6901 escaping), shared with the library.
using ullm::detail::pointer_append;

/// The number of code points in UTF-8 `text`.
std::size_t code_points(std::string_view text);

/// A short, always-serialisable rendering of `value` for messages.
inline std::string render(const json& value, std::size_t limit = 60) {
    return render_bounded(value, limit);
}

/// `text` as a JSON string for messages.
inline std::string quote(std::string_view text) {
    return ullm::detail::quote(text, 60);
}

/// An integer ≥ 0, also as a float with no fraction (up to 2^53).
bool is_non_negative_integer(const json& value);

/// Three-way numeric comparison, exact for integers of either signedness.
int compare_numbers(const json& a, const json& b);

/// An integer, also as a float with no fraction (up to 2^53 in magnitude).
bool is_integer_value(const json& value);

/// Whether `value` is a multiple of `divisor` (a non-positive divisor constrains nothing).
bool is_multiple_of(const json& value, const json& divisor);

/// The target of a local reference: "" for the root, otherwise "<container>/<name>".
struct RefTarget {
    std::string container;  ///< "", "$defs" or "definitions"
    std::string name;
};

/// The target of `#`, `#/$defs/<name>` or `#/definitions/<name>`; nullopt for anything else.
std::optional<RefTarget> parse_ref(std::string_view ref);

/// The schema a reference points at, or null when it does not resolve.
const json* resolve(const json& root, const RefTarget& target);

}  // namespace ullm::detail::validation
