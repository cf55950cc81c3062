#pragma once

/// Internal helpers for fail-closed JSON parsing: JSON-pointer paths and safety checks.

#include <ullm/core/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace ullm::detail {

/// `path` extended by one reference token, escaped as RFC 6901 requires (`~` → `~0`,
/// `/` → `~1`).
inline std::string pointer_append(const std::string& path, std::string_view token) {
    std::string out = path;
    out.reserve(path.size() + token.size() + 1);
    out.push_back('/');
    for (const char c : token) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out.push_back(c);
        }
    }
    return out;
}

/// `path` extended by an array index.
inline std::string pointer_append(const std::string& path, std::size_t index) {
    return path + "/" + std::to_string(index);
}

/// The deepest nesting ullm accepts in values it parses or stores.
inline constexpr std::size_t max_json_depth = 256;

/// Where `value` breaks JSON safety (a non-finite number, or nesting deeper than `max_depth`),
/// as a JSON pointer below `path` and the constraint; empty `constraint` when it is safe.
struct JsonSafetyViolation {
    std::string path;
    std::string constraint;
};

/// Checks `value` for non-finite numbers and excessive depth. Iterative, so a hostile depth
/// cannot overflow the stack.
[[nodiscard]] JsonSafetyViolation check_json_safe(const json& value, const std::string& path,
                                                  std::size_t max_depth = max_json_depth);

/// Parses `text` as exactly one JSON value. Returns a discarded value (`is_discarded()`) when
/// it is not valid JSON, has anything but whitespace after the value, or holds a NUL byte
/// anywhere: nlohmann's parser stops at a NUL and ignores what follows, so `{}` NUL `junk`
/// would otherwise pass where `{}junk` does not.
[[nodiscard]] json parse_json_exact(std::string_view text);

/// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates, nothing past
/// U+10FFFF).
[[nodiscard]] bool is_valid_utf8(std::string_view text) noexcept;

/// Whether `key` is a property name that JavaScript consumers of the same data treat specially
/// (`__proto__`, `constructor`, `prototype`).
[[nodiscard]] bool is_prototype_sensitive_key(std::string_view key) noexcept;

/// `value` as JSON text for an error message: invalid UTF-8 replaced, and cut after `limit`
/// bytes with "..." appended.
[[nodiscard]] std::string render_bounded(const json& value, std::size_t limit);

/// `text` as a JSON string for an error message, safe to show whatever bytes it holds and
/// bounded as `render_bounded` bounds it.
[[nodiscard]] std::string quote(std::string_view text, std::size_t limit);

/// What `check_json_rules` enforces besides finite numbers.
struct JsonRules {
    std::size_t max_depth = max_json_depth;  ///< Containers nest at most this deep.
    bool utf8 = true;                        ///< Every string and key is valid UTF-8.
    /// No key is `__proto__`: a JavaScript reader of the same data would change the object's
    /// prototype. Never legitimate data.
    bool no_proto_key = true;
    /// No key is `constructor` or `prototype` either. Off by default: such keys are ordinary
    /// data (a racing API's "constructor" standings) and harmless to a C++ reader.
    bool no_prototype_keys = false;
};

/// `check_json_safe` plus the optional rules of `rules`, reporting the first violation in
/// document order as a JSON pointer below `path` (the root itself is `path` unchanged, "" when
/// `path` is ""). A key that is not valid UTF-8 is reported at its object's path, so that the
/// path itself is always valid UTF-8. Iterative.
/// `depth` is how deep `value` itself lies in the document it belongs to.
[[nodiscard]] JsonSafetyViolation check_json_rules(const json& value, const std::string& path,
                                                   const JsonRules& rules = {},
                                                   std::size_t depth = 0);

}  // namespace ullm::detail
