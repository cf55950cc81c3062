#include <ullm/tools/tool_registry.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"

namespace tool_registry_test {

using ullm::json;

namespace {

ullm::Tool weather_tool(std::atomic<int>* calls = nullptr) {
    return ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather by city name",
         .parameters = ullm::schema::object({{"city", ullm::schema::string("The city to look up")},
                                             {"unit", ullm::schema::enumeration({"c", "f"})}},
                                            {"city"}),
         .execute = [calls](const json& args, ullm::ToolContext&) -> json {
             if (calls != nullptr) ++*calls;
             return {{"city", args.value("city", "?")}, {"forecast", "Sunny"}};
         }});
}

ullm::Tool tool_named(std::string name) {
    return ullm::define_tool(
        {.name = std::move(name),
         .description = "Does a thing",
         .parameters = ullm::schema::object(),
         .execute = [](const json&, ullm::ToolContext&) -> json { return 1; }});
}

// A tool whose callback runs `body`.
template <class Body>
ullm::Tool throwing_tool(Body body) {
    return ullm::define_tool({.name = "boom",
                              .description = "Fails",
                              .parameters = ullm::schema::object(),
                              .execute = [body](const json&, ullm::ToolContext&) -> json {
                                  body();
                                  return nullptr;
                              }});
}

std::string definition_code(const std::function<void()>& action) {
    try {
        action();
    } catch (const ullm::ToolDefinitionError& error) {
        return error.code();
    }
    return "";
}

}  // namespace

namespace registry_test {

struct Counter {
    int start = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Counter, start)

}  // namespace registry_test

using registry_test::Counter;

TEST_CASE("a registry keeps tools in insertion order", "[registry]") {
    ullm::ToolRegistry registry;
    CHECK(registry.empty());
    registry.add(tool_named("zeta"));
    registry.add(tool_named("alpha"));
    registry.add(weather_tool());
    CHECK(registry.size() == 3);
    CHECK(registry.names() == std::vector<std::string>{"zeta", "alpha", "lookup_weather"});
    REQUIRE(registry.tools().size() == 3);
    CHECK(registry.tools()[1].name() == "alpha");
    REQUIRE(registry.find("alpha") != nullptr);
    CHECK(registry.find("alpha")->same_as(registry.tools()[1]));
    CHECK(registry.find("ALPHA") == nullptr);
    CHECK(registry.find("") == nullptr);
}

TEST_CASE("add validates the tool and leaves the registry unchanged on failure", "[registry]") {
    ullm::ToolRegistry registry;
    registry.add(tool_named("a"));
    CHECK(definition_code([&] { registry.add(tool_named("bad name")); }) == "invalid_tool_name");
    CHECK(definition_code([&] {
              registry.add(ullm::define_tool(
                  {.name = "b",
                   .description = "d",
                   .parameters = json::parse(R"({"type":"object","if":{}})"),
                   .execute = [](const json&, ullm::ToolContext&) -> json { return 1; }}));
          }) == "unsupported_schema_keyword");
    CHECK(registry.names() == std::vector<std::string>{"a"});
}

TEST_CASE("duplicate names are rejected exactly and case-sensitively", "[registry]") {
    ullm::ToolRegistry registry;
    registry.add(tool_named("Foo"));
    CHECK_NOTHROW(registry.add(tool_named("foo")));
    CHECK(definition_code([&] { registry.add(tool_named("Foo")); }) == "duplicate_tool_name");
    CHECK(registry.names() == std::vector<std::string>{"Foo", "foo"});
    CHECK(definition_code([] {
              ullm::ToolRegistry twice({tool_named("x"), tool_named("x")});
          }) == "duplicate_tool_name");
}

TEST_CASE("a registry built from a vector is validated as a whole", "[registry]") {
    const ullm::ToolRegistry registry({tool_named("a"), weather_tool()});
    CHECK(registry.names() == std::vector<std::string>{"a", "lookup_weather"});
    CHECK(definition_code([] {
              ullm::ToolRegistry broken(
                  {tool_named("a"), ullm::define_tool({.name = "b", .description = " "})});
          }) == "invalid_tool_description");
}

TEST_CASE("run returns the callback's result", "[registry]") {
    const ullm::ToolRegistry registry({weather_tool()});
    ullm::ToolContext context;
    const auto outcome = registry.run("lookup_weather", {{"city", "Berlin"}}, context);
    CHECK_FALSE(outcome.is_error);
    CHECK(outcome.error_code.empty());
    CHECK(outcome.result == json{{"city", "Berlin"}, {"forecast", "Sunny"}});
}

TEST_CASE("an unknown tool is an error outcome listing the available tools", "[registry]") {
    const ullm::ToolRegistry registry({tool_named("a"), tool_named("b")});
    ullm::ToolContext context;
    const auto outcome = registry.run("x", json::object(), context);
    CHECK(outcome.is_error);
    CHECK(outcome.error_code == "unknown_tool");
    CHECK(outcome.result == "Unknown tool \"x\". Available tools: a, b.");

    const ullm::ToolRegistry empty;
    CHECK(empty.run("x", json::object(), context).result ==
          "Unknown tool \"x\". No tools are available.");
    // Whatever bytes the model sent, the text stays serialisable.
    CHECK_NOTHROW(empty.run("bad\xff\n", json::object(), context).result.dump());
}

