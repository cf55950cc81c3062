// The same bytes give the same result however they are chunked: the SSE parser and the NDJSON
// and JSON-array splitters yield the same events, or fail with the same error, whether a stream
// arrives in one write, in two pieces split at any byte, or one byte at a time — size bounds and
// a leading BOM included.

#include <ullm/core/error.hpp>
#include <ullm/http/line_splitter.hpp>
#include <ullm/http/sse_parser.hpp>

#include "support/catch.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace stream_chunking_test {

namespace {

constexpr std::size_t bound = 16;
const std::string bom = "\xEF\xBB\xBF";

// What feeding `pieces` (then finishing) produced, as one comparable text.
template <class Feed, class Finish>
std::string outcome(const std::vector<std::string_view>& pieces, Feed&& feed, Finish&& finish) {
    std::string out;
    try {
        for (const auto piece : pieces) feed(piece, out);
        finish(out);
    } catch (const ullm::Error& error) {
        out += "error: " + std::string(error.what());
    }
    return out;
}

std::string sse(const std::vector<std::string_view>& pieces) {
    ullm::SseParser parser(bound);
    return outcome(
        pieces,
        [&](std::string_view piece, std::string& out) {
            parser.feed(piece, [&](ullm::SseEvent&& event) {
                out += "[" + event.event + "|" + event.data + "|" + event.id + "]";
            });
        },
        [&](std::string& out) { out += parser.finish().clean() ? " clean" : " partial"; });
}

std::string ndjson(const std::vector<std::string_view>& pieces) {
    ullm::NdjsonSplitter splitter(bound);
    return outcome(
        pieces,
        [&](std::string_view piece, std::string& out) {
            splitter.feed(piece,
                          [&](std::string_view line) { out += "[" + std::string(line) + "]"; });
        },
        [&](std::string& out) { out += " last:" + splitter.finish().value_or("-"); });
}

std::string json_array(const std::vector<std::string_view>& pieces) {
    ullm::JsonArrayStreamSplitter splitter(bound);
    return outcome(
        pieces,
        [&](std::string_view piece, std::string& out) {
            splitter.feed(
                piece, [&](std::string_view element) { out += "[" + std::string(element) + "]"; });
        },
        [&](std::string& out) { out += splitter.finish() ? " complete" : " truncated"; });
}

// Checks that every chunking of `text` gives what one write gives; returns that.
template <class Run>
std::string same_however_chunked(const std::string& text, Run&& run) {
    const std::string whole = run({text});
    for (std::size_t at = 0; at <= text.size(); ++at) {
        const std::string_view view = text;
        INFO("split at byte " << at << " of " << text.size());
        CHECK(run({view.substr(0, at), view.substr(at)}) == whole);
    }
    std::vector<std::string_view> bytes;
    for (std::size_t i = 0; i < text.size(); ++i)
        bytes.push_back(std::string_view(text).substr(i, 1));
    CHECK(run(bytes) == whole);
    return whole;
}

}  // namespace

TEST_CASE("sse: size bounds and a BOM do not depend on chunking", "[sse][chunking]") {
    const std::string at_bound = "data:" + std::string(bound - 5, 'a');  // a line of `bound`
    const std::string over = at_bound + "a";
    // A BOM is not part of the first line, so it never counts toward the bound.
    CHECK(same_however_chunked(bom + at_bound + "\n\n", sse) ==
          "[message|" + std::string(bound - 5, 'a') + "|] clean");
    CHECK(same_however_chunked(at_bound + "\n\n", sse) ==
          "[message|" + std::string(bound - 5, 'a') + "|] clean");
    CHECK(same_however_chunked(bom + over + "\n\n", sse).find("error:") != std::string::npos);
    CHECK(same_however_chunked("data: x\n\n" + over + "\n\n", sse).find("[message|x|]error:") == 0);
    // Data joined over lines is bounded as a whole.
    CHECK(same_however_chunked("data:12345678\ndata:12345678\n\n", sse).find("error:") !=
          std::string::npos);
    // An unterminated line over the bound fails; one within it is a partial line.
    CHECK(same_however_chunked(over, sse).find("error:") != std::string::npos);
    CHECK(same_however_chunked(at_bound, sse) == " partial");
    // A BOM is stripped only at the very start.
    CHECK(same_however_chunked("\n" + bom + "data:x\n\n", sse) == " clean");
    CHECK(same_however_chunked(bom + bom + "data:x\n\n", sse) == " clean");
    CHECK(same_however_chunked("\xEF\xBB"
                               "data:x\n\n",
                               sse) == " clean");
    CHECK(same_however_chunked(bom + "data:x\r\n\r\n", sse) == "[message|x|] clean");
}

TEST_CASE("ndjson: the line bound and a BOM do not depend on chunking", "[ndjson][chunking]") {
    const std::string at_bound(bound, '1');
    CHECK(same_however_chunked(bom + at_bound + "\n", ndjson) == "[" + at_bound + "] last:-");
    CHECK(same_however_chunked(at_bound + "\r\n", ndjson).find("error:") != std::string::npos);
    CHECK(same_however_chunked("{}\n" + at_bound + "1\n", ndjson).find("[{}]error:") == 0);
    CHECK(same_however_chunked(bom + at_bound + "1\n", ndjson).find("error:") != std::string::npos);
    CHECK(same_however_chunked(at_bound, ndjson) == " last:" + at_bound);
    CHECK(same_however_chunked("{}\n" + bom + "[]\n", ndjson) == "[{}][" + bom + "[]] last:-");
    CHECK(same_however_chunked("\xEF\xBB{}\n", ndjson) == "[\xEF\xBB{}] last:-");
}

TEST_CASE("json array: the element bound does not depend on chunking", "[json-array][chunking]") {
    const std::string at_bound = "\"" + std::string(bound - 2, 's') + "\"";
    CHECK(same_however_chunked(bom + "[" + at_bound + "]", json_array) ==
          "[" + at_bound + "] complete");
    CHECK(same_however_chunked("[" + std::string(bound, '7') + "]", json_array) ==
          "[" + std::string(bound, '7') + "] complete");
    CHECK(
        same_however_chunked("[" + std::string(bound + 1, '7') + "]", json_array).find("error:") !=
        std::string::npos);
    CHECK(same_however_chunked("[1,{\"k\":\"" + std::string(bound, 'v') + "\"}]", json_array)
              .find("[1]error:") == 0);
    // A malformed byte past the bound is never reached: the bound fails first, every way.
    const std::string late_mismatch = "[{\"a\":[" + std::string(bound, '0') + "}]";
    CHECK(same_however_chunked(late_mismatch, json_array).find("longer than") != std::string::npos);
    CHECK(same_however_chunked("[{\"a\":1]}]", json_array).find("mismatched") != std::string::npos);
}

}  // namespace stream_chunking_test
