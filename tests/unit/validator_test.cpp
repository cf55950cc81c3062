#include <ullm/tools/validator.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/schema.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "support/catch.hpp"

namespace validator_test {

using ullm::json;

namespace {

// The code of the ToolDefinitionError validate_schema throws for `schema`, or "" if valid.
std::string schema_code(const json& schema) {
    try {
        ullm::validate_schema(schema);
    } catch (const ullm::ToolDefinitionError& error) {
        return error.code();
    }
    return "";
}

// The message of the ToolDefinitionError validate_schema throws for `schema`, or "".
std::string schema_message(const json& schema) {
    try {
        ullm::validate_schema(schema);
    } catch (const ullm::ToolDefinitionError& error) {
        return error.message();
    }
    return "";
}

// A root object schema with one property `x` of schema `property`, as written.
json with_untyped_property(const json& property) {
    return {{"type", "object"}, {"properties", {{"x", property}}}};
}

// A root object schema with one property `x` of schema `property`. Every schema in tool
// parameters must say which types it accepts; a property that does not gets all six (any JSON
// value), so that a test of one keyword need not repeat it.
json with_property(const json& property) {
    json typed = property;
    if (typed.is_object()) {
        bool names = false;
        for (const char* keyword : {"type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf"}) {
            names = names || typed.contains(keyword);
        }
        if (!names) typed["type"] = {"object", "array", "string", "number", "boolean", "null"};
    }
    return with_untyped_property(typed);
}

// A root object schema with `keyword: value` at the root.
json root_with(const std::string& keyword, const json& value) {
    json schema = {{"type", "object"}};
    schema[keyword] = value;
    return schema;
}

struct ArgumentFailure {
    bool failed = false;
    std::string path;
    std::string message;  // ToolArgumentError::message(), "argument <path> <reason>"
};

ArgumentFailure check_arguments(const json& schema, const json& arguments) {
    REQUIRE(schema_code(schema).empty());
    try {
        ullm::validate_arguments(schema, arguments);
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.code() == "invalid_tool_arguments");
        CHECK(error.status() == 400);
        return {true, error.path(), error.message()};
    }
    return {};
}

bool accepts(const json& schema, const json& arguments) {
    return !check_arguments(schema, arguments).failed;
}

// Arguments {"x": value} checked against a schema with property x of `property`.
ArgumentFailure check_x(const json& property, const json& value) {
    return check_arguments(with_property(property), json{{"x", value}});
}

json nested_arrays(std::size_t levels) {
    json value = json::array();
    for (std::size_t i = 1; i < levels; ++i) value = json::array({value});
    return value;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// validate_schema: the root and JSON safety

TEST_CASE("the root schema must be an object of type object", "[validator][schema]") {
    CHECK(schema_code(json::parse(R"({"type":"object"})")).empty());
    CHECK(schema_code(json::parse(R"({"type":"string"})")) == "invalid_tool_schema");
    CHECK(schema_code(json::parse(R"({"properties":{}})")) == "invalid_tool_schema");
    CHECK(schema_code(json::parse(R"({"type":["object","null"]})")) == "invalid_tool_schema");
    CHECK(schema_code(json::array()) == "invalid_tool_schema");
    CHECK(schema_code(json()) == "invalid_tool_schema");
    CHECK(schema_message(json::parse(R"({"type":"string"})")) ==
          "invalid parameter schema at #: the root schema must have \"type\": \"object\"");
}

TEST_CASE("schemas must be JSON-safe", "[validator][schema]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(schema_code(root_with("default", json::array({1, nan}))) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"enum", json::array({inf})}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", "number"}, {"maximum", -inf}})) ==
          "invalid_tool_schema");
    CHECK(schema_code(root_with("description", "bad \xff byte")) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", "string"}, {"title", "ok \xc3\xa9"}})).empty());
    CHECK(schema_message(root_with("default", json::array({1, nan}))) ==
          "invalid parameter schema at #/default/1: numbers must be finite");
}

TEST_CASE("schema depth is bounded", "[validator][schema]") {
    // The root object is level 1, so `default` may hold 63 nested arrays but not 64.
    CHECK(schema_code(root_with("default", nested_arrays(ullm::max_schema_depth - 1))).empty());
    CHECK(schema_code(root_with("default", nested_arrays(ullm::max_schema_depth))) ==
          "invalid_tool_schema");

    json deep = ullm::schema::string();
    for (int i = 0; i < 40; ++i) deep = with_property(deep);
    CHECK(schema_code(deep) == "invalid_tool_schema");
}

// ---------------------------------------------------------------------------------------------
// validate_schema: each supported keyword, passing and failing

TEST_CASE("type accepts the seven JSON types, alone or in a list", "[validator][schema]") {
    for (const char* type : {"object", "array", "string", "number", "integer", "boolean", "null"}) {
        CHECK(schema_code(with_property({{"type", type}})).empty());
    }
    CHECK(schema_code(with_property({{"type", {"string", "null"}}})).empty());
    CHECK(schema_code(with_property({{"type", "float"}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", {"string", "date"}}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", json::array()}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", {"string", "string"}}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", 1}})) == "invalid_tool_schema");
    CHECK(schema_message(with_property({{"type", "float"}})) ==
          "invalid parameter schema at #/properties/x/type: unknown type \"float\"; supported: "
          "object, array, string, number, integer, boolean, null");
}

TEST_CASE("a $ref beneath a nested $id is refused", "[validator][schema]") {
    // JSON Schema resolves "#" here against the property's own $id, not the root: silently
    // resolving it against the root would give wrong verdicts.
    const json scoped = json::parse(R"({"type":"object","$id":"urn:root","properties":{
        "p":{"$id":"urn:other","type":"object","properties":{"q":{"$ref":"#"}}}}})");
    CHECK(schema_code(scoped) == "unsupported_schema_keyword");
    CHECK(schema_message(scoped).find(
              "unsupported schema keyword \"$ref\" at #/properties/p/properties/q: a $ref inside "
              "a schema with its own \"$id\"") != std::string::npos);
    CHECK(schema_code(json::parse(R"({"type":"object","properties":{
        "p":{"$id":"urn:other","type":"string","$ref":"#/$defs/s"}},
        "$defs":{"s":{"type":"string"}}})")) == "unsupported_schema_keyword");
    // A root $id, and a nested one with no $ref beneath, are annotations.
    CHECK(schema_code(json::parse(R"({"type":"object","$id":"urn:root","properties":{
        "p":{"$ref":"#"},"q":{"$id":"urn:q","type":"string"}}})"))
              .empty());
}

