#include <ullm/core/partial_json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "support/catch.hpp"

namespace partial_json_test {

using ullm::json;
using ullm::PartialJsonParser;

namespace {

// The value after feeding `text` one byte at a time.
json fed_bytewise(std::string_view text, bool finish = false) {
    PartialJsonParser parser;
    for (const char c : text) parser.feed(std::string_view(&c, 1));
    if (finish) (void)parser.finish();
    return parser.value();
}

// The value of `text` fed whole.
json fed_whole(std::string_view text) {
    PartialJsonParser parser;
    parser.feed(text);
    return parser.value();
}

const std::vector<std::string> documents = {
    R"({"name": "Ada", "age": 36, "tags": ["math", "poetry"], "address": null})",
    R"([1, -2.5, 3e2, 0, -0, 1E-3, 18446744073709551615, -9223372036854775808])",
    R"({"nested": {"deeper": {"deepest": [[], {}, [[true, false, null]]]}}})",
    R"({"escapes": "quote \" backslash \\ slash \/ \b\f\n\r\t \u00e9 \ud83d\ude00 \u0000"})",
    "{\"utf8\": \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
    R"("just a string")",
    R"({"dup": 1, "dup": 2})",
    " \n\t{ \"spaced\" : [ 1 , 2 ] } \n",
};

}  // namespace

TEST_CASE("complete JSON parses as json::parse does, however it is split", "[partial_json]") {
    for (const auto& text : documents) {
        INFO(text);
        const json expected = json::parse(text);
        for (std::size_t cut = 0; cut <= text.size(); ++cut) {
            PartialJsonParser parser;
            parser.feed(std::string_view(text).substr(0, cut));
            parser.feed(std::string_view(text).substr(cut));
            REQUIRE(parser.finish());
            REQUIRE(parser.value() == expected);
        }
        CHECK(fed_bytewise(text, true) == expected);
    }
    // A number at the top level ends with the text.
    PartialJsonParser number;
    number.feed("-12.5e1");
    CHECK(number.value().is_null());
    CHECK(number.finish());
    CHECK(number.value() == json(-125.0));
}

TEST_CASE("an unfinished value is shown closed, with unfinished scalars left out",
          "[partial_json]") {
    CHECK(fed_whole("").is_null());
    CHECK(fed_whole("{").is_object());
    CHECK(fed_whole(R"({"na)") == json::object());
    CHECK(fed_whole(R"({"name")") == json::object());
    CHECK(fed_whole(R"({"name": )") == json::object());
    CHECK(fed_whole(R"({"name": "Ad)") == json{{"name", "Ad"}});
    CHECK(fed_whole(R"({"name": "Ada", "age": 3)") == json{{"name", "Ada"}});
    CHECK(fed_whole(R"({"name": "Ada", "age": 36,)") == json{{"name", "Ada"}, {"age", 36}});
    CHECK(fed_whole(R"({"ok": tr)") == json::object());
    CHECK(fed_whole(R"({"ok": true)") == json::object());
    CHECK(fed_whole(R"({"ok": true})") == json{{"ok", true}});
    CHECK(fed_whole(R"({"list": [1, 2, {"x": "y)") ==
          json{{"list", json::array({1, 2, json{{"x", "y"}}})}});
    // An escape or a UTF-8 sequence cut short is held back until it is whole.
    CHECK(fed_whole(R"({"s": "a\)") == json{{"s", "a"}});
    CHECK(fed_whole(R"({"s": "a\u00)") == json{{"s", "a"}});
    CHECK(fed_whole(R"({"s": "a\ud83d)") == json{{"s", "a"}});
    CHECK(fed_whole("{\"s\": \"a\xe2\x82") == json{{"s", "a"}});
    // What is shown is always valid UTF-8.
    CHECK_NOTHROW(fed_whole("{\"s\": \"a\xf0\x9f\x98").dump());
}

TEST_CASE("the parser says when the value changed and when it is complete", "[partial_json]") {
    PartialJsonParser parser;
    CHECK_FALSE(parser.feed("  "));
    CHECK(parser.revision() == 0);
    CHECK(parser.feed("{\"a\""));
    CHECK(parser.revision() == 1);
    CHECK_FALSE(parser.feed(": 1"));  // the number has not ended
    CHECK(parser.feed("}"));
    CHECK(parser.complete());
    CHECK(parser.value() == json{{"a", 1}});
    CHECK(parser.finish());
    CHECK(parser.bytes() == 10);
}

TEST_CASE("a Markdown fence around the value is skipped", "[partial_json]") {
    PartialJsonParser parser;
    parser.feed("```json\n{\"a\": [1]}\n```\n");
    CHECK(parser.finish());
    CHECK(parser.value() == json{{"a", json::array({1})}});
    PartialJsonParser bare;
    bare.feed("```\n[true]```");
    CHECK(bare.finish());
    CHECK(bare.value() == json::array({true}));
}

TEST_CASE("the first syntax error stops the parser and says where", "[partial_json]") {
    const std::vector<std::string> broken = {
        "{a: 1}",
        "[1,]",
        "{\"a\": 1,}",
        "{\"a\" 1}",
        "[1 2]",
        "{\"a\": 01}",
        "[tru]",
        "[nul1]",
        "[\"\\x\"]",
        "[\"\\u12g4\"]",
        "[\"\\udc00\"]",
        "[\"\\ud800x\"]",
        "[\"a\nb\"]",
        "[\"\xff\"]",
        "[\"\xe0\x80\x80\"]",
        "[\"\xed\xa0\x80\"]",
        "{} extra",
        "Here it is: {}",
        "[1]]",
        "[-]",
    };
    for (const auto& text : broken) {
        INFO(text);
        PartialJsonParser parser;
        parser.feed(text);
        const bool finished = parser.finish();
        CHECK_FALSE(finished);
        CHECK(parser.failed());
        CHECK(parser.error().find(" at byte ") != std::string::npos);
        // json::parse refuses these too.
        CHECK(json::parse(text, nullptr, false).is_discarded());
    }
    PartialJsonParser parser;
    parser.feed("{\"a\": [1, 2], \"b\": x");
    CHECK(parser.failed());
    CHECK(parser.error() == "expected a JSON value at byte 19");
    // The value stays as it was when the error came.
    CHECK(parser.value() == json{{"a", json::array({1, 2})}});
    CHECK_FALSE(parser.feed("}"));
}

TEST_CASE("text that ends early, and nesting past the limit, are errors", "[partial_json]") {
    PartialJsonParser early;
    early.feed("{\"a\": [1");
    CHECK_FALSE(early.finish());
    CHECK(early.error() == "the text ended before the JSON value did at byte 8");
    PartialJsonParser deep(4);
    deep.feed("[[[[");
    CHECK_FALSE(deep.failed());
    deep.feed("[");
    CHECK(deep.failed());
    CHECK(deep.error() == "nesting deeper than 4 levels at byte 4");
}

}  // namespace partial_json_test
