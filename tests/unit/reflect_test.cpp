#include <ullm/core/error.hpp>
#include <ullm/tools/reflect.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/tool_registry.hpp>
#include <ullm/tools/validator.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace reflect_test {

using ullm::json;

enum class Priority { low, normal, urgent };
ULLM_REFLECT_ENUM(Priority, low, normal, urgent)

struct Address {
    std::string city;
    std::optional<std::string> postcode;
};
ULLM_REFLECT(Address, city, postcode)

struct Ticket {
    std::string title;
    Priority priority = Priority::normal;
    std::vector<std::string> labels;
    std::optional<Address> address;
    std::uint8_t severity = 0;
    double score = 0;
    bool open = false;
};
ULLM_REFLECT(Ticket, title, priority, labels, address, severity, score, open)

inline ullm::TypeDescription ullm_describe(ullm::schema_tag<Ticket>) {
    return {.description = "A support ticket", .fields = {{"title", "One line"}}};
}

struct Misdescribed {
    int a = 0;
};
ULLM_REFLECT(Misdescribed, a)
inline ullm::TypeDescription ullm_describe(ullm::schema_tag<Misdescribed>) {
    return {.description = {}, .fields = {{"b", "no such field"}}};
}

// A type with its own conversions and only its schema described.
struct Point {
    int x = 0;
    int y = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Point, x, y)
ULLM_REFLECT_SCHEMA(Point, x, y)

// A type that contains itself has no finite inline schema.
struct Node {
    std::vector<Node> children;
};
ULLM_REFLECT(Node, children)

using ullm::json;

TEST_CASE("json_schema_of describes the built-in types", "[reflect]") {
    CHECK(ullm::json_schema_of<bool>() == json{{"type", "boolean"}});
    CHECK(ullm::json_schema_of<double>() == json{{"type", "number"}});
    CHECK(ullm::json_schema_of<std::string>() == json{{"type", "string"}});
    CHECK(ullm::json_schema_of<std::int16_t>() ==
          json{{"type", "integer"}, {"minimum", -32768}, {"maximum", 32767}});
    CHECK(ullm::json_schema_of<std::uint64_t>() == json{{"type", "integer"}, {"minimum", 0}});
    CHECK(ullm::json_schema_of<std::int64_t>() == json{{"type", "integer"}});
    CHECK(ullm::json_schema_of<std::vector<int>>()["items"]["type"] == "integer");
    CHECK(ullm::json_schema_of<std::set<std::string>>()["uniqueItems"] == true);
    const json pair = ullm::json_schema_of<std::array<double, 2>>();
    CHECK(pair["minItems"] == 2);
    CHECK(pair["maxItems"] == 2);
    CHECK(ullm::json_schema_of<std::map<std::string, int>>()["additionalProperties"]["type"] ==
          "integer");
    CHECK(ullm::json_schema_of<std::optional<bool>>() ==
          json{{"anyOf", {{{"type", "boolean"}}, {{"type", "null"}}}}});
    // Every schema it writes is one the strict validator accepts.
    CHECK_NOTHROW(ullm::validate_value_schema(ullm::json_schema_of<json>()));
}

TEST_CASE("a described struct is a strict object with every field required", "[reflect]") {
    const json schema = ullm::json_schema_of<Ticket>();
    CHECK(schema["type"] == "object");
    CHECK(schema["additionalProperties"] == false);
    CHECK(schema["required"] ==
          json({"title", "priority", "labels", "address", "severity", "score", "open"}));
    CHECK(schema["description"] == "A support ticket");
    CHECK(schema["properties"]["title"]["description"] == "One line");
    CHECK(schema["properties"]["priority"] ==
          json{{"type", "string"}, {"enum", {"low", "normal", "urgent"}}});
    // The optional nested struct: its schema or null.
    CHECK(schema["properties"]["address"]["anyOf"][0]["properties"]["city"]["type"] == "string");
    CHECK(schema["properties"]["address"]["anyOf"][1] == json{{"type", "null"}});
    CHECK(schema["properties"]["severity"]["maximum"] == 255);
    CHECK_NOTHROW(ullm::validate_schema(schema));
    CHECK(ullm::json_schema_of<reflect_test::Point>()["required"] == json({"x", "y"}));
}