TEST_CASE("a schema in tool parameters must say which types it accepts", "[validator][schema]") {
    const json untyped = json::parse(R"({"type":"object","properties":{"value":{}}})");
    CHECK(schema_code(untyped) == "invalid_tool_schema");
    CHECK(schema_message(untyped) ==
          "invalid parameter schema at #/properties/value: the schema does not say which JSON "
          "types it accepts; give it \"type\" (for any JSON value, all six: [\"object\", "
          "\"array\", \"string\", \"number\", \"boolean\", \"null\"]), \"enum\", \"const\", "
          "\"$ref\", or anyOf / oneOf alternatives that each do");
    // Annotations and keywords of one type do not say it.
    CHECK(schema_code(with_untyped_property({{"description", "Anything"}})) ==
          "invalid_tool_schema");
    CHECK(schema_code(with_untyped_property({{"minLength", 1}})) == "invalid_tool_schema");
    // Wherever a value's own schema sits: additionalProperties, items, a definition.
    CHECK(schema_message(root_with("additionalProperties", json::object()))
              .find("at #/additionalProperties: the schema does not say") != std::string::npos);
    CHECK(schema_message(with_untyped_property({{"type", "array"}, {"items", json::object()}}))
              .find("at #/properties/x/items: the schema does not say") != std::string::npos);
    CHECK(schema_message(root_with("$defs", {{"any", {{"title", "Any"}}}}))
              .find("at #/$defs/any: the schema does not say") != std::string::npos);
    // anyOf / oneOf alternatives must each say it, unless the schema itself does.
    CHECK(schema_code(with_untyped_property(
              {{"anyOf", {{{"type", "string"}}, {{"minLength", 1}}}}})) == "invalid_tool_schema");
    CHECK(schema_code(with_untyped_property(
              {{"oneOf", {{{"type", "string"}}, {{"type", "integer"}}}}})) == "");
    CHECK(schema_code(with_untyped_property(
              {{"type", "string"}, {"anyOf", {{{"minLength", 1}}, {{"pattern", "x"}}}}})) == "");
    // One allOf member that says it is enough; none is not.
    CHECK(schema_code(with_untyped_property(
              {{"allOf", {{{"type", "string"}}, {{"minLength", 1}}}}})) == "");
    CHECK(schema_code(with_untyped_property({{"allOf", {{{"minLength", 1}}}}})) ==
          "invalid_tool_schema");
    // enum, const and $ref say it; so do the builders, including any_value.
    CHECK(schema_code(with_untyped_property({{"enum", {1, "a", nullptr}}})) == "");
    CHECK(schema_code(with_untyped_property({{"const", {{"a", 1}}}})) == "");
    CHECK(schema_code(
              ullm::schema::with_defs(ullm::schema::object({{"p", ullm::schema::ref("point")}}),
                                      {{"point", ullm::schema::object()}})) == "");
    CHECK(schema_code(with_untyped_property(ullm::schema::nullable(ullm::schema::string()))) == "");
    CHECK(schema_code(with_untyped_property(ullm::schema::any_value("Anything"))) == "");
    // The root of a tool schema is an object already; a schema for any value may stay open.
    CHECK_NOTHROW(ullm::validate_value_schema(json::object()));
    CHECK_NOTHROW(ullm::validate_value_schema(untyped));
}

TEST_CASE("any_value accepts every JSON value", "[validator][arguments]") {
    const json any = ullm::schema::any_value();
    for (const json& value :
         {json::object(), json::array(), json("text"), json(1), json(-2.5), json(true), json()}) {
        INFO(value.dump());
        CHECK(accepts(with_untyped_property(any), {{"x", value}}));
    }
}

TEST_CASE("boolean schemas are refused", "[validator][schema]") {
    CHECK(schema_message(with_property(true)) ==
          "invalid parameter schema at #/properties/x: a schema must be a JSON object (the "
          "boolean schemas true and false are not supported)");
    CHECK(schema_code(root_with("anyOf", json::array({false}))) == "invalid_tool_schema");
    CHECK(schema_message(with_property(1)) ==
          "invalid parameter schema at #/properties/x: a schema must be a JSON object");
}

TEST_CASE("properties must map names to schemas", "[validator][schema]") {
    CHECK(schema_code(root_with("properties", json::object())).empty());
    CHECK(schema_code(root_with("properties", json::array())) == "invalid_tool_schema");
    CHECK(schema_code(root_with("properties", {{"a", "string"}})) == "invalid_tool_schema");
    CHECK(schema_code(root_with("properties", {{"a", true}})) == "invalid_tool_schema");
    CHECK(schema_code(root_with("properties", {{"__proto__", {{"type", "string"}}}})) ==
          "invalid_tool_schema");
    CHECK(schema_code(root_with("properties", {{"constructor", {{"type", "string"}}}})) ==
          "invalid_tool_schema");
}

TEST_CASE("required must list unique, allowed property names", "[validator][schema]") {
    json schema = with_property({{"type", "string"}});
    schema["required"] = {"x"};
    CHECK(schema_code(schema).empty());
    schema["required"] = "x";
    CHECK(schema_code(schema) == "invalid_tool_schema");
    schema["required"] = {1};
    CHECK(schema_code(schema) == "invalid_tool_schema");
    schema["required"] = {"x", "x"};
    CHECK(schema_code(schema) == "invalid_tool_schema");
    schema["required"] = {"prototype"};
    CHECK(schema_code(schema) == "invalid_tool_schema");
    // Undeclared names are fine while additional properties are allowed...
    schema["required"] = {"y"};
    CHECK(schema_code(schema).empty());
    // ...but unsatisfiable when they are not.
    schema["additionalProperties"] = false;
    CHECK(schema_code(schema) == "invalid_tool_schema");
}

TEST_CASE("additionalProperties is a boolean or a schema", "[validator][schema]") {
    CHECK(schema_code(root_with("additionalProperties", false)).empty());
    CHECK(schema_code(root_with("additionalProperties", true)).empty());
    CHECK(schema_code(root_with("additionalProperties", {{"type", "integer"}})).empty());
    CHECK(schema_code(root_with("additionalProperties", {{"type", "int"}})) ==
          "invalid_tool_schema");
    CHECK(schema_code(root_with("additionalProperties", 0)) == "invalid_tool_schema");
}

TEST_CASE("items is a single schema", "[validator][schema]") {
    CHECK(schema_code(with_property({{"type", "array"}, {"items", {{"type", "string"}}}})).empty());
    CHECK(schema_code(with_property({{"type", "array"}, {"items", "string"}})) ==
          "invalid_tool_schema");
    const json tuple = with_property({{"type", "array"}, {"items", {{{"type", "string"}}}}});
    CHECK(schema_code(tuple) == "unsupported_schema_keyword");
    CHECK(schema_message(tuple).find("\"items\" at #/properties/x") != std::string::npos);
}

TEST_CASE("enum is a non-empty array and const takes any value", "[validator][schema]") {
    CHECK(schema_code(with_property({{"enum", {"a", 1, nullptr}}})).empty());
    CHECK(schema_code(with_property({{"enum", json::array()}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"enum", "a"}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"const", {{"nested", {1, 2}}}}})).empty());
}

