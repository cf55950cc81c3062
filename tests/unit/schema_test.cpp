#include <ullm/tools/schema.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/validator.hpp>

#include <limits>
#include <string>

#include "support/catch.hpp"

namespace schema_test {

namespace schema = ullm::schema;
using ullm::json;

namespace {

// The code of the ToolDefinitionError `action` throws, or "" when it throws none.
template <class Action>
std::string definition_error_code(Action&& action) {
    try {
        action();
    } catch (const ullm::ToolDefinitionError& error) {
        return error.code();
    }
    return "";
}

}  // namespace

TEST_CASE("schema::string builds a plain string schema", "[schema]") {
    CHECK(schema::string() == json::parse(R"({"type":"string"})"));
    CHECK(schema::string("The city") ==
          json::parse(R"({"type":"string","description":"The city"})"));
}

TEST_CASE("schema::string emits every option", "[schema]") {
    const json built = schema::string("Code", {.min_length = 2,
                                               .max_length = 8,
                                               .pattern = "^[A-Z]+$",
                                               .format = "iso-code",
                                               .enum_values = {"AB", "CD"}});
    CHECK(built == json::parse(R"({"type":"string","description":"Code","minLength":2,
        "maxLength":8,"pattern":"^[A-Z]+$","format":"iso-code","enum":["AB","CD"]})"));
}

TEST_CASE("schema::string rejects contradictory or invalid options", "[schema]") {
    CHECK(definition_error_code([] {
              (void)schema::string("", {.min_length = 3, .max_length = 2});
          }) == "invalid_tool_schema");
    CHECK(definition_error_code([] { (void)schema::string("", {.pattern = "(unclosed"}); }) ==
          "invalid_tool_schema");
    // A pattern RE2 cannot run is refused by the builder too.
    for (const char* pattern : {"(?=a)", "(a)\\1", "a{100000}"}) {
        INFO(pattern);
        CHECK(definition_error_code([&] { (void)schema::string("", {.pattern = pattern}); }) ==
              "invalid_tool_schema");
    }
    try {
        (void)schema::string("", {.pattern = "x(?<!y)"});
        FAIL("expected a ToolDefinitionError");
    } catch (const ullm::ToolDefinitionError& error) {
        CHECK(error.message() ==
              "schema::string: pattern cannot be run by RE2: lookbehind (?<! is not supported "
              "(RE2 matches in linear time and has no lookaround)");
    }
}

TEST_CASE("schema::any_value lists all six JSON types", "[schema]") {
    CHECK(schema::any_value() ==
          json::parse(R"({"type":["object","array","string","number","boolean","null"]})"));
    CHECK(schema::any_value("Anything")["description"] == "Anything");
}

TEST_CASE("schema::integer emits every bound", "[schema]") {
    CHECK(schema::integer() == json::parse(R"({"type":"integer"})"));
    const json built = schema::integer("Days", {.minimum = 1,
                                                .maximum = 14,
                                                .exclusive_minimum = 0,
                                                .exclusive_maximum = 15,
                                                .multiple_of = 1});
    CHECK(built == json::parse(R"({"type":"integer","description":"Days","minimum":1,
        "maximum":14,"exclusiveMinimum":0,"exclusiveMaximum":15,"multipleOf":1})"));
    CHECK(built["minimum"].is_number_integer());
}

TEST_CASE("schema::integer rejects a non-positive multiple or crossed bounds", "[schema]") {
    CHECK(definition_error_code([] { (void)schema::integer("", {.multiple_of = 0}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([] { (void)schema::integer("", {.minimum = 5, .maximum = 4}); }) ==
          "invalid_tool_schema");
}

TEST_CASE("schema::number emits every bound", "[schema]") {
    const json built = schema::number("Temperature", {.minimum = -50.5,
                                                      .maximum = 60,
                                                      .exclusive_minimum = -51,
                                                      .exclusive_maximum = 61,
                                                      .multiple_of = 0.5});
    CHECK(built == json::parse(R"({"type":"number","description":"Temperature","minimum":-50.5,
        "maximum":60.0,"exclusiveMinimum":-51.0,"exclusiveMaximum":61.0,"multipleOf":0.5})"));
}

TEST_CASE("schema::number rejects non-finite bounds", "[schema]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(definition_error_code([&] { (void)schema::number("", {.minimum = nan}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([&] { (void)schema::number("", {.maximum = inf}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([&] { (void)schema::number("", {.exclusive_minimum = -inf}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([&] { (void)schema::number("", {.exclusive_maximum = nan}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([&] { (void)schema::number("", {.multiple_of = inf}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([] { (void)schema::number("", {.multiple_of = -0.5}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([] { (void)schema::number("", {.minimum = 2, .maximum = 1}); }) ==
          "invalid_tool_schema");
}

TEST_CASE("schema::boolean and schema::null", "[schema]") {
    CHECK(schema::boolean() == json::parse(R"({"type":"boolean"})"));
    CHECK(schema::boolean("Metric?") ==
          json::parse(R"({"type":"boolean","description":"Metric?"})"));
    CHECK(schema::null() == json::parse(R"({"type":"null"})"));
}

TEST_CASE("schema::array emits items and constraints", "[schema]") {
    CHECK(schema::array(schema::string()) ==
          json::parse(R"({"type":"array","items":{"type":"string"}})"));
    const json built = schema::array(schema::integer(), "Ids",
                                     {.min_items = 1, .max_items = 5, .unique_items = true});
    CHECK(built == json::parse(R"({"type":"array","description":"Ids","items":{"type":"integer"},
        "minItems":1,"maxItems":5,"uniqueItems":true})"));
}

TEST_CASE("schema::array rejects bad items or crossed counts", "[schema]") {
    CHECK(definition_error_code([] { (void)schema::array(json("string")); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::array(schema::string(), "", {.min_items = 3, .max_items = 1});
          }) == "invalid_tool_schema");
}

TEST_CASE("schema::object closes the object by default", "[schema]") {
    const json built = schema::object({{"city", schema::string("The city to look up")}}, {"city"});
    CHECK(built == json::parse(R"({"type":"object",
        "properties":{"city":{"type":"string","description":"The city to look up"}},
        "required":["city"],"additionalProperties":false})"));
    CHECK(schema::object() ==
          json::parse(R"({"type":"object","properties":{},"additionalProperties":false})"));
}

TEST_CASE("schema::object options open the object and bound its size", "[schema]") {
    const json built =
        schema::object({{"a", schema::string()}, {"b", schema::boolean()}}, {}, "Bag",
                       {.additional_properties = true, .min_properties = 1, .max_properties = 3});
    CHECK(built == json::parse(R"({"type":"object","description":"Bag",
        "properties":{"a":{"type":"string"},"b":{"type":"boolean"}},
        "additionalProperties":true,"minProperties":1,"maxProperties":3})"));
}

TEST_CASE("schema::object rejects inconsistent properties", "[schema]") {
    CHECK(definition_error_code([] {
              (void)schema::object({{"a", schema::string()}, {"a", schema::integer()}});
          }) == "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::object({{"a", json(1)}});
          }) == "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::object({{"a", schema::string()}}, {"a", "a"});
          }) == "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::object({{"a", schema::string()}}, {"b"});
          }) == "invalid_tool_schema");
    // With additional properties allowed, a required name need not be declared.
    CHECK(definition_error_code([] {
              (void)schema::object({}, {"b"}, "", {.additional_properties = true});
          }).empty());
    CHECK(definition_error_code([] {
              (void)schema::object({}, {}, "", {.min_properties = 2, .max_properties = 1});
          }) == "invalid_tool_schema");
}

