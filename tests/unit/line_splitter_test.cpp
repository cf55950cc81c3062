#include <ullm/http/line_splitter.hpp>

#include <ullm/core/json.hpp>

#include "support/catch.hpp"
#include "support/fixtures.hpp"

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace line_splitter_test {

namespace {

using ullm::JsonArrayStreamSplitter;
using ullm::NdjsonSplitter;
using Strings = std::vector<std::string>;

template <class Splitter>
Strings split(Splitter& splitter, std::initializer_list<std::string_view> chunks) {
    Strings out;
    for (const auto chunk : chunks) {
        for (auto& item : splitter.feed(chunk)) out.push_back(std::move(item));
    }
    return out;
}

Strings ndjson(std::initializer_list<std::string_view> chunks) {
    NdjsonSplitter splitter;
    return split(splitter, chunks);
}

Strings array(std::initializer_list<std::string_view> chunks) {
    JsonArrayStreamSplitter splitter;
    Strings out = split(splitter, chunks);
    CHECK(splitter.finish());
    return out;
}

template <class Splitter>
Strings split_at(std::string_view text, std::size_t offset) {
    Splitter splitter;
    return split(splitter, {text.substr(0, offset), text.substr(offset)});
}

template <class Splitter>
Strings split_bytewise(std::string_view text) {
    Splitter splitter;
    Strings out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        for (auto& item : splitter.feed(text.substr(i, 1))) out.push_back(std::move(item));
    }
    return out;
}

/// Every offset of short texts; for long ones the first and last 256 and about 64 between.
std::vector<std::size_t> split_offsets(std::size_t size) {
    std::vector<std::size_t> offsets;
    const std::size_t edge = 256;
    if (size <= 4 * edge) {
        for (std::size_t i = 0; i <= size; ++i) offsets.push_back(i);
        return offsets;
    }
    for (std::size_t i = 0; i <= edge; ++i) offsets.push_back(i);
    const std::size_t stride = (size - 2 * edge) / 64 + 1;
    for (std::size_t i = edge + 1; i < size - edge; i += stride) offsets.push_back(i);
    for (std::size_t i = size - edge; i <= size; ++i) offsets.push_back(i);
    return offsets;
}

void check_malformed(std::string_view body) {
    INFO("body: " << body);
    JsonArrayStreamSplitter splitter;
    try {
        (void)splitter.feed(body);
        FAIL("expected ProviderError");
    } catch (const ullm::ProviderError& error) {
        CHECK(error.code() == "invalid_provider_response");
        CHECK(error.status() == 502);
        CHECK_FALSE(error.retryable());
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// NdjsonSplitter

TEST_CASE("ndjson: lines end with LF", "[ndjson]") {
    CHECK(ndjson({"{\"a\":1}\n{\"b\":2}\n"}) == Strings{"{\"a\":1}", "{\"b\":2}"});
}

TEST_CASE("ndjson: the CR of CRLF is dropped, also when split from its LF", "[ndjson]") {
    CHECK(ndjson({"{}\r\n[]\r\n"}) == Strings{"{}", "[]"});
    CHECK(ndjson({"{}\r", "\n[]\r", "\n"}) == Strings{"{}", "[]"});
}

TEST_CASE("ndjson: blank and whitespace-only lines are skipped", "[ndjson]") {
    CHECK(ndjson({"\n\n{}\n  \n\t\r\n\r\n[]\n\n"}) == Strings{"{}", "[]"});
}

TEST_CASE("ndjson: inner and leading whitespace of a line is kept", "[ndjson]") {
    CHECK(ndjson({"  { \"a\" : 1 }\n"}) == Strings{"  { \"a\" : 1 }"});
}

TEST_CASE("ndjson: a line split across chunks is joined", "[ndjson]") {
    CHECK(ndjson({"{\"mess", "age\":", "\"hi\"}", "\n{}", "\n"}) ==
          Strings{"{\"message\":\"hi\"}", "{}"});
}

TEST_CASE("ndjson: a UTF-8 BOM at the start is skipped", "[ndjson]") {
    CHECK(ndjson({"\xEF\xBB", "\xBF{}\n"}) == Strings{"{}"});
    CHECK(ndjson({"{}\n\xEF\xBB\xBF[]\n"}) == Strings{"{}", "\xEF\xBB\xBF[]"});
}

TEST_CASE("ndjson: finish returns a final line that has no newline", "[ndjson]") {
    NdjsonSplitter splitter;
    CHECK(splitter.feed("{\"done\":false}\n{\"done\":true}") == Strings{"{\"done\":false}"});
    CHECK(splitter.has_partial_line());
    const auto tail = splitter.finish();
    REQUIRE(tail.has_value());
    CHECK(*tail == "{\"done\":true}");
    CHECK(ullm::json::accept(*tail));  // complete: the caller keeps it
    CHECK_FALSE(splitter.has_partial_line());
    CHECK_FALSE(splitter.finish().has_value());
}

TEST_CASE("ndjson: a truncated final line is returned and fails to parse", "[ndjson]") {
    NdjsonSplitter splitter;
    CHECK(splitter.feed("{\"done\":false}\n{\"done\":tr").size() == 1);
    const auto tail = splitter.finish();
    REQUIRE(tail.has_value());
    CHECK_FALSE(ullm::json::accept(*tail));  // the caller raises stream_truncated
}

TEST_CASE("ndjson: finish has nothing after a final newline or a blank tail", "[ndjson]") {
    NdjsonSplitter splitter;
    CHECK(splitter.feed("{}\n  \r").size() == 1);
    CHECK_FALSE(splitter.has_partial_line());
    CHECK_FALSE(splitter.finish().has_value());
}

TEST_CASE("ndjson: the callback form yields views of each line", "[ndjson]") {
    NdjsonSplitter splitter;
    Strings lines;
    splitter.feed("a\nb", [&](std::string_view line) { lines.emplace_back(line); });
    splitter.feed("c\n", [&](std::string_view line) { lines.emplace_back(line); });
    CHECK(lines == Strings{"a", "bc"});
}

TEST_CASE("ndjson: a line longer than the bound is rejected", "[ndjson]") {
    NdjsonSplitter splitter(8);
    CHECK(splitter.feed("12345678\n1234") == Strings{"12345678"});
    try {
        (void)splitter.feed("56789");
        FAIL("expected ProviderError");
    } catch (const ullm::ProviderError& error) {
        CHECK(error.code() == "invalid_provider_response");
        CHECK(error.status() == 502);
    }
}

TEST_CASE("ndjson: a 1 MiB line fed one byte at a time takes linear time", "[ndjson][perf]") {
    std::string text = "{\"s\":\"" + std::string(std::size_t{1} << 20, 'x') + "\"}\n";
    const auto start = std::chrono::steady_clock::now();
    const Strings lines = split_bytewise<NdjsonSplitter>(text);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].size() == text.size() - 1);
}

TEST_CASE("ndjson: recorded streams split anywhere give the same lines", "[ndjson][fixtures]") {
    // No NDJSON is recorded; the Chat Completions payload lines make a realistic stream.
    for (const auto& file : ullm::test::fixture_files("openai-compatible", ".chunks.txt")) {
        const std::string text = ullm::test::read_file(file);
        Strings expected;
        std::string crlf;
        for (const auto line : ullm::test::chunk_lines(text)) {
            expected.emplace_back(line);
            crlf.append(line).append("\r\n");
        }
        INFO(file.string());
        NdjsonSplitter whole;
        CHECK(whole.feed(text + "\n") == expected);
        CHECK(split_bytewise<NdjsonSplitter>(crlf) == expected);
        for (const std::size_t offset : split_offsets(crlf.size())) {
            INFO("offset " << offset);
            REQUIRE(split_at<NdjsonSplitter>(crlf, offset) == expected);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JsonArrayStreamSplitter

TEST_CASE("json array: yields each top-level element's text", "[json-array]") {
    CHECK(array({"[{\"a\":1},{\"b\":[2,3]}]"}) == Strings{"{\"a\":1}", "{\"b\":[2,3]}"});
}

TEST_CASE("json array: Gemini's layout with newlines and CRLF between elements", "[json-array]") {
    const std::string body = "[{\n  \"candidates\": []\n}\n,\r\n{\n  \"usage\": {}\n}\n]";
    CHECK(array({body}) == Strings{"{\n  \"candidates\": []\n}", "{\n  \"usage\": {}\n}"});
}

TEST_CASE("json array: an empty array yields nothing and is complete", "[json-array]") {
    CHECK(array({"[]"}).empty());
    CHECK(array({" \r\n[ \n ] \n"}).empty());
}

TEST_CASE("json array: brackets, braces and commas inside strings are text", "[json-array]") {
    const std::string element = R"({"t":"a],[b}{c,\"d\"]","u":"}"})";
    CHECK(array({"[" + element + "," + element + "]"}) == Strings{element, element});
}

TEST_CASE("json array: escaped quotes and backslashes inside strings", "[json-array]") {
    const std::string a = R"({"s":"say \"hi\""})";
    const std::string b = R"({"s":"ends with backslash \\"})";
    const std::string c = R"({"s":"\\\"]}\\"})";
    const std::string d = R"({"s":"\u005d\/"})";
    CHECK(array({"[" + a + "," + b + "," + c + "," + d + "]"}) == Strings{a, b, c, d});
    // The same split before and after every backslash.
    const std::string body = "[" + c + "]";
    for (std::size_t i = 0; i <= body.size(); ++i) {
        INFO("split at " << i);
        REQUIRE(split_at<JsonArrayStreamSplitter>(body, i) == Strings{c});
    }
}

