// Fuzz target: a provider adapter's stream decoder (built once per adapter; see
// provider_fuzz.hpp) gives the same events and error whatever the chunking.
//
// The payload is a streamed 2xx body. It is decoded twice: fed in one write, and in the chunks
// the header's chunking plan cuts (see fuzz_support.hpp), each followed by `finish()`. Both
// runs must yield the same events and the same error code (or none); only `ullm::Error` may
// leave the decoder; the one-write events must keep the promises of docs/streaming.md (see
// `stream_rule_broken`).
//
// Options byte: bits 0-1 pick the request's model and bits 2-3 the adapter variant.

#include "provider_fuzz.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ullm::StreamEvent;
using ullm::fuzz::Failure;

struct Outcome {
    std::vector<StreamEvent> events;
    std::optional<Failure> failure;
    bool visible = false;
};

Outcome decode(const ullm::fuzz::Subject& subject, const std::vector<std::string_view>& chunks) {
    Outcome outcome;
    auto decoder = subject.provider->stream_decoder(subject.request);
    outcome.failure = ullm::fuzz::capture([&] {
        for (const std::string_view chunk : chunks) decoder->feed(chunk, outcome.events);
        decoder->finish(outcome.events);
    });
    outcome.visible = decoder->produced_visible_event();
    return outcome;
}

std::string code_of(const std::optional<Failure>& failure) {
    return failure ? failure->code : std::string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const auto subject = ullm::fuzz::make_subject(input->options);

    const Outcome whole = decode(subject, {input->payload});
    const Outcome split = decode(subject, ullm::fuzz::chunks_of(*input));
    if (!ullm::fuzz::same_events(whole.events, split.events) ||
        code_of(whole.failure) != code_of(split.failure) || whole.visible != split.visible) {
        ullm::fuzz::finding("stream decoder: chunked decoding differs from one write",
                            "one write (visible " + std::to_string(whole.visible) + "):\n" +
                                ullm::fuzz::describe(whole.events, whole.failure) +
                                "chunked (visible " + std::to_string(split.visible) + "):\n" +
                                ullm::fuzz::describe(split.events, split.failure));
    }
    if (const auto broken = ullm::fuzz::stream_rule_broken(whole.events, !whole.failure);
        !broken.empty()) {
        ullm::fuzz::finding("stream decoder: " + broken,
                            ullm::fuzz::describe(whole.events, whole.failure));
    }
    return 0;
}
