#pragma once

// The JSON pointers of cell links: split, joined, and resolved one step at a time, with the
// `invalid_link` messages a `CellSpace` gives. Private to the library.

#include <ullm/core/json.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/dialog/cell_space.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::detail {

/// What a dialog's messages quote is cut after this many bytes (`detail::quote`).
inline constexpr std::size_t message_quote_limit = 120;

/// `link` as a message shows it (quoted).
std::string show(const CellLink& link);

/// The unescaped reference tokens of `link.pointer`. Throws `DialogError` (`invalid_link`) for
/// a path that does not start with '/' or holds a '~' that is not an escape.
std::vector<std::string> split_pointer(const CellLink& link);

/// The pointer of `tokens[from…]`, escaped.
std::string join_pointer(const std::vector<std::string>& tokens, std::size_t from = 0);

/// An RFC 6901 array index: "0" or digits without a leading zero. npos when it is not one.
std::size_t parse_index(std::string_view token);

/// What kind of JSON value `value` is, for a message ("an object", "a string", …).
const char* type_name(const json& value);

/// The child of `node` at `token`, or an `invalid_link` naming what is there instead. `at` is
/// where `node` is, `requested` the link being resolved.
const json& pointer_step(const json& node, const std::string& token, const CellLink& at,
                         const CellLink& requested);

}  // namespace ullm::detail