TEST_CASE("anyOf, oneOf and allOf hold non-empty lists of schemas", "[validator][schema]") {
    for (const char* keyword : {"anyOf", "oneOf", "allOf"}) {
        INFO(keyword);
        CHECK(schema_code(with_property({{keyword, {{{"type", "string"}}}}})).empty());
        CHECK(schema_code(with_property({{keyword, json::array()}})) == "invalid_tool_schema");
        CHECK(schema_code(with_property({{keyword, {{"type", "string"}}}})) ==
              "invalid_tool_schema");
        CHECK(schema_code(with_property({{keyword, {{{"type", "text"}}}}})) ==
              "invalid_tool_schema");
        CHECK(schema_code(with_property({{keyword, {{{"not", {}}}}}})) ==
              "unsupported_schema_keyword");
    }
}

TEST_CASE("$ref must point at a local definition that exists", "[validator][schema]") {
    json schema = with_property({{"$ref", "#/$defs/point"}});
    schema["$defs"] = {{"point", {{"type", "object"}}}};
    CHECK(schema_code(schema).empty());

    json legacy = with_property({{"$ref", "#/definitions/point"}});
    legacy["definitions"] = {{"point", {{"type", "object"}}}};
    CHECK(schema_code(legacy).empty());

    json escaped = with_property({{"$ref", "#/$defs/a~1b"}});
    escaped["$defs"] = {{"a/b", {{"type", "string"}}}};
    CHECK(schema_code(escaped).empty());

    CHECK(schema_code(with_property({{"$ref", "#/$defs/missing"}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"$ref", 3}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"$ref", "https://example.com/schema.json"}})) ==
          "unsupported_schema_keyword");
    CHECK(schema_code(with_property({{"$ref", "#/properties/y"}})) == "unsupported_schema_keyword");
    CHECK(schema_code(with_property({{"$ref", "#/$defs/a/b"}})) == "unsupported_schema_keyword");
    CHECK(schema_code(with_property({{"$ref", "#/$defs/bad~2escape"}})) ==
          "unsupported_schema_keyword");
}

TEST_CASE("$defs are supported at the root only", "[validator][schema]") {
    CHECK(schema_code(root_with("$defs", {{"a", {{"type", "string"}}}})).empty());
    CHECK(schema_code(root_with("$defs", json::array())) == "invalid_tool_schema");
    CHECK(schema_code(root_with("$defs", {{"a", {{"type", "strin"}}}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"type", "object"}, {"$defs", json::object()}})) ==
          "unsupported_schema_keyword");
    CHECK(schema_code(with_property({{"type", "object"}, {"definitions", json::object()}})) ==
          "unsupported_schema_keyword");
}

TEST_CASE("$ref cycles that never consume an argument are rejected", "[validator][schema]") {
    json self = with_property({{"$ref", "#/$defs/a"}});
    self["$defs"] = {{"a", {{"$ref", "#/$defs/a"}}}};
    CHECK(schema_code(self) == "invalid_tool_schema");
    CHECK(schema_message(self).find("$ref cycle #/$defs/a -> #/$defs/a") != std::string::npos);

    json mutual = with_property({{"$ref", "#/$defs/a"}});
    mutual["$defs"] = {{"a", {{"anyOf", {{{"$ref", "#/$defs/b"}}, {{"type", "null"}}}}}},
                       {"b", {{"allOf", {{{"$ref", "#/$defs/a"}}}}}}};
    CHECK(schema_code(mutual) == "invalid_tool_schema");

    json root_cycle = root_with("oneOf", {{{"$ref", "#"}}});
    CHECK(schema_code(root_cycle) == "invalid_tool_schema");

    // An unused cycle is still a broken definition.
    json unused =
        root_with("$defs", {{"a", {{"$ref", "#/$defs/b"}}}, {"b", {{"$ref", "#/$defs/a"}}}});
    CHECK(schema_code(unused) == "invalid_tool_schema");

    // Recursion through properties or items consumes an argument level and is allowed.
    json tree = json::parse(R"({"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},
        "$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}})");
    CHECK(schema_code(tree).empty());
    CHECK(schema_code(root_with("properties", {{"next", {{"$ref", "#"}}}})).empty());
}

TEST_CASE("long chains of $refs are rejected", "[validator][schema]") {
    json defs = json::object();
    for (int i = 0; i < 100; ++i) {
        defs["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
    }
    defs["d100"] = {{"type", "string"}};
    CHECK(schema_code(root_with("$defs", defs)) == "invalid_tool_schema");
}

TEST_CASE("length, item and property counts are non-negative integers", "[validator][schema]") {
    for (const char* keyword :
         {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}) {
        INFO(keyword);
        CHECK(schema_code(with_property({{keyword, 3}})).empty());
        CHECK(schema_code(with_property({{keyword, 3.0}})).empty());
        CHECK(schema_code(with_property({{keyword, 0}})).empty());
        CHECK(schema_code(with_property({{keyword, -1}})) == "invalid_tool_schema");
        CHECK(schema_code(with_property({{keyword, 1.5}})) == "invalid_tool_schema");
        CHECK(schema_code(with_property({{keyword, "3"}})) == "invalid_tool_schema");
    }
}

TEST_CASE("minimum and maximum pairs must not cross", "[validator][schema]") {
    CHECK(schema_code(with_property({{"minLength", 2}, {"maxLength", 2}})).empty());
    CHECK(schema_code(with_property({{"minLength", 3}, {"maxLength", 2}})) ==
          "invalid_tool_schema");
    CHECK(schema_code(with_property({{"minItems", 3}, {"maxItems", 2}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"minProperties", 3}, {"maxProperties", 2}})) ==
          "invalid_tool_schema");
    CHECK(schema_code(with_property({{"minimum", 2.5}, {"maximum", 2}})) == "invalid_tool_schema");
}

TEST_CASE("pattern must be a valid, bounded ECMAScript regex", "[validator][schema][pattern]") {
    CHECK(schema_code(with_property({{"type", "string"}, {"pattern", "^[a-z]+$"}})).empty());
    CHECK(schema_code(with_property({{"pattern", "([a-z]"}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"pattern", "a{2,1}"}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"pattern", 5}})) == "invalid_tool_schema");
    CHECK(
        schema_code(with_property({{"pattern", std::string(ullm::max_pattern_bytes + 1, 'a')}})) ==
        "invalid_tool_schema");
}

