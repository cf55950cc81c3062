#pragma once

// The rule that pairs tool results with tool calls, shared by the snapshot codec and the
// validation of context manager output. Private to the library.

#include <ullm/core/message.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ullm::detail {

/// Where a message list breaks the pairing of tool calls and tool results.
struct ToolSequenceViolation {
    std::size_t message = 0;  ///< Index of the offending message.
    std::string pointer;      ///< JSON pointer below that message ("" for the whole message).
    std::string rule;         ///< The rule it broke, as a sentence fragment.
};

/// Checks that every run of tool messages (one per round, or one per call) directly follows an
/// assistant message with tool calls and answers only those calls, each at most once; that the
/// tool call ids of one assistant message are distinct; and that every tool call is answered by
/// the run that follows, unless its assistant message is the last one (its results are still to
/// come). Returns the first violation.
[[nodiscard]] std::optional<ToolSequenceViolation> check_tool_sequence(
    const std::vector<Message>& messages);

}  // namespace ullm::detail
