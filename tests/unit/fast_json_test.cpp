// The fast JSON reader against nlohmann's: for every document it accepts, the same value with the
// same types (`parse_json_fast`) and the same SAX events in the same order (`sax_parse_fast`);
// everything nlohmann refuses, declined. Hand-picked edge cases, every JSON file of the recorded
// provider traffic and of the JSON Schema Test Suite, each chunk payload of the recorded streams,
// and seeded mutations of all of those.

#include <ullm/detail/json_checks.hpp>

#include "../../src/core/fast_json.hpp"

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/fixtures.hpp"
#include "support/same_json.hpp"
#include "support/sax_recorder.hpp"

namespace fast_json_test {

using ullm::json;
using ullm::detail::parse_json_fast;
using ullm::test::sax_verdict;

namespace {

// What the fast parser does with `text`: "declined", or "same" when it agrees with nlohmann, or
// what went wrong.
std::string verdict(const std::string& text) {
    const json reference = json::parse(text, nullptr, false);
    const auto fast = parse_json_fast(text);
    if (!fast) return "declined";
    if (reference.is_discarded()) return "accepted what nlohmann refuses";
    return ullm::test::same_json(*fast, reference)
               ? "same"
               : "differs: " + fast->dump() + " vs " + reference.dump();
}

std::vector<std::string> corpus() {
    std::vector<std::string> documents;
    for (const auto& file : ullm::test::fixture_files("", ".json")) {
        documents.push_back(ullm::test::read_file(file));
    }
    for (const auto& stream : ullm::test::recorded_sse_streams()) {
        for (const auto& payload : stream.payloads) documents.push_back(payload);
    }
    const std::filesystem::path suite = "/usr/share/json-schema-test-suite/tests/draft7";
    if (std::filesystem::is_directory(suite)) {
        for (const auto& entry : std::filesystem::recursive_directory_iterator(suite)) {
            if (entry.path().extension() == ".json") {
                documents.push_back(ullm::test::read_file(entry.path()));
            }
        }
    }
    return documents;
}

}  // namespace

TEST_CASE("the fast JSON parser builds what nlohmann builds", "[json_checks][fast_json]") {
    const std::vector<std::string> accepted = {"0",
                                               "-0",
                                               "1",
                                               "-1",
                                               "18446744073709551615",
                                               "-9223372036854775808",
                                               "9223372036854775808",
                                               "1.5",
                                               "-0.0",
                                               "1e3",
                                               "1E-3",
                                               "2.5e+10",
                                               "0.1",
                                               "1e-320",
                                               "123456789012345678.25",
                                               "4.9406564584124654e-324",
                                               "1.7976931348623157e308",
                                               "true",
                                               "false",
                                               "null",
                                               R"("")",
                                               R"("plain")",
                                               R"("\"\\\/\b\f\n\r\t")",
                                               R"("\u0041\u00e9\u20AC\ud83d\ude00")",
                                               R"("\u0000 inside")",
                                               "\"K\xC3\xB6ln \xF0\x9F\x8C\xA6\"",
                                               "\"\x7F\"",
                                               "[]",
                                               "{}",
                                               " [ 1 , [ ] , { } , \"x\" ] ",
                                               "\t\r\n{\"a\" : 1}\n",
                                               R"({"a":1,"a":2})",
                                               R"({"b":{"x":1},"b":[2]})",
                                               R"({"z":1,"a":2,"m":[{"k":null}]})",
                                               R"([[[[[[[[[[1]]]]]]]]]])",
                                               R"({"":""})"};
    for (const auto& text : accepted) {
        INFO(text);
        CHECK(verdict(text) == "same");
        CHECK(sax_verdict(text) == "same");
    }