TEST_CASE("json array: nested arrays and objects are one element", "[json-array]") {
    CHECK(array({R"([[1,[2,{"a":[3]}]],{"b":{"c":[]}}])"}) ==
          Strings{R"([1,[2,{"a":[3]}]])", R"({"b":{"c":[]}})"});
}

TEST_CASE("json array: string and scalar elements", "[json-array]") {
    CHECK(array({R"([1, "a,]", true,null ,-2.5e+3])"}) ==
          Strings{"1", "\"a,]\"", "true", "null", "-2.5e+3"});
    CHECK(array({"[1", "2", ",3", "]"}) == Strings{"12", "3"});
}

TEST_CASE("json array: an element split across chunks is joined", "[json-array]") {
    CHECK(array({"[{\"a\"", ":\"x", "y\"}", ",", "{}", "]"}) == Strings{"{\"a\":\"xy\"}", "{}"});
}

TEST_CASE("json array: a UTF-8 BOM before the array is skipped", "[json-array]") {
    CHECK(array({"\xEF", "\xBB\xBF", "[{}]"}) == Strings{"{}"});
}

TEST_CASE("json array: whitespace after the closing bracket is allowed", "[json-array]") {
    JsonArrayStreamSplitter splitter;
    CHECK(splitter.feed("[{}]\r\n  ") == Strings{"{}"});
    CHECK(splitter.complete());
    CHECK(splitter.feed(" \n").empty());
    CHECK(splitter.finish());
}

