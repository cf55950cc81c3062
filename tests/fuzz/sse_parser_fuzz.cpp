// Fuzz target: SseParser gives the same events, end state and error whatever the chunking.
//
// The payload is parsed twice: in one write, and in the chunks the header's chunking plan
// cuts (see fuzz_support.hpp). Both runs must yield the same events, the same error (or none),
// the same `finish()` result, last event id and reconnection time.
//
// Options byte: bit 7 clear: the event size bound is (options & 0x3f) + 1 bytes, so that the
// bound is reached; bit 7 set: the default bound. Bit 6: after `finish()`, the payload is
// fed again as a reconnected stream (which keeps the last event id).

#include <ullm/http/sse_parser.hpp>

#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ullm::SseEvent;
using ullm::SseParser;
using ullm::SseStreamEnd;
using ullm::fuzz::Failure;

struct Outcome {
    std::vector<SseEvent> events;
    std::vector<SseStreamEnd> ends;
    std::optional<Failure> failure;
    std::string last_event_id;
    std::optional<std::int64_t> reconnection_time_ms;
    friend bool operator==(const Outcome&, const Outcome&) = default;
};

Outcome parse(const std::vector<std::string_view>& chunks, std::size_t bound, bool reconnect) {
    SseParser parser(bound);
    Outcome outcome;
    const auto collect = [&outcome](SseEvent&& event) {
        outcome.events.push_back(std::move(event));
    };
    outcome.failure = ullm::fuzz::capture([&] {
        for (int round = 0; round < (reconnect ? 2 : 1); ++round) {
            for (const std::string_view chunk : chunks) parser.feed(chunk, collect);
            outcome.ends.push_back(parser.finish());
        }
    });
    outcome.last_event_id = parser.last_event_id();
    outcome.reconnection_time_ms = parser.reconnection_time_ms();
    return outcome;
}

std::string describe(const Outcome& outcome) {
    std::string text;
    for (const auto& event : outcome.events) {
        text += "  event " + ullm::fuzz::quote(event.event) + " data " +
                ullm::fuzz::quote(event.data) + " id " + ullm::fuzz::quote(event.id) + " retry " +
                (event.retry_ms ? std::to_string(*event.retry_ms) : "-") + "\n";
    }
    for (const auto& end : outcome.ends) {
        text += "  finish: partial_line " + std::to_string(end.partial_line) + " partial_event " +
                std::to_string(end.partial_event) + "\n";
    }
    text += "  last id " + ullm::fuzz::quote(outcome.last_event_id) + ", retry " +
            (outcome.reconnection_time_ms ? std::to_string(*outcome.reconnection_time_ms) : "-") +
            ", " + ullm::fuzz::describe(outcome.failure) + "\n";
    return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const std::size_t bound = (input->options & 0x80) != 0
                                  ? ullm::sse_default_max_event_bytes
                                  : std::size_t{1} + (input->options & 0x3fu);
    const bool reconnect = (input->options & 0x40) != 0;

    const Outcome whole = parse({input->payload}, bound, reconnect);
    const Outcome split = parse(ullm::fuzz::chunks_of(*input), bound, reconnect);
    if (!(whole == split)) {
        ullm::fuzz::finding("SseParser: chunked parsing differs from one write",
                            "bound " + std::to_string(bound) + "\none write:\n" + describe(whole) +
                                "chunked:\n" + describe(split));
    }
    return 0;
}