TEST_CASE("strict mode turns invalid arguments into an error outcome", "[registry]") {
    std::atomic<int> calls{0};
    const ullm::ToolRegistry registry({weather_tool(&calls)});
    ullm::ToolContext context;

    const auto missing = registry.run("lookup_weather", {{"unit", "c"}}, context);
    CHECK(missing.is_error);
    CHECK(missing.error_code == "invalid_tool_arguments");
    CHECK(missing.result ==
          "Invalid arguments for tool \"lookup_weather\": argument /city is required but missing.");

    const auto misspelt = registry.run("lookup_weather", {{"cty", "Berlin"}}, context);
    CHECK(misspelt.result ==
          "Invalid arguments for tool \"lookup_weather\": argument (root) has "
          "unexpected property \"cty\"; allowed: \"city\", \"unit\".");

    const auto wrong_enum = registry.run("lookup_weather", {{"city", "B"}, {"unit", "k"}}, context);
    CHECK(wrong_enum.result ==
          "Invalid arguments for tool \"lookup_weather\": argument /unit must "
          "be one of \"c\", \"f\", got string \"k\".");

    const auto proto = registry.run("lookup_weather", {{"city", "B"}, {"__proto__", 1}}, context);
    CHECK(proto.error_code == "invalid_tool_arguments");
    CHECK(calls == 0);
}

TEST_CASE("a registry checks patterns with its compiled parameters", "[registry][pattern]") {
    const auto code_tool = [](std::string pattern) {
        return ullm::define_tool(
            {.name = "lookup_code",
             .description = "Look up a code",
             .parameters =
                 ullm::json{{"type", "object"},
                            {"properties", {{"code", {{"type", "string"}, {"pattern", pattern}}}}}},
             .execute = [](const json& args, ullm::ToolContext&) -> json { return args["code"]; }});
    };
    ullm::ToolRegistry registry;
    CHECK(definition_code([&] { registry.add(code_tool("^(?=A)")); }) ==
          "unsupported_schema_keyword");
    CHECK(registry.empty());
    registry.add(code_tool("^(a+)+$"));
    ullm::ToolContext context;
    const auto bad = registry.run("lookup_code", {{"code", "aaaaaaaaaaaaaaaaa!"}}, context);
    CHECK(bad.error_code == "invalid_tool_arguments");
    CHECK(bad.result ==
          "Invalid arguments for tool \"lookup_code\": argument /code must match the pattern "
          "\"^(a+)+$\", got \"aaaaaaaaaaaaaaaaa!\".");
    const auto good = registry.run("lookup_code", {{"code", "aaaa"}}, context);
    CHECK_FALSE(good.is_error);
    CHECK(good.result == "aaaa");
    // A copy of the registry shares the compiled parameters and checks the same way.
    const ullm::ToolRegistry copy = registry;
    CHECK(copy.run("lookup_code", {{"code", "b"}}, context).is_error);
    CHECK_FALSE(copy.run("lookup_code", {{"code", "a"}}, context).is_error);
}

TEST_CASE("a tool with an untyped property is refused and never runs", "[registry]") {
    std::atomic<int> calls{0};
    const auto untyped = ullm::define_tool(
        {.name = "store",
         .description = "Store a value",
         .parameters = json::parse(R"({"type":"object","properties":{"value":{}}})"),
         .execute = [&calls](const json&, ullm::ToolContext&) -> json {
             ++calls;
             return nullptr;
         }});
    ullm::ToolRegistry registry;
    CHECK(definition_code([&] { registry.add(untyped); }) == "invalid_tool_schema");
    CHECK(definition_code([&] { ullm::ToolRegistry whole({untyped}); }) == "invalid_tool_schema");
    CHECK(registry.find("store") == nullptr);
    ullm::ToolContext context;
    CHECK(registry.run("store", {{"value", 1}}, context).error_code == "unknown_tool");
    CHECK(calls == 0);
}

TEST_CASE("arguments that are not an object are rejected in both modes", "[registry]") {
    std::atomic<int> calls{0};
    const ullm::ToolRegistry registry({weather_tool(&calls)});
    ullm::ToolContext context;
    for (const auto mode : {ullm::ValidationMode::strict, ullm::ValidationMode::permissive}) {
        const auto outcome = registry.run("lookup_weather", json::array({"Berlin"}), context, mode);
        CHECK(outcome.is_error);
        CHECK(outcome.error_code == "invalid_tool_arguments");
        CHECK(outcome.result ==
              "Invalid arguments for tool \"lookup_weather\": argument (root) "
              "must be an object, got array.");
    }
    CHECK(calls == 0);
}

