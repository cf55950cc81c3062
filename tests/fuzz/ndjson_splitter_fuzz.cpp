// Fuzz target: NdjsonSplitter gives the same lines, final line and error whatever the
// chunking.
//
// The payload is split twice: in one write, and in the chunks the header's chunking plan cuts
// (see fuzz_support.hpp). Both runs must yield the same lines, the same error (or none), the
// same `has_partial_line()` before `finish()` and the same `finish()` result.
//
// Options byte: bit 7 clear: the line bound is (options & 0x3f) + 1 bytes, so that the bound
// is reached; bit 7 set: the default bound. Bit 6: after `finish()`, the payload is fed again
// as a second stream (which may start with its own BOM).

#include <ullm/http/line_splitter.hpp>

#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ullm::NdjsonSplitter;
using ullm::fuzz::Failure;

struct Outcome {
    std::vector<std::string> lines;
    std::vector<bool> partial_before_finish;
    std::vector<std::optional<std::string>> finals;
    std::optional<Failure> failure;
    friend bool operator==(const Outcome&, const Outcome&) = default;
};

Outcome split_lines(const std::vector<std::string_view>& chunks, std::size_t bound,
                    bool second_stream) {
    NdjsonSplitter splitter(bound);
    Outcome outcome;
    outcome.failure = ullm::fuzz::capture([&] {
        for (int round = 0; round < (second_stream ? 2 : 1); ++round) {
            for (const std::string_view chunk : chunks) {
                splitter.feed(chunk, [&outcome](std::string_view line) {
                    if (line.empty()) ullm::fuzz::finding("NdjsonSplitter yielded an empty line");
                    outcome.lines.emplace_back(line);
                });
            }
            outcome.partial_before_finish.push_back(splitter.has_partial_line());
            outcome.finals.push_back(splitter.finish());
        }
    });
    return outcome;
}

std::string describe(const Outcome& outcome) {
    std::string text;
    for (const auto& line : outcome.lines) text += "  line " + ullm::fuzz::quote(line) + "\n";
    for (std::size_t i = 0; i < outcome.finals.size(); ++i) {
        text += "  partial " + std::to_string(outcome.partial_before_finish[i]) + ", final " +
                (outcome.finals[i] ? ullm::fuzz::quote(*outcome.finals[i]) : "-") + "\n";
    }
    return text + "  " + ullm::fuzz::describe(outcome.failure) + "\n";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const std::size_t bound = (input->options & 0x80) != 0
                                  ? ullm::stream_default_max_element_bytes
                                  : std::size_t{1} + (input->options & 0x3fu);
    const bool second_stream = (input->options & 0x40) != 0;

    const Outcome whole = split_lines({input->payload}, bound, second_stream);
    const Outcome split = split_lines(ullm::fuzz::chunks_of(*input), bound, second_stream);
    if (!(whole == split)) {
        ullm::fuzz::finding("NdjsonSplitter: chunked splitting differs from one write",
                            "bound " + std::to_string(bound) + "\none write:\n" + describe(whole) +
                                "chunked:\n" + describe(split));
    }
    return 0;
}