TEST_CASE("schema::enumeration infers a common type", "[schema]") {
    CHECK(schema::enumeration({"c", "f"}, "Unit") ==
          json::parse(R"({"type":"string","description":"Unit","enum":["c","f"]})"));
    CHECK(schema::enumeration({1, 2, 3}) == json::parse(R"({"type":"integer","enum":[1,2,3]})"));
    CHECK(schema::enumeration({1, 2.5}) == json::parse(R"({"type":"number","enum":[1,2.5]})"));
    CHECK(schema::enumeration({true}) == json::parse(R"({"type":"boolean","enum":[true]})"));
    CHECK(schema::enumeration({"a", 1}) == json::parse(R"({"enum":["a",1]})"));
    CHECK(schema::enumeration({nullptr, "a"}) == json::parse(R"({"enum":[null,"a"]})"));
}

TEST_CASE("schema::enumeration rejects empty or non-finite values", "[schema]") {
    CHECK(definition_error_code([] { (void)schema::enumeration({}); }) == "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::enumeration({std::numeric_limits<double>::infinity()});
          }) == "invalid_tool_schema");
}

TEST_CASE("schema::constant, nullable, any_of and one_of", "[schema]") {
    CHECK(schema::constant("v1", "Version") ==
          json::parse(R"({"const":"v1","description":"Version"})"));
    CHECK(definition_error_code([] {
              (void)schema::constant(json::array({std::numeric_limits<double>::quiet_NaN()}));
          }) == "invalid_tool_schema");
    CHECK(schema::nullable(schema::string()) ==
          json::parse(R"({"anyOf":[{"type":"string"},{"type":"null"}]})"));
    CHECK(definition_error_code([] { (void)schema::nullable(json("string")); }) ==
          "invalid_tool_schema");
    CHECK(schema::any_of({schema::string(), schema::integer()}, "Id") ==
          json::parse(R"({"anyOf":[{"type":"string"},{"type":"integer"}],"description":"Id"})"));
    CHECK(schema::one_of({schema::string(), schema::integer()}) ==
          json::parse(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})"));
    CHECK(definition_error_code([] { (void)schema::any_of({}); }) == "invalid_tool_schema");
    CHECK(definition_error_code([] { (void)schema::one_of({json(1)}); }) == "invalid_tool_schema");
}

