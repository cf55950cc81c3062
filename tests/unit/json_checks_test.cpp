#include <ullm/detail/json_checks.hpp>

#include <limits>
#include <string>

#include "support/catch.hpp"

namespace json_checks_test {

using ullm::json;

TEST_CASE("the UTF-8 check accepts well-formed text only", "[json_checks]") {
    using ullm::detail::is_valid_utf8;
    CHECK(is_valid_utf8(""));
    CHECK(is_valid_utf8("plain ASCII"));
    CHECK(is_valid_utf8("Köln, 日本語, 🌦, \xF4\x8F\xBF\xBF"));  // U+10FFFF is the last one
    CHECK_FALSE(is_valid_utf8("\xC0\xAF"));                            // overlong '/'
    CHECK_FALSE(is_valid_utf8("\xE0\x80\xAF"));                        // overlong, three bytes
    CHECK_FALSE(is_valid_utf8("\xF0\x80\x80\xAF"));                    // overlong, four bytes
    CHECK_FALSE(is_valid_utf8("\xED\xA0\x80"));                        // a UTF-16 surrogate
    CHECK_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));                    // past U+10FFFF
    CHECK_FALSE(is_valid_utf8("\x80"));                                // a lone continuation byte
    CHECK_FALSE(is_valid_utf8("K\xC3"));                               // cut short
    CHECK_FALSE(is_valid_utf8("\xC3("));                               // a bad continuation
    CHECK_FALSE(is_valid_utf8("\xFF"));
}

TEST_CASE("JSON rules report the first violation in document order", "[json_checks]") {
    using ullm::detail::check_json_rules;
    const json clean = {{"a", {1, 2.5, "x"}}, {"b", {{"c", nullptr}}}};
    CHECK(check_json_rules(clean, "").constraint.empty());

    json value = {{"a", {1, std::numeric_limits<double>::quiet_NaN()}},
                  {"z", std::numeric_limits<double>::infinity()}};
    auto violation = check_json_rules(value, "/root");
    CHECK(violation.path == "/root/a/1");
    CHECK(violation.constraint == "must be a finite number");

    value = {{"list", {{{"__proto__", 1}}}}};
    violation = check_json_rules(value, "");
    CHECK(violation.path == "/list/0/__proto__");
    CHECK(check_json_rules(value, "", {.no_proto_key = false}).constraint.empty());
    value = {{"constructor", 1}, {"prototype", 2}};
    CHECK(check_json_rules(value, "").constraint.empty());
    CHECK(check_json_rules(value, "", {.no_prototype_keys = true}).path == "/constructor");

    value = {{"text", "bad \xFF"}};
    CHECK(check_json_rules(value, "").path == "/text");
    CHECK(check_json_rules(value, "", {.utf8 = false}).constraint.empty());
    value = {{"k\xFF", 1}};
    violation = check_json_rules(value, "");
    CHECK(violation.path == "");
    CHECK(violation.constraint == "has a key that is not valid UTF-8");

    json deep = 1;
    for (int i = 0; i < 4; ++i) deep = json::array({deep});
    CHECK(check_json_rules(deep, "", {.max_depth = 4}).constraint.empty());
    CHECK(check_json_rules(deep, "", {.max_depth = 3}).path == "/0/0/0");
}

}  // namespace json_checks_test