TEST_CASE("a pattern RE2 cannot run is refused with its path and the reason",
          "[validator][schema][pattern]") {
    const auto refused = [](const std::string& pattern) {
        const json schema = with_property({{"type", "string"}, {"pattern", pattern}});
        INFO(pattern);
        CHECK(schema_code(schema) == "unsupported_schema_keyword");
        return schema_message(schema);
    };
    CHECK(refused("^(?=a)") ==
          "unsupported schema keyword \"pattern\" at #/properties/x: pattern \"^(?=a)\" cannot "
          "be run by RE2: lookahead (?= is not supported (RE2 matches in linear time and has no "
          "lookaround)");
    CHECK(refused("a(?!b)").find("lookahead (?! is not supported") != std::string::npos);
    CHECK(refused("(?<=a)b").find("lookbehind (?<= is not supported") != std::string::npos);
    CHECK(refused("(?<!a)b").find("lookbehind (?<! is not supported") != std::string::npos);
    CHECK(refused("(a)\\1").find("backreferences such as \\1 are not supported") !=
          std::string::npos);
    CHECK(refused("(?<n>a)\\k<n>").find("backreferences such as \\k<name>") != std::string::npos);
    CHECK(refused("a{100000}") ==
          "unsupported schema keyword \"pattern\" at #/properties/x: pattern \"a{100000}\" "
          "cannot be run by RE2: the repeat {100000} is over RE2's limit of 1000 repetitions "
          "(nested repeats multiply)");
    CHECK(refused("(a{100}){100}").find("over RE2's limit of 1000") != std::string::npos);
    CHECK(refused("\\p{L}{1000}").find("larger than the 1048576-byte memory bound") !=
          std::string::npos);
    CHECK(refused("\\uD800").find("lone surrogate \\uD800") != std::string::npos);
    CHECK(
        refused("\\p{Alphabetic}").find("the Unicode property \\p{Alphabetic} is not supported") !=
        std::string::npos);
    // At the limits, and in $defs, where the path names the definition.
    CHECK(schema_code(with_property({{"type", "string"}, {"pattern", "a{1000}"}})).empty());
    const json defs = {{"type", "object"},
                       {"$defs", {{"code", {{"type", "string"}, {"pattern", "(?=x)"}}}}}};
    CHECK(schema_message(defs).find("at #/$defs/code: pattern") != std::string::npos);
}

TEST_CASE("the patterns of one schema together are bounded", "[validator][schema][pattern]") {
    // Each of these compiles to about 50,000 RE2 instructions; six distinct ones are too many.
    json properties = json::object();
    for (int i = 0; i < 6; ++i) {
        properties["p" + std::to_string(i)] = {
            {"type", "string"}, {"pattern", "\\p{L}{1," + std::to_string(40 + i) + "}"}};
    }
    const json distinct = {{"type", "object"}, {"properties", properties}};
    CHECK(schema_code(distinct) == "invalid_tool_schema");
    CHECK(schema_message(distinct).find("patterns together compile to more than 250000 RE2 "
                                        "instructions") != std::string::npos);
    // The same pattern six times is compiled once.
    for (auto& [name, property] : properties.items()) property["pattern"] = "\\p{L}{1,40}";
    CHECK(schema_code({{"type", "object"}, {"properties", properties}}).empty());
}

TEST_CASE("a malformed pattern is invalid_tool_schema with the reason",
          "[validator][schema][pattern]") {
    const auto malformed = [](const std::string& pattern) {
        const json schema = with_property({{"type", "string"}, {"pattern", pattern}});
        INFO(pattern);
        CHECK(schema_code(schema) == "invalid_tool_schema");
        return schema_message(schema);
    };
    CHECK(malformed("([a-z]") ==
          "invalid parameter schema at #/properties/x/pattern: pattern \"([a-z]\" is not a valid "
          "ECMAScript regular expression: a group is not closed");
    CHECK(malformed("a)").find("closes no group") != std::string::npos);
    CHECK(malformed("[a-").find("is not closed") != std::string::npos);
    CHECK(malformed("a{2,1}").find("out of order") != std::string::npos);
    CHECK(malformed("*a").find("nothing to repeat") != std::string::npos);
    // RE2's own syntax that ECMAScript does not have.
    CHECK(malformed("(?i)abc").find("(?i is not ECMAScript syntax") != std::string::npos);
    CHECK(malformed("\\Aabc\\z").find("\\A is not an ECMAScript escape") != std::string::npos);
    CHECK(malformed("\\pL").find("must be followed by {property}") != std::string::npos);
    CHECK(malformed("abc\\").find("lone backslash") != std::string::npos);
}

TEST_CASE("format is an annotation string", "[validator][schema]") {
    CHECK(schema_code(with_property({{"type", "string"}, {"format", "date-time"}})).empty());
    CHECK(schema_code(with_property({{"format", 1}})) == "invalid_tool_schema");
}

TEST_CASE("numeric bounds are numbers", "[validator][schema]") {
    for (const char* keyword : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        INFO(keyword);
        CHECK(schema_code(with_property({{keyword, 1.5}})).empty());
        CHECK(schema_code(with_property({{keyword, -3}})).empty());
        CHECK(schema_code(with_property({{keyword, "1"}})) == "invalid_tool_schema");
        CHECK(schema_code(with_property({{keyword, true}})) == "invalid_tool_schema");
    }
}

TEST_CASE("multipleOf is a positive number", "[validator][schema]") {
    CHECK(schema_code(with_property({{"multipleOf", 0.5}})).empty());
    CHECK(schema_code(with_property({{"multipleOf", 3}})).empty());
    CHECK(schema_code(with_property({{"multipleOf", 0}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"multipleOf", -2}})) == "invalid_tool_schema");
    CHECK(schema_code(with_property({{"multipleOf", "2"}})) == "invalid_tool_schema");
}

TEST_CASE("uniqueItems is a boolean", "[validator][schema]") {
    CHECK(schema_code(with_property({{"uniqueItems", true}})).empty());
    CHECK(schema_code(with_property({{"uniqueItems", 1}})) == "invalid_tool_schema");
}

TEST_CASE("annotations are accepted with the right value types", "[validator][schema]") {
    json schema =
        json::parse(R"({"type":"object","$schema":"https://json-schema.org/draft/2020-12/schema",
        "$id":"urn:weather","$comment":"internal","title":"Weather","description":"Args",
        "default":{},"examples":[{"city":"Berlin"}]})");
    CHECK(schema_code(schema).empty());
    for (const char* keyword : {"description", "title", "$comment", "$schema", "$id"}) {
        INFO(keyword);
        CHECK(schema_code(root_with(keyword, 1)) == "invalid_tool_schema");
    }
    CHECK(schema_code(root_with("default", nullptr)).empty());
    CHECK(schema_code(root_with("examples", "Berlin")) == "invalid_tool_schema");
}

TEST_CASE("every unsupported keyword is rejected by name and path", "[validator][schema]") {
    for (const char* keyword : {"not",
                                "if",
                                "then",
                                "else",
                                "patternProperties",
                                "dependentRequired",
                                "dependentSchemas",
                                "dependencies",
                                "prefixItems",
                                "contains",
                                "minContains",
                                "maxContains",
                                "propertyNames",
                                "unevaluatedProperties",
                                "unevaluatedItems",
                                "additionalItems",
                                "$anchor",
                                "$dynamicRef",
                                "$recursiveRef",
                                "contentEncoding",
                                "nullable",
                                "strict",
                                "deprecated",
                                "readOnly",
                                "x-custom"}) {
        INFO(keyword);
        const json nested = with_property({{"type", "string"}, {keyword, true}});
        CHECK(schema_code(nested) == "unsupported_schema_keyword");
        CHECK(schema_message(nested).rfind(
                  std::string("unsupported schema keyword \"") + keyword + "\" at #/properties/x",
                  0) == 0);
        CHECK(schema_code(root_with(keyword, true)) == "unsupported_schema_keyword");
    }
    CHECK(schema_message(root_with("not", json::object())) ==
          "unsupported schema keyword \"not\" at #: it is not part of the supported JSON Schema "
          "subset");
}

