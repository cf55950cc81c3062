#pragma once

// How a dialog instance is stored: its conversation's snapshot inside a record that also holds
// the instance's pins, pattern instances, structured result and turn id. Private to the library;
// the instance's `TurnHooks` (dialog.cpp) write and read it through the conversation.

#include <ullm/core/json.hpp>
#include <ullm/dialog/dialog_tool.hpp>

#include <cstdint>
#include <optional>

namespace ullm::detail {

/// What a dialog instance keeps beside its transcript.
struct DialogInstanceRecord {
    DialogInstanceState state;  ///< Pins and pattern instances.
    std::optional<json> result;
    std::uint64_t turn_id = 0;
};

/// The record as stored: `{"format": "ullm.dialog_instance", "format_version": 1,
/// "conversation": <conversation snapshot>, "pins": [...], "pattern_instances": [...],
/// "turn_id": N}` plus `"result"` when there is one.
[[nodiscard]] json instance_record_to_json(json conversation, const DialogInstanceRecord& record);

/// Parses a stored record's own part: everything but its conversation snapshot, which the
/// conversation checks. Fails closed with `InvalidConversationSnapshotError` naming the JSON
/// pointer, e.g. `/pins/0/link`.
[[nodiscard]] DialogInstanceRecord parse_instance_part(const json& value);

}  // namespace ullm::detail
