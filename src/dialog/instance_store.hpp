#pragma once

// How a dialog instance persists: its conversation's snapshot inside a record that also holds
// the instance's pins, pattern instances, structured result and turn id. Private to the library.

#include <ullm/core/json.hpp>
#include <ullm/dialog/dialog_tool.hpp>
#include <ullm/store/session_store.hpp>

#include <cstdint>
#include <functional>
#include <memory>
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

/// Parses a stored record; returns the conversation snapshot (checked as `parse_snapshot`
/// checks it) and the rest. Fails closed with `InvalidConversationSnapshotError` naming the
/// JSON pointer, e.g. `/pins/0/link`.
[[nodiscard]] std::pair<json, DialogInstanceRecord> parse_instance_record(const json& value);

/// The session store one instance's conversation writes through: it wraps each conversation
/// snapshot in an instance record (`read` gives the rest) and hands each record it reads to
/// `apply` (an empty one when the session is gone) before the conversation sees its part.
/// Thread-safe as the wrapped store is; `read` and `apply` are called without locks held.
class InstanceStore final : public SessionStore {
public:
    InstanceStore(std::shared_ptr<SessionStore> inner, std::function<DialogInstanceRecord()> read,
                  std::function<void(DialogInstanceRecord)> apply);

    [[nodiscard]] std::optional<StoredSession> get(std::string_view tenant,
                                                   std::string_view session_id) override;
    std::uint64_t put(std::string_view tenant, std::string_view session_id,
                      std::string_view snapshot, std::uint64_t expected_version) override;
    bool remove(std::string_view tenant, std::string_view session_id) override;
    [[nodiscard]] SessionPage list(std::string_view tenant,
                                   const SessionListOptions& options) override;

private:
    std::shared_ptr<SessionStore> inner_;
    std::function<DialogInstanceRecord()> read_;
    std::function<void(DialogInstanceRecord)> apply_;
};

}  // namespace ullm::detail
