// Property tests over every recorded SSE stream in the fixtures: whatever the chunking, the
// parser yields the same events as when it reads the stream in one piece.

#include <ullm/core/json.hpp>
#include <ullm/http/sse_parser.hpp>

#include "support/catch.hpp"
#include "support/fixtures.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace fixture_stream_test {

namespace {

using ullm::SseEvent;
using ullm::SseParser;
using ullm::SseStreamEnd;
using ullm::test::Framing;
using ullm::test::RecordedStream;

struct Parsed {
    std::vector<SseEvent> events;
    SseStreamEnd end;

    friend bool operator==(const Parsed&, const Parsed&) = default;
};

/// Parses `wire` fed as consecutive chunks that end at each of `cuts` (ascending), then at
/// the end of `wire`.
Parsed parse_cut(std::string_view wire, std::initializer_list<std::size_t> cuts) {
    SseParser parser;
    Parsed parsed;
    const auto collect = [&parsed](SseEvent&& event) { parsed.events.push_back(std::move(event)); };
    std::size_t start = 0;
    for (const std::size_t cut : cuts) {
        parser.feed(wire.substr(start, cut - start), collect);
        start = cut;
    }
    parser.feed(wire.substr(start), collect);
    parsed.end = parser.finish();
    return parsed;
}

Parsed parse_whole(std::string_view wire) {
    return parse_cut(wire, {});
}

Parsed parse_bytewise(std::string_view wire) {
    SseParser parser;
    Parsed parsed;
    const auto collect = [&parsed](SseEvent&& event) { parsed.events.push_back(std::move(event)); };
    for (std::size_t i = 0; i < wire.size(); ++i) parser.feed(wire.substr(i, 1), collect);
    parsed.end = parser.finish();
    return parsed;
}

/// Parses `wire` in pseudo-random chunks of 1 to 4096 bytes (a fixed sequence per seed).
Parsed parse_random_chunks(std::string_view wire, std::uint32_t seed) {
    SseParser parser;
    Parsed parsed;
    const auto collect = [&parsed](SseEvent&& event) { parsed.events.push_back(std::move(event)); };
    std::uint32_t state = seed;
    std::size_t start = 0;
    while (start < wire.size()) {
        state = state * 1664525U + 1013904223U;
        const std::size_t size = 1 + (state >> 8) % 4096;
        parser.feed(wire.substr(start, size), collect);
        start += size;
    }
    parsed.end = parser.finish();
    return parsed;
}

/// The start of every event block: 0 and each position just after a blank line (CR, LF or
/// CRLF line ends), then the end of the stream. Written independently of the parser.
std::vector<std::size_t> block_bounds(std::string_view wire) {
    std::vector<std::size_t> bounds{0};
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < wire.size(); ++i) {
        const char c = wire[i];
        if (c != '\r' && c != '\n') continue;
        const bool blank = i == line_start;
        if (c == '\r' && i + 1 < wire.size() && wire[i + 1] == '\n') ++i;
        line_start = i + 1;
        if (blank && line_start > bounds.back()) bounds.push_back(line_start);
    }
    if (bounds.back() != wire.size()) bounds.push_back(wire.size());
    return bounds;
}

/// The offsets at which a stream is split in two: every one up to 64 KiB; beyond, every one
/// in the first and last 4 KiB and every 97th between.
std::vector<std::size_t> split_offsets(std::size_t size) {
    constexpr std::size_t dense = std::size_t{64} * 1024;
    constexpr std::size_t edge = std::size_t{4} * 1024;
    std::vector<std::size_t> offsets;
    if (size <= dense) {
        for (std::size_t k = 0; k <= size; ++k) offsets.push_back(k);
        return offsets;
    }
    for (std::size_t k = 0; k <= edge; ++k) offsets.push_back(k);
    for (std::size_t k = edge + 97; k < size - edge; k += 97) offsets.push_back(k);
    for (std::size_t k = size - edge; k <= size; ++k) offsets.push_back(k);
    return offsets;
}