    const std::vector<std::string> refused = {"",
                                              " ",
                                              "01",
                                              "-",
                                              "+1",
                                              "1.",
                                              ".5",
                                              "1e",
                                              "1e+",
                                              "0x10",
                                              "--1",
                                              "1 2",
                                              "[1,]",
                                              "[,1]",
                                              "{,}",
                                              R"({"a":1,})",
                                              R"({"a" 1})",
                                              R"({a:1})",
                                              "{'a':1}",
                                              "[1",
                                              "{\"a\":1",
                                              "\"open",
                                              "\"\\x\"",
                                              "\"\\u12\"",
                                              "\"\\u12G4\"",
                                              R"("\ud83d")",
                                              R"("\ude00")",
                                              R"("\ud83d\u0041")",
                                              "\"tab\there\"",
                                              "\"\xFF\"",
                                              "\"\xC0\xAF\"",
                                              "\"\xED\xA0\x80\"",
                                              "\"\xC3\"",
                                              "tru",
                                              "nul",
                                              "True",
                                              "NaN",
                                              "Infinity",
                                              "[1]x",
                                              "{}{}"};
    for (const auto& text : refused) {
        INFO(text);
        CHECK(json::parse(text, nullptr, false).is_discarded());
        CHECK_FALSE(parse_json_fast(text).has_value());
        CHECK(sax_verdict(text) == "declined");
    }
    // A NUL byte, where nlohmann's lexer stops reading.
    CHECK(sax_verdict(std::string("[1]\0x", 5)) == "declined");
    CHECK(sax_verdict(std::string("\"a\0\"", 4)) == "declined");
}

TEST_CASE("the fast JSON parser leaves what it does not handle exactly to nlohmann",
          "[json_checks][fast_json]") {
    // Integers past 64 bits: nlohmann makes doubles of them.
    for (const std::string text :
         {"18446744073709551616", "-9223372036854775809", "123456789012345678901234567890"}) {
        INFO(text);
        CHECK_FALSE(parse_json_fast(text).has_value());
        CHECK(ullm::detail::parse_json_exact(text).is_number_float());
    }
    // A byte order mark, which nlohmann skips.
    CHECK_FALSE(parse_json_fast("\xEF\xBB\xBF[1]").has_value());
    CHECK(ullm::detail::parse_json_exact("\xEF\xBB\xBF[1]") == json::array({1}));
    // Nesting past 512 levels: declined, and nlohmann (no recursion) still parses it.
    const std::string deep = std::string(600, '[') + std::string(600, ']');
    CHECK_FALSE(parse_json_fast(deep).has_value());
    CHECK(ullm::detail::parse_json_exact(deep).is_array());
    const std::string within = std::string(512, '[') + std::string(512, ']');
    CHECK(verdict(within) == "same");
}