TEST_CASE("schema::ref and with_defs build local references", "[schema]") {
    CHECK(schema::ref("point") == json::parse(R"({"$ref":"#/$defs/point"})"));
    CHECK(schema::ref("a/b~c") == json::parse(R"({"$ref":"#/$defs/a~1b~0c"})"));
    CHECK(definition_error_code([] { (void)schema::ref(""); }) == "invalid_tool_schema");

    const json built = schema::with_defs(
        schema::object({{"from", schema::ref("point")}, {"to", schema::ref("point")}},
                       {"from", "to"}),
        {{"point",
          schema::object({{"x", schema::number()}, {"y", schema::number()}}, {"x", "y"})}});
    CHECK(built["$defs"]["point"]["properties"]["x"] == json::parse(R"({"type":"number"})"));
    CHECK(built["properties"]["from"] == json::parse(R"({"$ref":"#/$defs/point"})"));
    CHECK_NOTHROW(ullm::validate_schema(built));
    CHECK_NOTHROW(ullm::validate_arguments(
        built, json::parse(R"({"from":{"x":1,"y":2},"to":{"x":3,"y":4}})")));

    CHECK(definition_error_code([] { (void)schema::with_defs(json(1), {}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([&] { (void)schema::with_defs(built, {}); }) ==
          "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::with_defs(schema::object(),
                                      {{"a", schema::string()}, {"a", schema::string()}});
          }) == "invalid_tool_schema");
    CHECK(definition_error_code([] {
              (void)schema::with_defs(schema::object(), {{"a", json(1)}});
          }) == "invalid_tool_schema");
}

TEST_CASE("every built schema passes validate_schema", "[schema]") {
    const json built = schema::object(
        {
            {"city", schema::string("City", {.min_length = 1, .pattern = "^[^0-9]+$"})},
            {"days", schema::integer("Days", {.minimum = 1, .maximum = 14})},
            {"unit", schema::enumeration({"c", "f"})},
            {"tags", schema::array(schema::string(), "Tags", {.unique_items = true})},
            {"note", schema::nullable(schema::string())},
            {"metric", schema::boolean()},
            {"ratio", schema::number("", {.exclusive_minimum = 0, .multiple_of = 0.25})},
            {"kind", schema::constant("forecast")},
            {"id", schema::one_of({schema::string(), schema::integer()})},
            {"extra", schema::any_value("Anything else")},
            {"mixed", schema::enumeration({1, "one", nullptr})},
        },
        {"city"});
    CHECK_NOTHROW(ullm::validate_schema(built));
}

}  // namespace schema_test
