// Fuzz target: JsonArrayStreamSplitter gives the same elements and error whatever the
// chunking, and agrees with a JSON parser on well-formed arrays.
//
// The payload is split twice: in one write, and in the chunks the header's chunking plan cuts
// (see fuzz_support.hpp). Both runs must yield the same elements, the same error (or none),
// the same `complete()` before `finish()` and the same `finish()` result. With the default
// bound, the one-write run is also compared with nlohmann's parser: a payload that is one
// JSON array must be split into exactly its elements, and a payload the splitter completes
// with elements that are each JSON must itself be JSON.
//
// Options byte: bit 7 clear: the element bound is (options & 0x3f) + 1 bytes, so that the
// bound is reached; bit 7 set: the default bound. Bit 6: after `finish()`, the payload is
// fed again as a second stream.

#include <ullm/http/line_splitter.hpp>

#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ullm::json;
using ullm::JsonArrayStreamSplitter;
using ullm::fuzz::Failure;

struct Outcome {
    std::vector<std::string> elements;
    std::vector<bool> complete_before_finish;
    std::vector<bool> finished;
    std::optional<Failure> failure;
    friend bool operator==(const Outcome&, const Outcome&) = default;
};

Outcome split_elements(const std::vector<std::string_view>& chunks, std::size_t bound,
                       bool second_stream) {
    JsonArrayStreamSplitter splitter(bound);
    Outcome outcome;
    outcome.failure = ullm::fuzz::capture([&] {
        for (int round = 0; round < (second_stream ? 2 : 1); ++round) {
            for (const std::string_view chunk : chunks) {
                splitter.feed(chunk, [&outcome](std::string_view element) {
                    outcome.elements.emplace_back(element);
                });
            }
            outcome.complete_before_finish.push_back(splitter.complete());
            outcome.finished.push_back(splitter.finish());
        }
    });
    return outcome;
}

std::string describe(const Outcome& outcome) {
    std::string text;
    for (const auto& element : outcome.elements) {
        text += "  element " + ullm::fuzz::quote(element) + "\n";
    }
    for (std::size_t i = 0; i < outcome.finished.size(); ++i) {
        text += "  complete " + std::to_string(outcome.complete_before_finish[i]) + ", finish " +
                std::to_string(outcome.finished[i]) + "\n";
    }
    return text + "  " + ullm::fuzz::describe(outcome.failure) + "\n";
}

// The one-write run of a single stream against nlohmann's parser.
void compare_with_parser(std::string_view payload, const Outcome& whole) {
    const bool parsed_whole = ullm::fuzz::is_whole_json(payload);
    const json value = parsed_whole ? json::parse(payload) : json();
    if (parsed_whole && value.is_array()) {
        bool same =
            !whole.failure && whole.finished.front() && whole.elements.size() == value.size();
        for (std::size_t i = 0; same && i < whole.elements.size(); ++i) {
            same = ullm::fuzz::is_whole_json(whole.elements[i]) &&
                   json::parse(whole.elements[i]) == value[i];
        }
        if (!same) {
            ullm::fuzz::finding(
                "JsonArrayStreamSplitter: a JSON array is not split into its "
                "elements",
                "array " + ullm::fuzz::show(value) + "\nsplitter:\n" + describe(whole));
        }
        return;
    }
    if (whole.failure || !whole.finished.front()) return;
    for (const auto& element : whole.elements) {
        if (!ullm::fuzz::is_whole_json(element)) return;  // the caller's parse rejects it
    }
    ullm::fuzz::finding(
        "JsonArrayStreamSplitter: completed an array that is not JSON",
        "payload " + ullm::fuzz::quote(payload) + "\nsplitter:\n" + describe(whole));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const bool default_bound = (input->options & 0x80) != 0;
    const std::size_t bound = default_bound ? ullm::stream_default_max_element_bytes
                                            : std::size_t{1} + (input->options & 0x3fu);
    const bool second_stream = (input->options & 0x40) != 0;

    const Outcome whole = split_elements({input->payload}, bound, second_stream);
    const Outcome split = split_elements(ullm::fuzz::chunks_of(*input), bound, second_stream);
    if (!(whole == split)) {
        ullm::fuzz::finding("JsonArrayStreamSplitter: chunked splitting differs from one write",
                            "bound " + std::to_string(bound) + "\none write:\n" + describe(whole) +
                                "chunked:\n" + describe(split));
    }
    if (default_bound && !second_stream) compare_with_parser(input->payload, whole);
    return 0;
}
