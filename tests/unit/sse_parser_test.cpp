#include <ullm/http/sse_parser.hpp>

#include "support/catch.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace sse_parser_test {

namespace {

using ullm::SseEvent;
using ullm::SseParser;
using ullm::SseStreamEnd;

/// Feeds `chunks` in order to one parser and returns every event.
std::vector<SseEvent> parse(std::initializer_list<std::string_view> chunks) {
    SseParser parser;
    std::vector<SseEvent> events;
    for (const auto chunk : chunks) {
        for (auto& event : parser.feed(chunk)) events.push_back(std::move(event));
    }
    return events;
}

std::vector<SseEvent> parse(std::string_view stream) {
    return parse({stream});
}

SseEvent message(std::string data, std::string event = "message", std::string id = {}) {
    return SseEvent{std::move(event), std::move(data), std::move(id), std::nullopt};
}

}  // namespace

TEST_CASE("sse: a data line and a blank line dispatch a message event", "[sse]") {
    CHECK(parse("data: hello\n\n") == std::vector<SseEvent>{message("hello")});
}

TEST_CASE("sse: several data lines are joined with a line feed", "[sse]") {
    CHECK(parse("data: one\ndata: two\ndata: three\n\n") ==
          std::vector<SseEvent>{message("one\ntwo\nthree")});
}

TEST_CASE("sse: only the final line feed of the data buffer is removed", "[sse]") {
    CHECK(parse("data: a\ndata:\n\n") == std::vector<SseEvent>{message("a\n")});
    CHECK(parse("data:\ndata:\n\n") == std::vector<SseEvent>{message("\n")});
}

TEST_CASE("sse: the event field sets the type of one event only", "[sse]") {
    const auto events = parse("event: ping\ndata: 1\n\ndata: 2\n\n");
    CHECK(events == std::vector<SseEvent>{message("1", "ping"), message("2")});
}

TEST_CASE("sse: the last event field of a block wins", "[sse]") {
    CHECK(parse("event: a\nevent: b\ndata: x\n\n") == std::vector<SseEvent>{message("x", "b")});
}

TEST_CASE("sse: an empty event field means the default type", "[sse]") {
    CHECK(parse("event:\ndata: x\n\n") == std::vector<SseEvent>{message("x")});
}

TEST_CASE("sse: a blank line without data dispatches nothing and resets the type", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("event: lonely\n\n").empty());
    CHECK(parser.feed("\n\n\n").empty());
    CHECK(parser.feed("data: x\n\n") == std::vector<SseEvent>{message("x")});
}

TEST_CASE("sse: an id persists across events until changed", "[sse]") {
    const auto events = parse("id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\nid\ndata: d\n\n");
    REQUIRE(events.size() == 4);
    CHECK(events[0].id == "1");
    CHECK(events[1].id == "1");
    CHECK(events[2].id == "2");
    CHECK(events[3].id.empty());  // `id` with no value resets it
}

TEST_CASE("sse: an id containing NUL is ignored", "[sse]") {
    using namespace std::string_view_literals;
    SseParser parser;
    const auto events = parser.feed("id: good\ndata: a\n\nid: b\0d\ndata: b\n\n"sv);
    REQUIRE(events.size() == 2);
    CHECK(events[1].id == "good");
    CHECK(parser.last_event_id() == "good");
}

TEST_CASE("sse: the last event id updates at a blank line even without data", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("id: 7\n").empty());
    CHECK(parser.last_event_id().empty());  // not before the blank line
    CHECK(parser.feed("\n").empty());
    CHECK(parser.last_event_id() == "7");
}

TEST_CASE("sse: retry with only ASCII digits sets the reconnection time", "[sse]") {
    SseParser parser;
    CHECK_FALSE(parser.reconnection_time_ms().has_value());
    const auto events = parser.feed("retry: 1500\ndata: x\n\ndata: y\n\n");
    REQUIRE(events.size() == 2);
    CHECK(events[0].retry_ms == std::optional<std::int64_t>(1500));
    CHECK_FALSE(events[1].retry_ms.has_value());
    CHECK(parser.reconnection_time_ms() == std::optional<std::int64_t>(1500));
    CHECK(parser.feed("retry: 0\n\n").empty());  // retry alone does not dispatch
    CHECK(parser.reconnection_time_ms() == std::optional<std::int64_t>(0));
}

