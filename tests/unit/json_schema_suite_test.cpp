// The JSON Schema Test Suite (draft 7, Debian's json-schema-test-suite package) against the
// strict validator: for every keyword the validator supports, each suite schema it accepts
// must give the suite's verdict on every instance; a schema that uses a keyword it does not
// support must be refused when it is checked, never silently passed.
//
// Tool parameters must have an object root, and every schema in them must name a type; the
// suite's schemas mostly have neither (`{"minLength": 2}` applied to any instance). So the
// suite runs through the validator's entry point for values that are not tool arguments,
// `validate_value_schema` / `validate_value`: the same keyword checks and the same evaluator
// as `validate_schema` / `validate_arguments`, without those two structural rules and the
// argument rules (reserved keys, depth), which the suite does not test. Refusals are checked
// through the tool entry point as well, with the suite schema as a property of an object root.

#include <ullm/core/error.hpp>
#include <ullm/tools/validator.hpp>

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "support/catch.hpp"

namespace json_schema_suite_test {

using ullm::json;

namespace {

namespace fs = std::filesystem;

// Where Debian installs draft 7 (overridable, for a checkout of the suite elsewhere).
fs::path suite_dir() {
    if (const char* dir = std::getenv("ULLM_JSON_SCHEMA_SUITE_DIR")) return dir;
    return "/usr/share/json-schema-test-suite/tests/draft7";
}

// The suite's files, one per keyword, that the validator supports (validator.hpp lists
// them); `definitions` and `default` are supported as root definitions and an annotation.
const std::set<std::string>& supported_keywords() {
    static const std::set<std::string> keywords{"additionalProperties",
                                                "allOf",
                                                "anyOf",
                                                "const",
                                                "default",
                                                "definitions",
                                                "enum",
                                                "exclusiveMaximum",
                                                "exclusiveMinimum",
                                                "items",
                                                "maxItems",
                                                "maxLength",
                                                "maxProperties",
                                                "maximum",
                                                "minItems",
                                                "minLength",
                                                "minProperties",
                                                "minimum",
                                                "multipleOf",
                                                "oneOf",
                                                "pattern",
                                                "properties",
                                                "ref",
                                                "required",
                                                "type",
                                                "uniqueItems"};
    return keywords;
}

// The files of what the validator refuses: keywords it does not support, boolean schemas
// (`true` / `false` in place of a schema object) and remote references.
const std::set<std::string>& unsupported_keywords() {
    static const std::set<std::string> keywords{"additionalItems",   "boolean_schema", "contains",
                                                "dependencies",      "if-then-else",   "not",
                                                "patternProperties", "propertyNames",  "refRemote"};
    return keywords;
}

// Where the validator's verdict differs from draft 7 on purpose: (group, test) and why. Each
// is checked to give the documented verdict, the opposite of the suite's.
const std::map<std::pair<std::string, std::string>, std::string>& deviations() {
    static const std::map<std::pair<std::string, std::string>, std::string> known{
        {{"ref overrides any sibling keywords", "ref valid, maxItems ignored"},
         "$ref applies alongside its siblings (2019-09), as validator.hpp documents"},
    };
    return known;
}

json read_json(const fs::path& path) {
    std::ifstream in(path);
    return json::parse(in);
}

struct Refusal {
    std::string code;  // empty when the schema is accepted
    std::string message;
};

// What `check` throws for `schema`.
template <class Check>
Refusal refusal(Check check, const json& schema) {
    try {
        check(schema);
    } catch (const ullm::ToolDefinitionError& error) {
        return {error.code(), error.message()};
    }
    return {};
}

bool valid_value(const json& schema, const json& value) {
    try {
        ullm::validate_value(schema, value);
    } catch (const ullm::ToolArgumentError&) {
        return false;
    }
    return true;
}

// Per suite file: its schemas (groups), how many were refused, its tests, how many of them
// ran (those of accepted schemas) and how many of those gave the suite's verdict.
struct Tally {
    std::size_t groups = 0;
    std::size_t groups_refused = 0;
    std::size_t tests = 0;
    std::size_t run = 0;
    std::size_t passed = 0;
};

}  // namespace

TEST_CASE("the validator agrees with the JSON Schema Test Suite (draft 7)", "[validator][suite]") {
    const fs::path dir = suite_dir();
    INFO("JSON Schema Test Suite at " << dir.string()
                                      << " (Debian: apt-get install json-schema-test-suite)");
    REQUIRE(fs::is_directory(dir));

    std::map<std::string, Tally> tallies;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".json") continue;  // optional/ is not run
        const std::string keyword = entry.path().stem().string();
        INFO("file " << entry.path().filename().string());
        const bool supported = supported_keywords().count(keyword) != 0;
        REQUIRE((supported || unsupported_keywords().count(keyword) != 0));
        Tally& tally = tallies[keyword];
        for (const auto& group : read_json(entry.path())) {
            const json& schema = group.at("schema");
            const std::string description = group.at("description").get<std::string>();
            INFO("group \"" << description << "\": " << schema.dump());
            ++tally.groups;
            tally.tests += group.at("tests").size();
            const Refusal as_value = refusal(ullm::validate_value_schema, schema);
            const Refusal as_tool =
                refusal(ullm::validate_schema,
                        json{{"type", "object"}, {"properties", {{"value", schema}}}});
            if (!supported) {
                // Refused through both entry points, never silently passed.
                CHECK_FALSE(as_value.code.empty());
                CHECK_FALSE(as_tool.code.empty());
            }
            if (!as_value.code.empty()) {
                ++tally.groups_refused;
                // A supported keyword's group is refused only for a form or neighbour the
                // validator does not support (a tuple `items`, a remote `$ref`, `not`, ...) or
                // for a boolean schema, which validator.hpp leaves out of the subset.
                INFO("refused: " << as_value.message);
                CHECK((as_value.code == "unsupported_schema_keyword" ||
                       as_value.message.find("the boolean schemas true and false are not "
                                             "supported") != std::string::npos));
                continue;
            }
            for (const auto& test : group.at("tests")) {
                const std::string name = test.at("description").get<std::string>();
                INFO("test \"" << name << "\": " << test.at("data").dump());
                bool expected = test.at("valid").get<bool>();
                if (deviations().count({description, name}) != 0) expected = !expected;
                const bool verdict = valid_value(schema, test.at("data"));
                CHECK(verdict == expected);
                ++tally.run;
                if (verdict == expected) ++tally.passed;
            }
        }
    }
    for (const auto& keyword : supported_keywords()) CHECK(tallies.count(keyword) == 1);

    std::cout << "JSON Schema Test Suite, draft 7, at " << dir.string() << "\n"
              << fmt::format("{:<22} {:>9} {:>7} {:>7} {:>5} {:>4} {:>6}\n", "keyword", "supported",
                             "schemas", "refused", "tests", "run", "passed");
    for (const auto& [keyword, tally] : tallies) {
        std::cout << fmt::format("{:<22} {:>9} {:>7} {:>7} {:>5} {:>4} {:>6}\n", keyword,
                                 supported_keywords().count(keyword) != 0 ? "yes" : "no",
                                 tally.groups, tally.groups_refused, tally.tests, tally.run,
                                 tally.passed);
    }
}

}  // namespace json_schema_suite_test