TEST_CASE("unsupported keywords are found inside every kind of subschema", "[validator][schema]") {
    const json bad = {{"not", json::object()}};
    CHECK(schema_code(root_with("additionalProperties", bad)) == "unsupported_schema_keyword");
    CHECK(schema_code(with_property({{"type", "array"}, {"items", bad}})) ==
          "unsupported_schema_keyword");
    CHECK(schema_code(root_with("$defs", {{"a", bad}})) == "unsupported_schema_keyword");
    CHECK(schema_message(root_with("$defs", {{"a", bad}})).find("at #/$defs/a") !=
          std::string::npos);
    // Keywords inside annotation values are data, not schema.
    CHECK(schema_code(root_with("default", {{"not", 1}})).empty());
    CHECK(schema_code(with_property({{"const", {{"if", 1}}}})).empty());
}

// ---------------------------------------------------------------------------------------------
// validate_arguments

TEST_CASE("arguments must be an object", "[validator][arguments]") {
    const json schema = ullm::schema::object();
    for (const json& value : {json::array(), json("x"), json(1), json(), json(true)}) {
        const auto failure = check_arguments(schema, value);
        CHECK(failure.failed);
        CHECK(failure.path.empty());
    }
    CHECK(check_arguments(schema, json::array()).message ==
          "argument (root) must be an object, got array");
    CHECK(accepts(schema, json::object()));
}

TEST_CASE("type is enforced for each JSON type", "[validator][arguments]") {
    CHECK(accepts(with_property({{"type", "string"}}), {{"x", "a"}}));
    CHECK(check_x({{"type", "string"}}, 1).message == "argument /x must be a string, got number 1");
    CHECK(accepts(with_property({{"type", "number"}}), {{"x", 1.5}}));
    CHECK(check_x({{"type", "number"}}, "1.5").message ==
          "argument /x must be a number, got string \"1.5\"");
    CHECK(accepts(with_property({{"type", "boolean"}}), {{"x", false}}));
    CHECK(check_x({{"type", "boolean"}}, "true").message ==
          "argument /x must be a boolean, got string \"true\"");
    CHECK(accepts(with_property({{"type", "null"}}), {{"x", nullptr}}));
    CHECK(check_x({{"type", "null"}}, 0).message == "argument /x must be null, got number 0");
    CHECK(accepts(with_property({{"type", "array"}}), {{"x", {1, 2}}}));
    CHECK(check_x({{"type", "array"}}, json::object()).message ==
          "argument /x must be an array, got object");
    CHECK(accepts(with_property({{"type", "object"}}), {{"x", json::object()}}));
    CHECK(check_x({{"type", "object"}}, json::array()).message ==
          "argument /x must be an object, got array");
    CHECK(check_x({{"type", {"string", "null"}}}, true).message ==
          "argument /x must be a string or null, got boolean true");
    CHECK(accepts(with_property({{"type", {"string", "null"}}}), {{"x", nullptr}}));
}

TEST_CASE("integer means a number without a fractional part", "[validator][arguments]") {
    const json schema = ullm::schema::object({{"days", ullm::schema::integer()}}, {"days"});
    CHECK(accepts(schema, {{"days", 3}}));
    CHECK(accepts(schema, {{"days", -3}}));
    CHECK(accepts(schema, {{"days", 3.0}}));
    CHECK(accepts(schema, {{"days", std::numeric_limits<std::int64_t>::max()}}));
    CHECK(accepts(schema, {{"days", std::numeric_limits<std::uint64_t>::max()}}));
    CHECK(accepts(schema, {{"days", 9007199254740992.0}}));

    const auto fractional = check_arguments(schema, {{"days", 3.5}});
    CHECK(fractional.path == "/days");
    CHECK(fractional.message == "argument /days must be an integer, got number 3.5");
    CHECK(check_arguments(schema, {{"days", "3"}}).message ==
          "argument /days must be an integer, got string \"3\"");
    CHECK(check_arguments(schema, {{"days", 1e300}}).message ==
          "argument /days must be an integer, got number 1e+300 (outside the safe integer range)");
}

TEST_CASE("enum and const compare JSON values", "[validator][arguments]") {
    const json schema = ullm::schema::object({{"unit", ullm::schema::enumeration({"c", "f"})}});
    CHECK(accepts(schema, {{"unit", "c"}}));
    const auto failure = check_arguments(schema, {{"unit", "k"}});
    CHECK(failure.path == "/unit");
    CHECK(failure.message == "argument /unit must be one of \"c\", \"f\", got string \"k\"");

    CHECK(accepts(with_property({{"enum", {1, {{"a", 1}}}}}), {{"x", {{"a", 1}}}}));
    CHECK(accepts(with_property({{"enum", {1, 2}}}), {{"x", 2.0}}));
    CHECK(check_x({{"enum", {1, 2}}}, 3).failed);

    CHECK(accepts(with_property({{"const", "v1"}}), {{"x", "v1"}}));
    CHECK(check_x({{"const", "v1"}}, "v2").message ==
          "argument /x must be \"v1\", got string \"v2\"");
}

TEST_CASE("minLength and maxLength count code points", "[validator][arguments]") {
    const json bounded = {{"type", "string"}, {"minLength", 2}, {"maxLength", 5}};
    CHECK(accepts(with_property(bounded), {{"x", "h\xc3\xa9llo"}}));  // 5 code points, 6 bytes
    CHECK(check_x(bounded, "h").message == "argument /x must be at least 2 characters long, got 1");
    CHECK(check_x(bounded, "abcdef").message ==
          "argument /x must be at most 5 characters long, got 6");
}

TEST_CASE("pattern is searched, not anchored", "[validator][arguments]") {
    const json digits = {{"type", "string"}, {"pattern", "[0-9]+"}};
    CHECK(accepts(with_property(digits), {{"x", "abc123"}}));
    CHECK(check_x(digits, "abc").message ==
          "argument /x must match the pattern \"[0-9]+\", got \"abc\"");
    const json anchored = {{"type", "string"}, {"pattern", "^[a-z]{3}$"}};
    CHECK(accepts(with_property(anchored), {{"x", "abc"}}));
    CHECK(check_x(anchored, "abcd").failed);
}