TEST_CASE("sse: retry with anything but digits is ignored", "[sse]") {
    for (const std::string_view bad :
         {"retry: 10a\n", "retry: -5\n", "retry: 1.5\n", "retry: +5\n", "retry:\n", "retry\n",
          "retry:  100\n", "retry: 100 \n", "retry: 99999999999999999999999\n"}) {
        SseParser parser;
        const auto events = parser.feed(std::string(bad) + "data: x\n\n");
        REQUIRE(events.size() == 1);
        INFO(bad);
        CHECK_FALSE(events[0].retry_ms.has_value());
        CHECK_FALSE(parser.reconnection_time_ms().has_value());
    }
}

TEST_CASE("sse: comment lines are ignored, even inside an event", "[sse]") {
    CHECK(parse(": keep-alive\n:\ndata: a\n: between\ndata: b\n\n") ==
          std::vector<SseEvent>{message("a\nb")});
    CHECK(parse(":only comments\n\n").empty());
}

TEST_CASE("sse: a field without a colon has an empty value", "[sse]") {
    CHECK(parse("data\n\n") == std::vector<SseEvent>{message("")});
    CHECK(parse("data\ndata\n\n") == std::vector<SseEvent>{message("\n")});
    CHECK(parse("event\ndata: x\n\n") == std::vector<SseEvent>{message("x")});
}

TEST_CASE("sse: only one leading space after the colon is removed", "[sse]") {
    CHECK(parse("data:x\n\n") == std::vector<SseEvent>{message("x")});
    CHECK(parse("data: x\n\n") == std::vector<SseEvent>{message("x")});
    CHECK(parse("data:  x \n\n") == std::vector<SseEvent>{message(" x ")});
    CHECK(parse("data:\tx\n\n") == std::vector<SseEvent>{message("\tx")});
}

TEST_CASE("sse: the value is everything after the first colon", "[sse]") {
    CHECK(parse("data: a:b: c\n\n") == std::vector<SseEvent>{message("a:b: c")});
}

TEST_CASE("sse: unknown and differently cased fields are ignored", "[sse]") {
    CHECK(parse("Data: x\nfoo: bar\ndata : y\n\n").empty());
    CHECK(parse("foo: bar\ndata: y\n\n") == std::vector<SseEvent>{message("y")});
}

TEST_CASE("sse: lines may end with LF, CR or CRLF, mixed in one stream", "[sse]") {
    const std::vector<SseEvent> expected{message("a\nb"), message("c")};
    CHECK(parse("data: a\ndata: b\n\ndata: c\n\n") == expected);
    CHECK(parse("data: a\rdata: b\r\rdata: c\r\r") == expected);
    CHECK(parse("data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n") == expected);
    CHECK(parse("data: a\rdata: b\r\n\ndata: c\n\r\n") == expected);
}

TEST_CASE("sse: a CRLF split across two chunks is one line end", "[sse]") {
    // Were the LF taken as a blank line, "a" would be dispatched on its own.
    CHECK(parse({"data: a\r", "\ndata: b\r\n\r\n"}) == std::vector<SseEvent>{message("a\nb")});
    CHECK(parse({"data: a\r\n\r", "\n"}) == std::vector<SseEvent>{message("a")});
    CHECK(parse({"data: a\r", "", "\n", "\r\n"}) == std::vector<SseEvent>{message("a")});
}

TEST_CASE("sse: a CR at the end of a chunk followed by CR is a blank line", "[sse]") {
    CHECK(parse({"data: a\r", "\r"}) == std::vector<SseEvent>{message("a")});
    CHECK(parse({"data: a\r", "data: b\r\r"}) == std::vector<SseEvent>{message("a\nb")});
}

TEST_CASE("sse: a UTF-8 BOM at the very start is skipped", "[sse]") {
    CHECK(parse("\xEF\xBB\xBF"
                "data: x\n\n") == std::vector<SseEvent>{message("x")});
    CHECK(parse({"\xEF", "\xBB", "\xBF", "data: x\n\n"}) == std::vector<SseEvent>{message("x")});
    CHECK(parse({"\xEF\xBB\xBF", "\n", "data: x\n\n"}) == std::vector<SseEvent>{message("x")});
}

TEST_CASE("sse: a BOM anywhere else is part of the line", "[sse]") {
    // The second BOM makes the field name "\xEF\xBB\xBF" "data": unknown, so ignored.
    CHECK(parse("data: a\n\n\xEF\xBB\xBF"
                "data: b\n\n") == std::vector<SseEvent>{message("a")});
    CHECK(parse("\xEF\xBB\xBF\xEF\xBB\xBF"
                "data: x\n\n")
              .empty());
    CHECK(parse("data: \xEF\xBB\xBFx\n\n") == std::vector<SseEvent>{message("\xEF\xBB\xBFx")});
}