TEST_CASE("a described struct round-trips through json", "[reflect]") {
    Ticket ticket;
    ticket.title = "Printer on fire";
    ticket.priority = Priority::urgent;
    ticket.labels = {"hardware"};
    ticket.address = Address{"Leeds", std::nullopt};
    ticket.severity = 9;
    ticket.score = 0.5;
    ticket.open = true;
    const json encoded = ticket;
    CHECK(encoded["priority"] == "urgent");
    CHECK(encoded["address"]["postcode"].is_null());
    CHECK_NOTHROW(ullm::validate_value(ullm::json_schema_of<Ticket>(), encoded));
    const auto decoded = encoded.get<Ticket>();
    CHECK(decoded.title == ticket.title);
    CHECK(decoded.priority == Priority::urgent);
    CHECK(decoded.labels == ticket.labels);
    REQUIRE(decoded.address);
    CHECK(decoded.address->city == "Leeds");
    CHECK_FALSE(decoded.address->postcode);
    CHECK(decoded.severity == 9);
    CHECK(decoded.open);
}

TEST_CASE("decoding a described struct names the field that fails", "[reflect]") {
    json value = Ticket{};
    value.erase("title");
    try {
        (void)value.get<Ticket>();
        FAIL("decoded without its title");
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.path() == "/title");
        CHECK(error.reason() == "is required but missing");
    }
    value = Ticket{};
    value["address"] = {{"city", 7}, {"postcode", nullptr}};
    try {
        (void)value.get<Ticket>();
        FAIL("decoded a number as a city");
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.path() == "/address/city");
    }
    value = Ticket{};
    value["priority"] = "whenever";
    try {
        (void)value.get<Ticket>();
        FAIL("decoded an unknown priority");
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.path() == "/priority");
        CHECK(error.reason() == "must be one of \"low\", \"normal\", \"urgent\", not \"whenever\"");
    }
    // An optional field may be missing as well as null.
    value = Ticket{};
    value.erase("address");
    CHECK_FALSE(value.get<Ticket>().address);
    CHECK(ullm::test::error_code_of([] { (void)json::array().get<Address>(); }) ==
          "invalid_tool_arguments");
}

TEST_CASE("json_schema_of refuses what it cannot describe", "[reflect]") {
    CHECK(ullm::test::error_code_of([] {
              (void)ullm::json_schema_of<reflect_test::Misdescribed>();
          }) == "invalid_tool_schema");
    CHECK(ullm::test::error_code_of([] { (void)ullm::json_schema_of<reflect_test::Node>(); }) ==
          "invalid_tool_schema");
    // The depth count is back to zero after the failure.
    CHECK_NOTHROW(ullm::json_schema_of<Ticket>());
}

TEST_CASE("a typed tool without parameters takes the schema of its arguments", "[reflect]") {
    const ullm::Tool tool = ullm::define_tool(ullm::TypedToolDefinition<Address>{
        .name = "where",
        .description = "Look up an address",
        .parameters = {},
        .execute = [](const Address& address, ullm::ToolContext&) -> json {
            return address.city;
        }});
    CHECK(tool.parameters() == ullm::json_schema_of<Address>());
    ullm::ToolRegistry registry({tool});
    ullm::ToolContext context;
    const auto good = registry.run("where", json{{"city", "York"}, {"postcode", nullptr}}, context);
    CHECK_FALSE(good.is_error);
    CHECK(good.result == "York");
    // Strict validation uses the derived schema: the postcode is required (it may be null).
    const auto bad = registry.run("where", json{{"city", "York"}}, context);
    CHECK(bad.is_error);
}

}  // namespace reflect_test