TEST_CASE("a backtracking-prone pattern is answered in linear time",
          "[validator][arguments][pattern]") {
    // std::regex took exponential time on these: more than 30 s for the 18-byte string.
    const json nested = {{"type", "string"}, {"pattern", "^(a+)+$"}};
    const auto failure = check_x(nested, "aaaaaaaaaaaaaaaaa!");
    CHECK(failure.message ==
          "argument /x must match the pattern \"^(a+)+$\", got \"aaaaaaaaaaaaaaaaa!\"");
    CHECK(accepts(with_property(nested), {{"x", "aaaaaaaaaaaaaaaaa"}}));
    const json overlapping = {{"type", "string"}, {"pattern", "^(x+x+)+y$"}};
    CHECK(check_x(overlapping, std::string(ullm::max_pattern_subject_bytes, 'x')).failed);
    CHECK(accepts(with_property(overlapping), {{"x", "xxxxy"}}));
    const json alternatives = {{"type", "string"}, {"pattern", "^(a|a)*$"}};
    CHECK(check_x(alternatives, std::string(1000, 'a') + "b").failed);
}

TEST_CASE("patterns keep ECMAScript's meaning under RE2", "[validator][arguments][pattern]") {
    const auto matches = [](const std::string& pattern, const std::string& text) {
        INFO(pattern << " against " << text);
        return !check_x({{"type", "string"}, {"pattern", pattern}}, text).failed;
    };
    // Anchors: `$` is the end of the string, not before a final newline.
    CHECK(matches("^[a-z]{3}$", "abc"));
    CHECK_FALSE(matches("^[a-z]{3}$", "abc\n"));
    CHECK_FALSE(matches("^b", "a\nb"));
    CHECK(matches("b", "a\nb"));  // searched, not anchored
    // Classes: \d and \w are ASCII, as in ECMAScript.
    CHECK(matches("^\\d{4}-\\d{2}-\\d{2}$", "2024-05-01"));
    CHECK_FALSE(matches("^\\d$", "\u0663"));  // ARABIC-INDIC DIGIT THREE
    CHECK(matches("^\\w+$", "snake_case_1"));
    CHECK_FALSE(matches("^\\w+$", "caf\u00e9"));
    CHECK(matches("^[A-Z][a-z]+$", "Berlin"));
    // \s is ECMAScript's: \v, NBSP, the Unicode spaces and BOM too.
    CHECK(matches("^\\s$", "\v"));
    CHECK(matches("^\\s$", "\u00a0"));
    CHECK(matches("^\\s$", "\u3000"));
    CHECK(matches("^[\\s]$", "\ufeff"));
    CHECK_FALSE(matches("\\S", " \t\u2028"));
    CHECK(matches("^[\\S]$", "x"));
    CHECK_FALSE(matches("^[\\S]$", "\u00a0"));
    // `.` is any code point but a line terminator.
    CHECK(matches("^.{3}$", "\u65e5\u672c\u8a9e"));
    CHECK(matches("^.$", "\U0001F600"));
    CHECK_FALSE(matches("^.$", "\n"));
    CHECK_FALSE(matches("^.$", "\u2028"));
    // Unicode text and escapes.
    CHECK(matches("^\\p{Lu}\\p{Ll}+$", "\u00c4rger"));
    CHECK(matches("^\\p{Script=Greek}+$", "\u03a9\u03bc\u03b5\u03b3\u03b1"));
    CHECK(matches("^\\p{Letter}+$", "K\u00f6ln"));
    CHECK(matches("^caf\\u00e9$", "caf\u00e9"));
    CHECK(matches("^\\u{1F600}$", "\U0001F600"));
    CHECK(matches("^\\uD83D\\uDE00$", "\U0001F600"));
    CHECK(matches("^\\x41\\cJ$", "A\n"));
    CHECK(matches("^[\\b]$", "\b"));
    // Named groups, and ECMAScript's literal "[" in a class (not a POSIX class).
    CHECK(matches("^(?<year>\\d{4})-(?:\\d\\d)$", "2024-05"));
    CHECK(matches("^[[:alpha:]]$", "a]"));
    CHECK_FALSE(matches("^[[:alpha:]]$", "b"));
    // "[]" matches nothing and "[^]" anything.
    CHECK_FALSE(matches("a[]", "a"));
    CHECK(matches("^a[^]$", "a\n"));
    CHECK(matches("^\\/\\.\\*$", "/.*"));
}

TEST_CASE("a compiled schema validates like the free functions", "[validator][pattern]") {
    const json schema = with_property({{"type", "string"}, {"pattern", "^[a-z]+$"}});
    const auto compiled = ullm::CompiledSchema::parameters(schema);
    CHECK(compiled.schema() == schema);
    CHECK_NOTHROW(compiled.validate_arguments({{"x", "abc"}}));
    try {
        compiled.validate_arguments({{"x", "ABC"}});
        FAIL("expected a ToolArgumentError");
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.message() == "argument /x must match the pattern \"^[a-z]+$\", got \"ABC\"");
    }
    CHECK_THROWS_AS(compiled.validate_arguments(json::array()), ullm::ToolArgumentError);
    const auto value = ullm::CompiledSchema::value({{"type", "string"}, {"pattern", "^\\d+$"}});
    CHECK_NOTHROW(value.validate_value("123"));
    CHECK_THROWS_AS(value.validate_value("12a"), ullm::ToolArgumentError);
    // Copies share the compiled state.
    const auto copy = compiled;  // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(&copy.schema() == &compiled.schema());
    CHECK_THROWS_AS(
        ullm::CompiledSchema::parameters(with_property({{"type", "string"}, {"pattern", "(?=a)"}})),
        ullm::ToolDefinitionError);
    CHECK_THROWS_AS(ullm::CompiledSchema::parameters({{"type", "string"}}),
                    ullm::ToolDefinitionError);
}

TEST_CASE("pattern subjects are bounded", "[validator][arguments]") {
    const json alternation = {{"type", "string"}, {"pattern", "^(a|b)*$"}};
    CHECK(accepts(with_property(alternation),
                  {{"x", std::string(ullm::max_pattern_subject_bytes, 'a')}}));
    const auto failure = check_x(alternation, std::string(200000, 'a'));
    CHECK(failure.failed);
    CHECK(failure.message.find("is too long to check against the pattern") != std::string::npos);
    // Strings without a pattern are not limited.
    CHECK(accepts(with_property({{"type", "string"}}), {{"x", std::string(200000, 'a')}}));
}

TEST_CASE("numeric bounds are enforced exactly", "[validator][arguments]") {
    const json bounded = {{"type", "number"}, {"minimum", 1}, {"maximum", 10}};
    CHECK(accepts(with_property(bounded), {{"x", 1}}));
    CHECK(accepts(with_property(bounded), {{"x", 10.0}}));
    CHECK(check_x(bounded, 0.5).message == "argument /x must be >= 1, got 0.5");
    CHECK(check_x(bounded, 11).message == "argument /x must be <= 10, got 11");

    const json exclusive = {{"exclusiveMinimum", 0}, {"exclusiveMaximum", 1.5}};
    CHECK(accepts(with_property(exclusive), {{"x", 0.1}}));
    CHECK(check_x(exclusive, 0).message == "argument /x must be > 0, got 0");
    CHECK(check_x(exclusive, 1.5).message == "argument /x must be < 1.5, got 1.5");

    // Large integers compare exactly, whatever their signedness.
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    CHECK(check_x({{"maximum", big - 1}}, big).failed);
    CHECK(accepts(with_property({{"maximum", big}}), {{"x", big}}));
    CHECK(check_x({{"maximum", big}}, std::numeric_limits<std::uint64_t>::max()).failed);
    CHECK(accepts(with_property({{"minimum", -1}}),
                  {{"x", std::numeric_limits<std::uint64_t>::max()}}));
    CHECK(check_x({{"minimum", std::numeric_limits<std::uint64_t>::max()}}, -1).failed);
}