TEST_CASE("permissive mode skips argument validation", "[registry]") {
    std::atomic<int> calls{0};
    const ullm::ToolRegistry registry({weather_tool(&calls)});
    ullm::ToolContext context;
    const auto outcome = registry.run("lookup_weather", {{"cty", "Berlin"}, {"__proto__", 1}},
                                      context, ullm::ValidationMode::permissive);
    CHECK_FALSE(outcome.is_error);
    CHECK(outcome.result == json{{"city", "?"}, {"forecast", "Sunny"}});
    CHECK(calls == 1);
}

TEST_CASE("exceptions thrown by execute become error outcomes", "[registry]") {
    ullm::ToolContext context;

    const ullm::ToolRegistry std_error(
        {throwing_tool([] { throw std::runtime_error("disk full"); })});
    const auto failed = std_error.run("boom", json::object(), context);
    CHECK(failed.is_error);
    CHECK(failed.error_code == "tool_execution_failed");
    CHECK(failed.result == "Tool \"boom\" failed: disk full");

    const ullm::ToolRegistry unknown({throwing_tool([] { throw 42; })});
    const auto odd = unknown.run("boom", json::object(), context);
    CHECK(odd.error_code == "tool_execution_failed");
    CHECK(odd.result == "Tool \"boom\" failed with an unknown error.");

    const ullm::ToolRegistry cancelled({throwing_tool([] { throw ullm::CancelledError(); })});
    const auto stopped = cancelled.run("boom", json::object(), context);
    CHECK(stopped.error_code == "cancelled");
    CHECK(stopped.result == "Tool \"boom\" failed: the operation was cancelled");

    const ullm::ToolRegistry own_check(
        {throwing_tool([] { throw ullm::ToolArgumentError("/when", "must be in the future"); })});
    const auto rejected = own_check.run("boom", json::object(), context);
    CHECK(rejected.error_code == "invalid_tool_arguments");
    CHECK(rejected.result ==
          "Invalid arguments for tool \"boom\": argument /when must be in the future.");

    const ullm::ToolRegistry messy({throwing_tool([] { throw std::runtime_error("bad \xff"); })});
    const auto cleaned = messy.run("boom", json::object(), context);
    CHECK(cleaned.error_code == "tool_execution_failed");
    CHECK_NOTHROW(cleaned.result.dump());

    const ullm::ToolRegistry verbose(
        {throwing_tool([] { throw std::runtime_error(std::string(100000, 'x')); })});
    CHECK(verbose.run("boom", json::object(), context).result.get<std::string>().size() < 3000);
}

TEST_CASE("typed decode failures become error outcomes", "[registry][typed]") {
    const ullm::ToolRegistry registry({ullm::define_tool<Counter>(
        {.name = "count",
         .description = "Counts from start",
         // Deliberately looser than Counter so that decoding, not validation, fails.
         .parameters = ullm::schema::object(
             {{"start", ullm::schema::any_of({ullm::schema::integer(), ullm::schema::string()})}},
             {"start"}),
         .execute = [](const Counter& counter, ullm::ToolContext&) -> json {
             return counter.start + 1;
         }})});
    ullm::ToolContext context;
    CHECK(registry.run("count", {{"start", 41}}, context).result == 42);

    const auto strict = registry.run("count", {{"start", "41"}}, context);
    CHECK(strict.is_error);
    CHECK(strict.error_code == "invalid_tool_arguments");
    CHECK(strict.result ==
          "Invalid arguments for tool \"count\": argument (root) could not be "
          "decoded: type must be number, but is string.");

    const auto permissive =
        registry.run("count", json::object(), context, ullm::ValidationMode::permissive);
    CHECK(permissive.error_code == "invalid_tool_arguments");
    CHECK(permissive.result ==
          "Invalid arguments for tool \"count\": argument (root) could not be "
          "decoded: key 'start' not found.");
}

TEST_CASE("run passes the context and is reentrant", "[registry]") {
    ullm::ToolRegistry registry;
    registry.add(weather_tool());
    registry.add(ullm::define_tool(
        {.name = "plan_trip",
         .description = "Plans a trip using the weather tool",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [&registry](const json& args, ullm::ToolContext& ctx) -> json {
             const auto weather = registry.run("lookup_weather", {{"city", args["city"]}}, ctx);
             return {{"call", ctx.tool_call_id}, {"weather", weather.result}};
         }}));
    ullm::ToolContext context{.tool_call_id = "call_1"};
    const auto outcome = registry.run("plan_trip", {{"city", "Rome"}}, context);
    CHECK_FALSE(outcome.is_error);
    CHECK(outcome.result ==
          json{{"call", "call_1"}, {"weather", {{"city", "Rome"}, {"forecast", "Sunny"}}}});
}

TEST_CASE("run may be called from many threads at once", "[registry]") {
    std::atomic<int> calls{0};
    const ullm::ToolRegistry registry({weather_tool(&calls), tool_named("other")});
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    threads.reserve(8);
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 200; ++i) {
                ullm::ToolContext context;
                const auto good = registry.run("lookup_weather", {{"city", "Paris"}}, context);
                const auto bad = registry.run("lookup_weather", {{"city", 1}}, context);
                if (good.is_error || !bad.is_error) ++failures;
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(failures == 0);
    CHECK(calls == 8 * 200);
}

}  // namespace tool_registry_test
