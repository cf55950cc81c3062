#pragma once

// Internal to the conversation: the checks of stored snapshot text that a conversation's loads
// and writes share with `parse_snapshot_text`.

#include <ullm/conversation/snapshot.hpp>

#include <cstddef>
#include <string_view>
#include <vector>

namespace ullm {

namespace detail {

/// Snapshot JSON text as a session store holds it, parsed with the checks `parse_snapshot_text`
/// makes before it reads the snapshot: its size, a NUL byte, its depth and syntax.
[[nodiscard]] json parse_stored_json(std::string_view text, const SnapshotLimits& limits = {});

/// Checks a snapshot about to be written as a load of it would check it, trusting what was
/// checked before: `value` is `snapshot_to_json` of a snapshot holding `messages`, of which the
/// first `checked` were written or read before, and `bytes` is the size of the stored text. Throws
/// `InvalidConversationSnapshotError` as `parse_snapshot_text` would.
void check_snapshot_write(const json& value, const std::vector<Message>& messages,
                          std::size_t checked, std::size_t bytes,
                          const SnapshotLimits& limits = {});

}  // namespace detail

}  // namespace ullm