TEST_CASE("multipleOf is exact for integers and tolerant for decimals", "[validator][arguments]") {
    CHECK(accepts(with_property({{"multipleOf", 5}}), {{"x", 15}}));
    CHECK(accepts(with_property({{"multipleOf", 5}}), {{"x", -15}}));
    // -2^63 is a multiple of 2 but not of 5; its magnitude does not fit int64_t.
    CHECK(accepts(with_property({{"multipleOf", 2}}),
                  {{"x", std::numeric_limits<std::int64_t>::min()}}));
    CHECK(check_x({{"multipleOf", 5}}, std::numeric_limits<std::int64_t>::min()).failed);
    CHECK(check_x({{"multipleOf", 5}}, 7).message == "argument /x must be a multiple of 5, got 7");
    CHECK(accepts(with_property({{"multipleOf", 0.1}}), {{"x", 0.3}}));
    CHECK(accepts(with_property({{"multipleOf", 0.01}}), {{"x", 19.99}}));
    CHECK(check_x({{"multipleOf", 0.1}}, 0.35).failed);
    CHECK(accepts(with_property({{"multipleOf", 0.5}}), {{"x", 3}}));
}

TEST_CASE("array constraints and item paths", "[validator][arguments]") {
    const json tags = {{"type", "array"},
                       {"items", {{"type", "string"}}},
                       {"minItems", 1},
                       {"maxItems", 3},
                       {"uniqueItems", true}};
    CHECK(accepts(with_property(tags), {{"x", {"a", "b"}}}));
    CHECK(check_x(tags, json::array()).message == "argument /x must have at least 1 items, got 0");
    CHECK(check_x(tags, {"a", "b", "c", "d"}).message ==
          "argument /x must have at most 3 items, got 4");
    CHECK(check_x(tags, {"a", "b", "a"}).message ==
          "argument /x must not contain duplicate items (items 0 and 2 are equal)");
    const auto item = check_x(tags, {"a", 2});
    CHECK(item.path == "/x/1");
    CHECK(item.message == "argument /x/1 must be a string, got number 2");

    const json unique = {{"uniqueItems", true}};
    CHECK(check_x(unique, {1, 1.0}).failed);
    CHECK(check_x(unique, {json{{"a", {1, 2}}}, json{{"a", {1, 2}}}}).failed);
    CHECK(accepts(with_property(unique), {{"x", {json{{"a", 1}}, json{{"a", 2}}, 1, "1"}}}));
    CHECK(accepts(with_property({{"uniqueItems", false}}), {{"x", {1, 1}}}));
}

TEST_CASE("required properties must be present", "[validator][arguments]") {
    const json schema = ullm::schema::object(
        {{"city", ullm::schema::string()}, {"unit", ullm::schema::string()}}, {"city"});
    CHECK(accepts(schema, {{"city", "Berlin"}}));
    const auto failure = check_arguments(schema, {{"unit", "c"}});
    CHECK(failure.path == "/city");
    CHECK(failure.message == "argument /city is required but missing");
}

TEST_CASE("additionalProperties false rejects unknown names and lists the allowed ones",
          "[validator][arguments]") {
    const json schema = ullm::schema::object(
        {{"city", ullm::schema::string()}, {"unit", ullm::schema::string()}}, {"city"});
    const auto failure = check_arguments(schema, {{"cty", "Berlin"}});
    CHECK(failure.path.empty());
    CHECK(failure.message ==
          "argument (root) has unexpected property \"cty\"; allowed: \"city\", \"unit\"");
    CHECK(check_arguments(ullm::schema::object(), {{"a", 1}}).message ==
          "argument (root) has unexpected property \"a\"; allowed: none");
}

TEST_CASE("additionalProperties as a schema or absent", "[validator][arguments]") {
    const json typed = json::parse(
        R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}})");
    CHECK(accepts(typed, {{"a", "x"}, {"b", 1}}));
    const auto failure = check_arguments(typed, {{"a", "x"}, {"b", "1"}});
    CHECK(failure.path == "/b");
    CHECK(failure.message == "argument /b must be an integer, got string \"1\"");
    CHECK(accepts(json::parse(R"({"type":"object","properties":{"a":{"type":"string"}}})"),
                  {{"anything", {1, 2}}}));
    CHECK(accepts(root_with("additionalProperties", true), {{"anything", 1}}));
}

TEST_CASE("minProperties and maxProperties", "[validator][arguments]") {
    const json schema = json::parse(R"({"type":"object","minProperties":1,"maxProperties":2})");
    CHECK(accepts(schema, {{"a", 1}}));
    CHECK(check_arguments(schema, json::object()).message ==
          "argument (root) must have at least 1 properties, got 0");
    CHECK(check_arguments(schema, {{"a", 1}, {"b", 2}, {"c", 3}}).message ==
          "argument (root) must have at most 2 properties, got 3");
}

TEST_CASE("anyOf needs one matching alternative", "[validator][arguments]") {
    const json id = {{"anyOf", {{{"type", "string"}}, {{"type", "integer"}, {"minimum", 1}}}}};
    CHECK(accepts(with_property(id), {{"x", "abc"}}));
    CHECK(accepts(with_property(id), {{"x", 2}}));
    CHECK(check_x(id, true).message ==
          "argument /x must be a string or an integer, got boolean true");
    CHECK(check_x(id, 0).message ==
          "argument /x does not match any of the allowed alternatives (anyOf): alternative 1: "
          "argument /x must be a string, got number 0; alternative 2: argument /x must be >= 1, "
          "got 0");
}

TEST_CASE("nullable values read naturally when they fail", "[validator][arguments]") {
    const json schema =
        ullm::schema::object({{"note", ullm::schema::nullable(ullm::schema::string())}});
    CHECK(accepts(schema, {{"note", nullptr}}));
    CHECK(accepts(schema, {{"note", "hi"}}));
    CHECK(check_arguments(schema, {{"note", 3}}).message ==
          "argument /note must be a string or null, got number 3");
}

TEST_CASE("oneOf needs exactly one matching alternative", "[validator][arguments]") {
    const json number = {{"oneOf", {{{"type", "integer"}}, {{"type", "number"}, {"minimum", 10}}}}};
    CHECK(accepts(with_property(number), {{"x", 3}}));
    CHECK(accepts(with_property(number), {{"x", 10.5}}));
    CHECK(check_x(number, 12).message ==
          "argument /x matches more than one of the alternatives (oneOf): alternatives 1 and 2 "
          "both match; it must match exactly one");
    CHECK(check_x(number, "3").message ==
          "argument /x must be an integer or a number, got string \"3\"");
}