TEST_CASE("json array: malformed structure is an invalid provider response", "[json-array]") {
    for (const std::string_view body :
         {"{}", "x[", "]", "[,{}]", "[{},]", "[{},,{}]", "[{} {}]", "[{}{}]", "[{]}", "[[}]",
          "[{}}", "[}", "[:]", "[{}]x", "[{}] []", "[1 2]", "[tru\"e\"]", "\xEF\xBB[]",
          " \xEF\xBB\xBF[]"}) {
        check_malformed(body);
    }
}

TEST_CASE("json array: malformed structure is caught across chunk boundaries", "[json-array]") {
    JsonArrayStreamSplitter splitter;
    CHECK(splitter.feed("[{\"a\":1}").size() == 1);
    CHECK_THROWS_AS(splitter.feed(" {"), ullm::ProviderError);
}

TEST_CASE("json array: a truncated array is reported by finish", "[json-array]") {
    for (const std::string_view body : {"", "  ", "[", "[{}", "[{},", "[{\"a\":\"]", "[1"}) {
        INFO("body: " << body);
        JsonArrayStreamSplitter splitter;
        (void)splitter.feed(body);
        CHECK_FALSE(splitter.complete());
        CHECK_FALSE(splitter.finish());
    }
}

TEST_CASE("json array: finish resets the splitter for a new stream", "[json-array]") {
    JsonArrayStreamSplitter splitter;
    CHECK(splitter.feed("[{}") == Strings{"{}"});
    CHECK_FALSE(splitter.finish());
    CHECK(splitter.feed("[[]]") == Strings{"[]"});
    CHECK(splitter.finish());
}

TEST_CASE("json array: an element longer than the bound is rejected", "[json-array]") {
    JsonArrayStreamSplitter splitter(8);
    CHECK(splitter.feed("[{\"a\":1},{\"b\":") == Strings{"{\"a\":1}"});
    CHECK_THROWS_AS(splitter.feed("\"0123456789\"}]"), ullm::ProviderError);
}

TEST_CASE("json array: a 1 MiB element fed one byte at a time takes linear time",
          "[json-array][perf]") {
    const std::string element = "{\"s\":\"" + std::string(std::size_t{1} << 20, ']') + "\"}";
    const std::string body = "[" + element + "]";
    const auto start = std::chrono::steady_clock::now();
    const Strings elements = split_bytewise<JsonArrayStreamSplitter>(body);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    REQUIRE(elements.size() == 1);
    CHECK(elements[0] == element);
}

TEST_CASE("json array: recorded Gemini streams split anywhere give the same elements",
          "[json-array][fixtures]") {
    // The recorded Gemini streams are `alt=sse`; the same payloads as a streamed array are what
    // streamGenerateContent sends without it.
    for (const auto& file : ullm::test::fixture_files("gemini", ".chunks.txt")) {
        const std::string text = ullm::test::read_file(file);
        if (ullm::test::looks_like_sse_wire(text)) continue;
        Strings expected;
        std::string body = "[";
        for (const auto line : ullm::test::chunk_lines(text)) {
            if (expected.size() > 0) body += "\n,\r\n";
            expected.emplace_back(line);
            body.append(line);
        }
        body += "\n]";
        INFO(file.string());
        for (const auto& element : expected) CHECK(ullm::json::accept(element));
        CHECK(array({body}) == expected);
        CHECK(split_bytewise<JsonArrayStreamSplitter>(body) == expected);
        for (const std::size_t offset : split_offsets(body.size())) {
            INFO("offset " << offset);
            REQUIRE(split_at<JsonArrayStreamSplitter>(body, offset) == expected);
        }
    }
}

}  // namespace line_splitter_test