/// Whether feeding `wire` as two chunks split at `k` gives exactly `expected`; compares as it
/// goes rather than collecting, since it runs millions of times.
bool split_matches(std::string_view wire, std::size_t k, const Parsed& expected) {
    SseParser parser;
    std::size_t next = 0;
    bool same = true;
    const auto compare = [&](SseEvent&& event) {
        same = same && next < expected.events.size() && event == expected.events[next];
        ++next;
    };
    parser.feed(wire.substr(0, k), compare);
    parser.feed(wire.substr(k), compare);
    return same && next == expected.events.size() && parser.finish() == expected.end;
}

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}
bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

/// The anthropic-sdk-python `*.txt` streams were saved without the blank line that ends the
/// last event (the SDKs' tests pre-split them, so they never noticed).
bool saved_without_final_blank_line(const RecordedStream& stream) {
    return starts_with(stream.name, "anthropic/anthropic-sdk-python/") &&
           ends_with(stream.name, ".txt");
}

const std::vector<RecordedStream>& streams() {
    static const std::vector<RecordedStream> all = ullm::test::recorded_sse_streams();
    return all;
}

}  // namespace

TEST_CASE("fixtures: the recorded streams are found", "[sse][fixtures]") {
    std::size_t framed = 0;
    std::size_t wire = 0;
    std::size_t bytes = 0;
    for (const auto& stream : streams()) {
        (stream.framing ? framed : wire) += 1;
        bytes += stream.wire.size();
    }
    INFO(framed << " framed *.chunks.txt streams, " << wire << " recorded wire bodies, " << bytes
                << " bytes");
    CHECK(framed >= 170);  // 174 *.chunks.txt files, 2 of which are already wire bodies
    CHECK(wire >= 40);     // 12 .bin + 12 .txt + 3 .sse + bodies inside .json + 2 .chunks.txt
}

TEST_CASE("fixtures: every framed chunks.txt line comes back as one event", "[sse][fixtures]") {
    for (const auto& stream : streams()) {
        if (!stream.framing) continue;
        INFO(stream.name);
        const Parsed parsed = parse_whole(stream.wire);
        CHECK(parsed.end.clean());
        const bool done = *stream.framing == Framing::chat_completions;
        REQUIRE(parsed.events.size() == stream.payloads.size() + (done ? 1 : 0));
        for (std::size_t i = 0; i < stream.payloads.size(); ++i) {
            const SseEvent& event = parsed.events[i];
            INFO("line " << i);
            CHECK(event.data == stream.payloads[i]);
            CHECK(event.id.empty());
            CHECK_FALSE(event.retry_ms.has_value());
            std::string type = "message";
            if (*stream.framing == Framing::typed_events) {
                type = ullm::test::json_type_field(stream.payloads[i]).value_or("message");
            }
            CHECK(event.event == type);
        }
        if (done) CHECK(parsed.events.back().data == "[DONE]");
    }
}

TEST_CASE("fixtures: every recorded wire body parses to JSON events", "[sse][fixtures]") {
    for (const auto& stream : streams()) {
        if (stream.framing) continue;
        INFO(stream.name);
        const Parsed parsed = parse_whole(stream.wire);
        REQUIRE_FALSE(parsed.events.empty());
        for (const auto& event : parsed.events) {
            INFO("data: " << event.data.substr(0, 120));
            if (event.data == "[DONE]") continue;
            CHECK(ullm::json::accept(event.data));
            // Anthropic names each event after its payload's type.
            if (event.event != "message") {
                CHECK(ullm::test::json_type_field(event.data) == event.event);
            }
        }
        if (saved_without_final_blank_line(stream)) {
            // Strictly, the last event is incomplete: a client must not act on it.
            CHECK(parsed.end.partial_event);
            const Parsed terminated = parse_whole(stream.wire + "\n\n");
            CHECK(terminated.end.clean());
            REQUIRE(terminated.events.size() == parsed.events.size() + 1);
            CHECK(terminated.events.back().event == "message_stop");
        } else {
            CHECK(parsed.end.clean());
        }
    }
}