TEST_CASE("allOf needs every alternative to match", "[validator][arguments]") {
    const json both = {{"allOf", {{{"type", "string"}}, {{"minLength", 3}}}}};
    CHECK(accepts(with_property(both), {{"x", "abc"}}));
    CHECK(check_x(both, "ab").message == "argument /x must be at least 3 characters long, got 2");
    CHECK(check_x(both, 5).message == "argument /x must be a string, got number 5");
}

TEST_CASE("$ref is followed, including recursive definitions", "[validator][arguments]") {
    const json tree = json::parse(R"({"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},
        "required":["root"],
        "$defs":{"node":{"type":"object","required":["value"],"properties":{"value":{"type":"integer"},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}})");
    CHECK(accepts(
        tree,
        json::parse(R"({"root":{"value":1,"children":[{"value":2},{"value":3,"children":[]}]}})")));
    const auto failure = check_arguments(
        tree, json::parse(R"({"root":{"value":1,"children":[{"value":2},{"value":"3"}]}})"));
    CHECK(failure.path == "/root/children/1/value");
    CHECK(failure.message ==
          "argument /root/children/1/value must be an integer, got string \"3\"");

    const json legacy =
        json::parse(R"({"type":"object","properties":{"u":{"$ref":"#/definitions/unit"}},
        "definitions":{"unit":{"enum":["c","f"]}}})");
    CHECK(accepts(legacy, {{"u", "c"}}));
    CHECK(check_arguments(legacy, {{"u", "k"}}).path == "/u");

    const json self = json::parse(
        R"({"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}}})");
    CHECK(accepts(self, json::parse(R"({"next":{"next":{"v":1}}})")));
    CHECK(check_arguments(self, json::parse(R"({"next":{"next":{"v":"1"}}})")).path ==
          "/next/next/v");
}

TEST_CASE("JSON pointer paths escape ~ and /", "[validator][arguments]") {
    const json schema =
        json::parse(R"({"type":"object","additionalProperties":{"type":"string"}})");
    CHECK(check_arguments(schema, {{"a/b~c", 1}}).path == "/a~1b~0c");
}

TEST_CASE("prototype-sensitive keys are rejected at any depth", "[validator][arguments]") {
    const json open = root_with("additionalProperties", true);
    for (const char* key : {"__proto__", "constructor", "prototype"}) {
        INFO(key);
        const auto root = check_arguments(open, {{key, 1}});
        CHECK(root.path == std::string("/") + key);
        CHECK(root.message == std::string("argument /") + key + " is not allowed: \"" + key +
                                  "\" is a reserved property name");
        CHECK(check_arguments(open, {{"a", {{key, {{"b", 1}}}}}}).path == std::string("/a/") + key);
        CHECK(check_arguments(open, {{"list", {1, {{"deep", {{key, nullptr}}}}}}}).path ==
              std::string("/list/1/deep/") + key);
    }
    // Values equal to those names are fine.
    CHECK(accepts(open, {{"name", "constructor"}}));
}

TEST_CASE("argument depth is bounded", "[validator][arguments]") {
    const json open = root_with("additionalProperties", true);
    // The root object is level 1.
    CHECK(accepts(open, {{"a", nested_arrays(ullm::max_argument_depth - 1)}}));
    const auto failure = check_arguments(open, {{"a", nested_arrays(ullm::max_argument_depth)}});
    CHECK(failure.failed);
    CHECK(failure.message.find("is nested too deeply (more than 64 levels)") != std::string::npos);

    json deep_objects = json::object();
    for (std::size_t i = 0; i < 200; ++i) deep_objects = json{{"n", deep_objects}};
    CHECK(check_arguments(open, deep_objects).failed);
}

TEST_CASE("non-finite numbers and invalid UTF-8 are rejected", "[validator][arguments]") {
    const json open = root_with("additionalProperties", true);
    CHECK(check_arguments(open, {{"a", std::numeric_limits<double>::quiet_NaN()}}).message ==
          "argument /a must be a finite number");
    CHECK(check_arguments(open, {{"a", {1, std::numeric_limits<double>::infinity()}}}).path ==
          "/a/1");
    CHECK(check_arguments(open, {{"a", "bad \xff"}}).message ==
          "argument /a must be valid UTF-8 text");
    CHECK(check_arguments(open, {{"bad \xc0\xaf", 1}}).failed);
}

TEST_CASE("pathological schemas hit the evaluation budget instead of hanging",
          "[validator][arguments]") {
    // Each level is anyOf of two references to the next: 2^40 paths when nothing matches.
    json defs = json::object();
    for (int i = 0; i < 40; ++i) {
        const std::string next = "#/$defs/d" + std::to_string(i + 1);
        defs["d" + std::to_string(i)] = {{"anyOf", {{{"$ref", next}}, {{"$ref", next}}}}};
    }
    defs["d40"] = {{"type", "string"}};
    json schema = with_property({{"$ref", "#/$defs/d0"}});
    schema["$defs"] = defs;
    const auto failure = check_arguments(schema, {{"x", 1}});
    CHECK(failure.failed);
    CHECK(failure.message.find("too expensive") != std::string::npos);
}

TEST_CASE("uniqueItems compares items by their JSON value", "[validator][arguments]") {
    const json unique = {{"type", "array"}, {"uniqueItems", true}};
    const auto duplicated = [&](const json& items) { return check_x(unique, items).failed; };
    CHECK(duplicated(json::parse("[1, 1.0]")));
    CHECK(duplicated(json::parse("[0, -0.0]")));
    CHECK(duplicated(json::parse("[1.5, 2, 1.5]")));
    CHECK(duplicated(json::parse(R"([{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}])")));
    CHECK(duplicated(json::parse("[9223372036854775808, 9223372036854775808.0]")));
    CHECK(duplicated(json::parse("[-9223372036854775808, -9223372036854775808.0]")));
    CHECK(duplicated(json::parse(R"(["a", "b", "a"])")));
    CHECK(duplicated(json::parse("[null, null]")));
    CHECK_FALSE(duplicated(json::parse(R"([0, false, null, "0", [0], {"0": 0}])")));
    CHECK_FALSE(duplicated(json::parse("[1, 1.5, 2, 1e300, 1e-300]")));
    CHECK_FALSE(duplicated(json::parse(R"([{"a": 1}, {"a": 1, "b": 1}, [1, 2], [2, 1]])")));
    CHECK_FALSE(duplicated(json::parse(R"(["a\"b", "a", "b"])")));
    const auto failure = check_x(unique, json::parse(R"([3, "x", 3.0])"));
    CHECK(failure.message.find("items 0 and 2 are equal") != std::string::npos);
    json many = json::array();
    for (int i = 0; i < 20000; ++i) many.push_back(i);
    CHECK_FALSE(duplicated(many));
    many.push_back(19999.0);
    CHECK(duplicated(many));
}

}  // namespace validator_test
