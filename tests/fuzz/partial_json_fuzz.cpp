// Fuzz target: PartialJsonParser gives the same value, error and completion however the text
// is chunked, shows only valid UTF-8, and agrees with json::parse on complete JSON text.
//
// The payload is fed twice: in one piece, and in the chunks the header's chunking plan cuts (see
// fuzz_support.hpp). Both runs must end in the same state. When json::parse accepts the payload
// (no BOM, nesting within the limit), the parser must finish with the same value; when the
// parser finishes a payload without a fence, json::parse must accept it.
//
// Options byte: bit 7 set: the default depth limit (64); clear: (options & 0x3f) + 1.

#include <ullm/core/partial_json.hpp>

#include "fuzz_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ullm::json;
using ullm::PartialJsonParser;

struct Outcome {
    json value;
    bool finished = false;
    bool complete = false;
    std::string error;
    std::size_t bytes = 0;
    friend bool operator==(const Outcome&, const Outcome&) = default;
};

Outcome parse(const std::vector<std::string_view>& chunks, std::size_t depth) {
    PartialJsonParser parser(depth);
    std::uint64_t revision = 0;
    for (const std::string_view chunk : chunks) {
        const bool changed = parser.feed(chunk);
        if (changed != (parser.revision() != revision)) {
            ullm::fuzz::finding("PartialJsonParser: feed's result and revision() disagree");
        }
        revision = parser.revision();
    }
    Outcome outcome;
    outcome.finished = parser.finish();
    outcome.value = parser.value();
    outcome.complete = parser.complete();
    outcome.error = parser.error();
    outcome.bytes = parser.bytes();
    try {
        (void)outcome.value.dump();
    } catch (const json::exception&) {
        ullm::fuzz::finding("PartialJsonParser: the value holds invalid UTF-8",
                            ullm::fuzz::show(outcome.value));
    }
    return outcome;
}

std::size_t depth_of(const json& value) {
    std::size_t deepest = 0;
    if (value.is_structured()) {
        for (const auto& child : value) deepest = std::max(deepest, depth_of(child));
        return deepest + 1;
    }
    return 0;
}

std::string describe(const Outcome& outcome) {
    return "  value " + ullm::fuzz::show(outcome.value) + "\n  finished " +
           std::to_string(outcome.finished) + ", complete " + std::to_string(outcome.complete) +
           ", bytes " + std::to_string(outcome.bytes) + ", error " +
           ullm::fuzz::quote(outcome.error) + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const std::size_t depth =
        (input->options & 0x80) != 0 ? 64 : std::size_t{1} + (input->options & 0x3fu);
    const std::string_view payload = input->payload;

    const Outcome whole = parse({payload}, depth);
    const Outcome split = parse(ullm::fuzz::chunks_of(*input), depth);
    if (!(whole == split)) {
        ullm::fuzz::finding("PartialJsonParser: chunked parsing differs from one piece",
                            "one piece:\n" + describe(whole) + "chunked:\n" + describe(split));
    }
    if (ullm::fuzz::is_whole_json(payload) && payload.substr(0, 3) != "\xEF\xBB\xBF") {
        const json expected = json::parse(payload);
        if (depth_of(expected) <= depth && (!whole.finished || whole.value != expected)) {
            ullm::fuzz::finding("PartialJsonParser: differs from json::parse on valid JSON",
                                "expected " + ullm::fuzz::show(expected) + "\n" + describe(whole));
        }
    }
    if (whole.finished && payload.find('`') == std::string_view::npos &&
        !ullm::fuzz::is_whole_json(payload)) {
        ullm::fuzz::finding("PartialJsonParser: finished text json::parse refuses",
                            describe(whole));
    }
    return 0;
}
