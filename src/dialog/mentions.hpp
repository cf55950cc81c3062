#pragma once

// Which cells a value mentions: what keeps run cells of a `CellSpace` in use. Private to the
// library.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>

#include <functional>
#include <string_view>
#include <vector>

namespace ullm::detail {

/// Calls `visit` with each cell id that `text` may mention: for every `/of:` in it, the run of
/// id characters after it (up to '/', whitespace or a control character) and, for a link
/// written in prose or in quoted JSON, that run cut at the first quote, bracket, comma or
/// semicolon and with trailing `.:!?*` dropped. A candidate need not name a cell.
void for_each_mention(std::string_view text, const std::function<void(std::string_view)>& visit);

/// As above for every string inside `value` (stored links `{"@link": "/of:…"}` included).
/// Iterative: any nesting depth is safe.
void for_each_mention(const json& value, const std::function<void(std::string_view)>& visit);

/// As above for the texts, reasoning, tool call arguments and tool results of `messages`.
void for_each_mention(const std::vector<Message>& messages,
                      const std::function<void(std::string_view)>& visit);

}  // namespace ullm::detail