TEST_CASE("sse: data bytes pass through unchanged, NUL and invalid UTF-8 included", "[sse]") {
    using namespace std::string_view_literals;
    const auto events = parse("data: a\0b\xFF\n\n"sv);
    REQUIRE(events.size() == 1);
    CHECK(events[0].data == "a\0b\xFF"sv);
}

TEST_CASE("sse: finish reports a partial event and discards it", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("data: done\n\ndata: cut\n").size() == 1);
    CHECK(parser.has_partial_event());
    CHECK_FALSE(parser.has_partial_line());
    const SseStreamEnd end = parser.finish();
    CHECK(end.partial_event);
    CHECK_FALSE(end.partial_line);
    CHECK_FALSE(end.clean());
    CHECK(parser.finish().clean());  // already discarded
}

TEST_CASE("sse: finish reports a partial line", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("data: a\n\ndata: cu").size() == 1);
    CHECK(parser.has_partial_line());
    CHECK_FALSE(parser.has_partial_event());  // the unterminated line was never processed
    CHECK(parser.finish() == SseStreamEnd{true, false});
}

TEST_CASE("sse: finish reports a clean end at an event boundary", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("data: a\n\n: trailing comment\n").size() == 1);
    CHECK(parser.finish().clean());
    SseParser empty;
    CHECK(empty.finish().clean());
    SseParser bom_only;
    CHECK(bom_only.feed("\xEF\xBB").empty());
    CHECK(bom_only.finish().clean());
    SseParser ignored_only;
    CHECK(ignored_only.feed("event: x\n\n").empty());
    CHECK(ignored_only.finish().clean());
}

TEST_CASE("sse: a stream cut right after CR has no partial line", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("data: a\r\r").size() == 1);
    CHECK(parser.finish().clean());
}

TEST_CASE("sse: after finish the parser reads a reconnected stream", "[sse]") {
    SseParser parser;
    CHECK(parser.feed("id: 41\nretry: 300\ndata: a\n\ndata: half").size() == 1);
    CHECK_FALSE(parser.finish().clean());
    CHECK(parser.last_event_id() == "41");
    const auto events = parser.feed(
        "\xEF\xBB\xBF"
        "data: b\n\nid: 42\ndata: c\n\n");
    CHECK(events ==
          std::vector<SseEvent>{message("b", "message", "41"), message("c", "message", "42")});
    CHECK(parser.reconnection_time_ms() == std::optional<std::int64_t>(300));
}

TEST_CASE("sse: the callback form yields the same events as the vector form", "[sse]") {
    const std::string stream = "event: e\nid: 1\ndata: a\n\n: c\ndata: b\n\n";
    SseParser by_callback;
    std::vector<SseEvent> called;
    by_callback.feed(stream, [&](SseEvent&& event) { called.push_back(std::move(event)); });
    CHECK(called == parse(stream));
}

TEST_CASE("sse: every chunking of a tricky stream gives the same events", "[sse]") {
    using namespace std::string_view_literals;
    const std::string_view stream =
        "\xEF\xBB\xBF: hi\r\nid: 1\rretry: 20\nevent: a\r\ndata: x\r\r"
        "data\ndata:  y\n\nid: b\0c\ndata: z\r\n\r\n"
        "event: q\nretry: x\ndata: w\n\n\n"sv;
    SseParser whole;
    const auto reference = whole.feed(stream);
    REQUIRE(reference.size() == 4);
    CHECK(reference[0] == SseEvent{"a", "x", "1", 20});
    CHECK(reference[1] == SseEvent{"message", "\n y", "1", std::nullopt});
    CHECK(reference[2] == message("z", "message", "1"));
    CHECK(reference[3] == message("w", "q", "1"));
    CHECK(whole.finish().clean());
    for (std::size_t i = 0; i <= stream.size(); ++i) {
        for (std::size_t j = i; j <= stream.size(); ++j) {
            SseParser parser;
            auto events = parser.feed(stream.substr(0, i));
            for (auto& e : parser.feed(stream.substr(i, j - i))) events.push_back(std::move(e));
            for (auto& e : parser.feed(stream.substr(j))) events.push_back(std::move(e));
            INFO("split at " << i << " and " << j);
            REQUIRE(events == reference);
            REQUIRE(parser.finish().clean());
        }
    }
}