TEST_CASE("fixtures: every recorded stream fed one byte at a time gives the same events",
          "[sse][fixtures]") {
    for (const auto& stream : streams()) {
        INFO(stream.name);
        const Parsed reference = parse_whole(stream.wire);
        REQUIRE(parse_bytewise(stream.wire) == reference);
        REQUIRE(parse_random_chunks(stream.wire, 1) == reference);
        REQUIRE(parse_random_chunks(stream.wire, 2) == reference);
    }
}

TEST_CASE("fixtures: every recorded stream split in two gives the same events", "[sse][fixtures]") {
    // Re-parsing the whole stream for every split would cost size^2 (80 GB here). Instead the
    // stream is cut into its event blocks (each ending with a blank line), and for a split at
    // offset k the block holding k is re-parsed split at k (together with the block before it
    // when k is within 64 bytes of the block start). A parser carries nothing but the last
    // event id from one block to the next (these streams have no ids), and the blocks parsed
    // one by one must give exactly the whole stream's events. Offsets: every one up to 64 KiB,
    // beyond that the first and last 4 KiB and every 97th between. The whole stream is also split
    // at its first and last 16 offsets and 16 between.
    std::size_t splits = 0;
    for (const auto& stream : streams()) {
        INFO(stream.name);
        const std::string_view wire = stream.wire;
        const Parsed reference = parse_whole(wire);

        const std::vector<std::size_t> bounds = block_bounds(wire);
        std::vector<Parsed> blocks;
        Parsed joined;
        for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
            blocks.push_back(parse_whole(wire.substr(bounds[b], bounds[b + 1] - bounds[b])));
            joined.events.insert(joined.events.end(), blocks.back().events.begin(),
                                 blocks.back().events.end());
            if (b + 2 < bounds.size()) REQUIRE(blocks.back().end.clean());
        }
        joined.end = blocks.empty() ? SseStreamEnd{} : blocks.back().end;
        REQUIRE(joined == reference);

        const std::vector<std::size_t> offsets = split_offsets(wire.size());
        auto offset = offsets.begin();
        for (std::size_t b = 0; b < blocks.size(); ++b) {
            const std::size_t block_end = bounds[b + 1];
            const std::string_view block = wire.substr(bounds[b], block_end - bounds[b]);
            // Splits just after the block start also carry the previous block (the chunk
            // before the split then ends with a blank line plus a few bytes).
            const std::size_t pair_start = bounds[b == 0 ? 0 : b - 1];
            const std::string_view pair = wire.substr(pair_start, block_end - pair_start);
            Parsed pair_expected = blocks[b];
            if (b > 0) {
                pair_expected.events.insert(pair_expected.events.begin(),
                                            blocks[b - 1].events.begin(),
                                            blocks[b - 1].events.end());
            }
            const bool last = b + 1 == blocks.size();
            for (; offset != offsets.end() && (*offset < block_end || last); ++offset) {
                ++splits;
                const bool near_start = *offset - bounds[b] < 64;
                const bool same = near_start
                                      ? split_matches(pair, *offset - pair_start, pair_expected)
                                      : split_matches(block, *offset - bounds[b], blocks[b]);
                if (!same)
                    FAIL("split at offset " << *offset << " (block from " << bounds[b] << ")");
            }
        }

        std::vector<std::size_t> whole_offsets;
        for (std::size_t k = 0; k <= std::min<std::size_t>(16, wire.size()); ++k) {
            whole_offsets.push_back(k);
            whole_offsets.push_back(wire.size() - k);
        }
        for (std::size_t k = 0; k <= wire.size(); k += wire.size() / 16 + 1) {
            whole_offsets.push_back(k);
        }
        for (const std::size_t k : whole_offsets) {
            ++splits;
            if (!split_matches(wire, k, reference)) FAIL("whole stream split at offset " << k);
        }
    }
    INFO(splits << " splits");
    CHECK(splits > 0);
}

}  // namespace fixture_stream_test
