// Fuzz target: restoring a conversation snapshot from text (`parse_snapshot_text`).
//
// Only `ullm::Error` may leave the parser. A snapshot it accepts must come from text that is
// one whole JSON text; `parse_snapshot` of that JSON must accept it too and give the same
// snapshot; and the snapshot must survive `snapshot_to_json` and parsing again unchanged
// (timestamps rounded down to the millisecond, as documented).
//
// Options byte: bit 0 set means small limits (4 messages, 4 KiB of text, 64 bytes of replay
// state), so that the limits are reached. The chunking and seed bytes are unused.

#include <ullm/conversation/snapshot.hpp>
#include <ullm/core/json.hpp>

#include "fuzz_support.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace {

using ullm::ConversationSnapshot;
using ullm::json;

std::string describe(const ConversationSnapshot& snapshot) {
    return ullm::fuzz::show(ullm::snapshot_to_json(snapshot));
}

bool same_snapshot(const ConversationSnapshot& a, const ConversationSnapshot& b) {
    using std::chrono::floor;
    using std::chrono::milliseconds;
    return a.session_id == b.session_id && a.tenant == b.tenant && a.messages == b.messages &&
           a.totals == b.totals &&
           floor<milliseconds>(a.created_at) == floor<milliseconds>(b.created_at) &&
           floor<milliseconds>(a.updated_at) == floor<milliseconds>(b.updated_at);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    ullm::SnapshotLimits limits;
    if ((input->options & 1) != 0) {
        limits = {.max_messages = 4, .max_bytes = 4096, .max_replay_bytes = 64};
    }

    std::optional<ConversationSnapshot> restored;
    if (ullm::fuzz::capture(
            [&] { restored = ullm::parse_snapshot_text(input->payload, limits); })) {
        return 0;
    }
    if (!ullm::fuzz::is_whole_json(input->payload)) {
        ullm::fuzz::finding("parse_snapshot_text accepted text that is not one JSON text",
                            "text " + ullm::fuzz::quote(input->payload));
    }

    const json value = json::parse(input->payload);
    std::optional<ConversationSnapshot> from_value;
    if (const auto failure =
            ullm::fuzz::capture([&] { from_value = ullm::parse_snapshot(value, limits); })) {
        ullm::fuzz::finding("parse_snapshot refused the JSON of text parse_snapshot_text accepted",
                            ullm::fuzz::describe(failure));
    }
    if (!same_snapshot(*restored, *from_value)) {
        ullm::fuzz::finding("parse_snapshot and parse_snapshot_text disagree",
                            describe(*restored) + "\n" + describe(*from_value));
    }

    std::optional<ConversationSnapshot> again;
    if (const auto failure = ullm::fuzz::capture(
            [&] { again = ullm::parse_snapshot(ullm::snapshot_to_json(*restored), limits); })) {
        ullm::fuzz::finding("a restored snapshot does not survive snapshot_to_json",
                            describe(*restored) + "\n" + ullm::fuzz::describe(failure));
    }
    if (!same_snapshot(*restored, *again)) {
        ullm::fuzz::finding("a restored snapshot changes through snapshot_to_json",
                            describe(*restored) + "\n" + describe(*again));
    }
    return 0;
}