TEST_CASE("sse: a long data line split over reads gives the same event however it is split",
          "[sse]") {
    // A held line past 64 KiB that starts an event's data becomes the data in place; one that
    // continues the data, or is not data, is read as any other line.
    std::string big(std::size_t{100} << 10, 'x');
    for (std::size_t i = 0; i < big.size(); i += 1000) big[i] = static_cast<char>('a' + i % 26);
    const std::string stream = "data: " + big + "\r\ndata:" + big + "\n: " + big +
                               "\nid: 7\n\ndata:" + big + "\n\ndata: tail\n\n";
    SseParser whole;
    const auto reference = whole.feed(stream);
    REQUIRE(reference.size() == 3);
    CHECK(reference[0] == message(big + "\n" + big, "message", "7"));
    CHECK(reference[1] == message(big, "message", "7"));
    CHECK(reference[2] == message("tail", "message", "7"));
    for (const std::size_t step :
         {std::size_t{1}, std::size_t{3}, std::size_t{4096}, std::size_t{70000}, big.size() + 3}) {
        SseParser parser;
        std::vector<SseEvent> events;
        for (std::size_t at = 0; at < stream.size(); at += step) {
            for (auto& event : parser.feed(std::string_view(stream).substr(at, step))) {
                events.push_back(std::move(event));
            }
        }
        INFO("reads of " << step << " bytes");
        CHECK(events == reference);
        CHECK(parser.finish().clean());
    }
}

TEST_CASE("sse: an event larger than the bound is rejected", "[sse]") {
    SECTION("data accumulated over many lines") {
        SseParser parser(16);
        CHECK(parser.feed("data: 0123456789\n").empty());
        try {
            (void)parser.feed("data: 0123456789\n");
            FAIL("expected ProviderError");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "invalid_provider_response");
            CHECK(error.status() == 502);
            CHECK_FALSE(error.retryable());
        }
    }
    SECTION("one endless line, even a comment") {
        SseParser parser(16);
        CHECK(parser.feed(": 01234567").empty());
        CHECK_THROWS_AS(parser.feed("89abcdefgh"), ullm::ProviderError);
    }
    SECTION("one long data line held over reads") {
        SseParser parser(std::size_t{100} << 10);
        const std::string line = "data: " + std::string(std::size_t{100} << 10, 'x');
        CHECK(parser.feed(std::string_view(line).substr(0, 70000)).empty());
        CHECK_THROWS_AS(parser.feed(std::string_view(line).substr(70000)), ullm::ProviderError);
    }
    SECTION("up to the bound is fine") {
        SseParser parser(15);  // the line is 15 bytes, the data 10
        CHECK(parser.feed("data:0123456789\n\n") == std::vector<SseEvent>{message("0123456789")});
    }
}

TEST_CASE("sse: a 1 MiB data line fed one byte at a time takes linear time", "[sse][perf]") {
    const std::size_t size = std::size_t{1} << 20;
    std::string stream = "data: ";
    stream.append(size, 'x');
    stream += "\n\n";
    SseParser parser;
    std::vector<SseEvent> events;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < stream.size(); ++i) {
        parser.feed(std::string_view(stream).substr(i, 1),
                    [&](SseEvent&& event) { events.push_back(std::move(event)); });
    }
    const auto elapsed = std::chrono::steady_clock::now() - start;
    REQUIRE(events.size() == 1);
    CHECK(events[0].data.size() == size);
    // Quadratic work would be ~5e11 byte operations: hours. Linear is well under a second.
    CHECK(elapsed < std::chrono::seconds(10));
}

TEST_CASE("sse: 100000 small events in one write take linear time", "[sse][perf]") {
    std::string stream;
    for (int i = 0; i < 100000; ++i) stream += "event: e\ndata: " + std::to_string(i) + "\n\n";
    SseParser parser;
    std::size_t count = 0;
    bool in_order = true;
    const auto start = std::chrono::steady_clock::now();
    parser.feed(stream, [&](SseEvent&& event) {
        in_order = in_order && event.data == std::to_string(count);
        ++count;
    });
    const auto elapsed = std::chrono::steady_clock::now() - start;
    CHECK(count == 100000);
    CHECK(in_order);
    CHECK(elapsed < std::chrono::seconds(10));
}

}  // namespace sse_parser_test