TEST_CASE("the strict fast parser also declines duplicate keys and nesting past its limit",
          "[json_checks][fast_json]") {
    using ullm::detail::parse_json_fast_strict;
    // What it accepts, it builds as the plain fast parser does.
    for (const std::string text : {R"({"a":1,"b":[true,null,{"c":"d"}],"e":-2.5})", "[]", "{}",
                                   R"("text")", "0", R"([{"a":1},{"a":2}])"}) {
        INFO(text);
        const auto strict = parse_json_fast_strict(text, 256);
        REQUIRE(strict.has_value());
        CHECK(ullm::test::same_json(*strict, *parse_json_fast(text)));
    }
    // A key named twice, at the top or deep inside: declined, where the plain parser keeps the
    // last value as nlohmann does.
    for (const std::string text : {R"({"a":1,"a":2})", R"({"x":[{"k":true,"j":0,"k":false}]})"}) {
        INFO(text);
        CHECK_FALSE(parse_json_fast_strict(text, 256).has_value());
        CHECK(parse_json_fast(text).has_value());
    }
    // A container may open inside at most `max_depth - 1` open ones, empty or not.
    const auto nested = [](std::size_t levels, const std::string& inner) {
        return std::string(levels - 1, '[') + "[" + inner + "]" + std::string(levels - 1, ']');
    };
    for (const std::string inner : {"", "1"}) {
        INFO("innermost: [" << inner << "]");
        CHECK(parse_json_fast_strict(nested(256, inner), 256).has_value());
        CHECK_FALSE(parse_json_fast_strict(nested(257, inner), 256).has_value());
        CHECK(parse_json_fast_strict(nested(3, inner), 3).has_value());
        CHECK_FALSE(parse_json_fast_strict(nested(4, inner), 3).has_value());
    }
    // A limit past the lexer's own is the lexer's.
    CHECK(parse_json_fast_strict(nested(512, ""), 100'000).has_value());
    CHECK_FALSE(parse_json_fast_strict(nested(513, ""), 100'000).has_value());
}

TEST_CASE("a string's special bytes are found wherever they fall in an eight-byte block",
          "[json_checks][fast_json]") {
    // The lexer scans strings a word at a time: every byte that ends a run (quote, backslash,
    // control character) or needs checking (UTF-8, valid or not) is placed at every offset of
    // a string long enough to span three words, after a run of plain ASCII.
    const std::vector<std::string> specials = {
        "\\\"", "\\\\",     "\\n",          "\\u00e9",          "\x01", "\x1f", "\x7f",
        " ",    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff", "\xc3", "\xed\xa0\x80",
        "\"",   "\\"};
    for (const auto& special : specials) {
        for (std::size_t before = 0; before < 24; ++before) {
            for (const std::size_t after : {std::size_t{0}, std::size_t{1}, std::size_t{9}}) {
                const std::string text =
                    "[\"" + std::string(before, 'a') + special + std::string(after, 'b') + "\",1]";
                INFO(text);
                const std::string found = verdict(text);
                const bool refused = json::parse(text, nullptr, false).is_discarded();
                // Refused input must be declined; accepted input built the same.
                CHECK(found == (refused ? "declined" : "same"));
            }
        }
    }
}

TEST_CASE("the fast JSON parser agrees with nlohmann on recorded traffic and its mutations",
          "[json_checks][fast_json]") {
    const std::vector<std::string> documents = corpus();
    REQUIRE(documents.size() > 500);
    std::size_t fast = 0;
    std::size_t sax_fast = 0;
    for (const auto& text : documents) {
        INFO(text.substr(0, 200));
        const std::string sax = sax_verdict(text);
        if (sax != "declined") {
            CHECK(sax == "same");
            ++sax_fast;
        }
        const std::string result = verdict(text);
        if (result == "declined") continue;  // broken on purpose, or an integer past 64 bits
        CHECK(result == "same");
        ++fast;
    }
    CHECK(fast > documents.size() * 95 / 100);
    CHECK(sax_fast == fast);

    // Seeded mutations: a byte changed, inserted, removed, or the text cut short.
    std::mt19937 random(20261205);
    const std::string alphabet = "{}[],:\"\\ntfe0123456789.-+u \xC3\xA9\xFF\x01";
    std::size_t mutations = 0;
    std::size_t disagreements = 0;
    for (const auto& original : documents) {
        if (original.empty() || original.size() > 20000) continue;
        for (int round = 0; round < 8; ++round) {
            std::string text = original;
            std::uniform_int_distribution<std::size_t> at(0, text.size() - 1);
            const char byte = alphabet[random() % alphabet.size()];
            switch (random() % 4) {
                case 0:
                    text[at(random)] = byte;
                    break;
                case 1:
                    text.insert(text.begin() + static_cast<std::ptrdiff_t>(at(random)), byte);
                    break;
                case 2:
                    text.erase(at(random), 1);
                    break;
                default:
                    text.resize(at(random));
                    break;
            }
            ++mutations;
            for (const std::string& result : {verdict(text), sax_verdict(text)}) {
                if (result != "same" && result != "declined") {
                    ++disagreements;
                    UNSCOPED_INFO(text.substr(0, 200) << ": " << result);
                }
            }
        }
    }
    CHECK(mutations > 4000);
    CHECK(disagreements == 0);
}

TEST_CASE("the fast SAX reader stops where its reader refuses, as nlohmann's does",
          "[json_checks][fast_json]") {
    std::size_t checked = 0;
    for (const auto& text : corpus()) {
        ullm::test::SaxRecorder all;
        if (!ullm::detail::sax_parse_fast(text, all)) continue;
        const std::size_t count = all.events.size();
        for (const std::size_t refuse_at : {std::size_t{1}, std::size_t{2}, count / 2, count}) {
            if (refuse_at == 0) continue;
            INFO(text.substr(0, 200) << " refused at " << refuse_at);
            CHECK(sax_verdict(text, refuse_at) == "same");
            ++checked;
        }
    }
    CHECK(checked > 2000);
}

}  // namespace fast_json_test
