#include <ullm/tools/tool.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/schema.hpp>

#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <string>

#include "support/catch.hpp"

namespace tool_test {

using ullm::json;

struct WeatherArgs {
    std::string city;
    int days = 1;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(WeatherArgs, city, days)

struct Forecast {
    std::string city;
    int days = 0;
    std::string summary;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Forecast, city, days, summary)

// Arguments type whose decoding throws a non-nlohmann exception.
struct Picky {
    int value = 0;
};
void from_json(const json& j, Picky& picky) {
    picky.value = j.at("value").get<int>();
    if (picky.value < 0) throw std::invalid_argument("value must not be negative");
}

// Arguments type whose decoding reports a precise argument path itself.
struct Precise {
    std::string id;
};
void from_json(const json& j, Precise& precise) {
    precise.id = j.at("id").get<std::string>();
    if (precise.id.empty()) throw ullm::ToolArgumentError("/id", "must not be empty");
}

namespace {

ullm::Tool weather_tool() {
    return ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather by city name",
         .parameters = ullm::schema::object({{"city", ullm::schema::string("The city to look up")}},
                                            {"city"}),
         .execute = [](const json& args, ullm::ToolContext&) -> json {
             return {{"city", args["city"]}, {"forecast", "Sunny"}};
         }});
}

ullm::Tool tool_named(std::string name, std::string description = "Does a thing",
                      json parameters = ullm::schema::object()) {
    return ullm::define_tool(
        {.name = std::move(name),
         .description = std::move(description),
         .parameters = std::move(parameters),
         .execute = [](const json&, ullm::ToolContext&) -> json { return {}; }});
}

// The code of the ToolDefinitionError validate_tool throws, or "" when the tool is valid.
std::string tool_code(const ullm::Tool& tool) {
    try {
        ullm::validate_tool(tool);
    } catch (const ullm::ToolDefinitionError& error) {
        CHECK(error.status() == 400);
        CHECK_FALSE(error.retryable());
        return error.code();
    }
    return "";
}

std::string tool_message(const ullm::Tool& tool) {
    try {
        ullm::validate_tool(tool);
    } catch (const ullm::ToolDefinitionError& error) {
        return error.message();
    }
    return "";
}

ullm::Tool typed_weather_tool() {
    return ullm::define_tool<WeatherArgs>(
        {.name = "forecast",
         .description = "Forecast for a city",
         .parameters = ullm::schema::object(
             {{"city", ullm::schema::string()}, {"days", ullm::schema::integer()}},
             {"city", "days"}),
         // The result may be any type convertible to json.
         .execute = [](const WeatherArgs& args, ullm::ToolContext&) {
             return Forecast{args.city, args.days, "Sunny"};
         }});
}

template <class Args>
ullm::Tool echo_tool() {
    return ullm::define_tool<Args>(
        {.name = "echo",
         .description = "Echo",
         .parameters = ullm::schema::object({}, {}, "", {.additional_properties = true}),
         .execute = [](const Args&, ullm::ToolContext&) -> json { return "ok"; }});
}

// The ToolArgumentError tool.execute throws for `args`.
std::pair<std::string, std::string> decode_failure(const ullm::Tool& tool, const json& args) {
    ullm::ToolContext context;
    try {
        (void)tool.execute(args, context);
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.code() == "invalid_tool_arguments");
        return {error.path(), error.message()};
    }
    FAIL("no ToolArgumentError was thrown");
    return {};
}

}  // namespace

TEST_CASE("define_tool keeps the definition and preserves identity", "[tool]") {
    const ullm::Tool weather = weather_tool();
    CHECK(weather.name() == "lookup_weather");
    CHECK(weather.description() == "Look up weather by city name");
    CHECK(weather.parameters()["required"] == json{"city"});
    CHECK(weather.definition().execute);

    const ullm::Tool copy = weather;  // NOLINT(performance-unnecessary-copy-initialization)
    CHECK(copy.same_as(weather));
    CHECK(&copy.definition() == &weather.definition());
    CHECK_FALSE(weather_tool().same_as(weather));
    CHECK(tool_code(weather).empty());
}

TEST_CASE("Tool::execute runs the callback with the context", "[tool]") {
    const ullm::Tool weather = weather_tool();
    ullm::ToolContext context;
    CHECK(weather.execute({{"city", "Berlin"}}, context) ==
          json{{"city", "Berlin"}, {"forecast", "Sunny"}});

    std::string seen;
    const ullm::Tool probe =
        ullm::define_tool({.name = "probe",
                           .description = "Reports its call id",
                           .parameters = ullm::schema::object(),
                           .execute = [&seen](const json&, ullm::ToolContext& ctx) -> json {
                               seen = ctx.tool_call_id + "@" + ctx.session_id;
                               return nullptr;
                           }});
    ullm::ToolContext filled{.session_id = "s1", .tool_call_id = "call_7"};
    (void)probe.execute(json::object(), filled);
    CHECK(seen == "call_7@s1");
}

TEST_CASE("define_tool does not validate; validate_tool does", "[tool]") {
    ullm::Tool bad = ullm::define_tool({.name = "not valid!", .description = ""});
    CHECK(bad.name() == "not valid!");
    CHECK(tool_code(bad) == "invalid_tool_name");
}

TEST_CASE("tool names must match [A-Za-z0-9_-]{1,64}", "[tool]") {
    CHECK(tool_code(tool_named("a")).empty());
    CHECK(tool_code(tool_named("Get_weather-2")).empty());
    CHECK(tool_code(tool_named(std::string(64, 'x'))).empty());
    CHECK(tool_code(tool_named("")) == "invalid_tool_name");
    CHECK(tool_code(tool_named(std::string(65, 'x'))) == "invalid_tool_name");
    CHECK(tool_code(tool_named("get weather")) == "invalid_tool_name");
    CHECK(tool_code(tool_named("get.weather")) == "invalid_tool_name");
    CHECK(tool_code(tool_named("wetter_\xc3\xa4")) == "invalid_tool_name");
    CHECK(tool_code(tool_named("bad\xff")) == "invalid_tool_name");
    CHECK(tool_message(tool_named("get weather")) ==
          "tool name \"get weather\" is invalid: names must match [A-Za-z0-9_-]{1,64}");
}

TEST_CASE("tool descriptions must be non-empty text", "[tool]") {
    CHECK(tool_code(tool_named("t", "")) == "invalid_tool_description");
    CHECK(tool_code(tool_named("t", " \t\n")) == "invalid_tool_description");
    CHECK(tool_code(tool_named("t", "bad \xff byte")) == "invalid_tool_description");
    CHECK(tool_code(tool_named("t", "  padded  ")).empty());
    CHECK(tool_message(tool_named("t", "")) == "tool \"t\" needs a non-empty description");
}

TEST_CASE("tool parameters must be a valid object schema", "[tool]") {
    CHECK(tool_code(tool_named("t", "d", json())) == "invalid_tool_schema");
    CHECK(tool_code(tool_named("t", "d", ullm::schema::string())) == "invalid_tool_schema");
    CHECK(tool_code(tool_named("t", "d", json::parse(R"({"type":"object","not":{}})"))) ==
          "unsupported_schema_keyword");
    CHECK(tool_message(tool_named("t", "d", json::parse(R"({"type":"object","not":{}})"))) ==
          "tool \"t\": unsupported schema keyword \"not\" at #: it is not part of the supported "
          "JSON Schema subset");
}

TEST_CASE("tools need an execute callback", "[tool]") {
    const ullm::Tool no_callback =
        ullm::define_tool({.name = "t", .description = "d", .parameters = ullm::schema::object()});
    CHECK(tool_code(no_callback) == "missing_tool_execute");
    ullm::ToolContext context;
    CHECK_THROWS_AS(no_callback.execute(json::object(), context), ullm::ToolDefinitionError);

    const ullm::Tool typed_without = ullm::define_tool<WeatherArgs>(
        {.name = "t", .description = "d", .parameters = ullm::schema::object()});
    CHECK(tool_code(typed_without) == "missing_tool_execute");
}

TEST_CASE("validate_tools rejects exact duplicate names only", "[tool]") {
    CHECK_NOTHROW(ullm::validate_tools({tool_named("Foo"), tool_named("foo"), tool_named("FOO")}));
    try {
        ullm::validate_tools({tool_named("a"), tool_named("b"), tool_named("a")});
        FAIL("duplicates were accepted");
    } catch (const ullm::ToolDefinitionError& error) {
        CHECK(error.code() == "duplicate_tool_name");
        CHECK(error.message().find("\"a\"") != std::string::npos);
    }
    CHECK_THROWS_AS(ullm::validate_tools({tool_named("ok"), tool_named("bad name")}),
                    ullm::ToolDefinitionError);
}

TEST_CASE("ToolContext reports stop requests and passed deadlines", "[tool]") {
    ullm::ToolContext idle;
    CHECK_FALSE(idle.stop_requested());

    std::stop_source source;
    ullm::ToolContext stoppable{.stop_token = source.get_token()};
    CHECK_FALSE(stoppable.stop_requested());
    source.request_stop();
    CHECK(stoppable.stop_requested());

    ullm::ToolContext late{.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1)};
    CHECK(late.stop_requested());
    ullm::ToolContext early{.deadline = std::chrono::steady_clock::now() + std::chrono::hours(1)};
    CHECK_FALSE(early.stop_requested());
}

TEST_CASE("typed tools decode arguments and encode results", "[tool][typed]") {
    const ullm::Tool forecast = typed_weather_tool();
    CHECK(tool_code(forecast).empty());
    ullm::ToolContext context;
    CHECK(forecast.execute({{"city", "Oslo"}, {"days", 3}}, context) ==
          json{{"city", "Oslo"}, {"days", 3}, {"summary", "Sunny"}});
    // A float-encoded integer passes validation and decodes.
    CHECK(forecast.execute({{"city", "Oslo"}, {"days", 2.0}}, context)["days"] == 2);
}

TEST_CASE("typed tools turn decode failures into ToolArgumentError", "[tool][typed]") {
    const ullm::Tool forecast = typed_weather_tool();
    const auto [path, message] = decode_failure(forecast, {{"city", 3}, {"days", 1}});
    CHECK(path.empty());
    CHECK(message == "argument (root) could not be decoded: type must be string, but is number");
    CHECK(decode_failure(forecast, {{"city", "Oslo"}}).second ==
          "argument (root) could not be decoded: key 'days' not found");
    CHECK(decode_failure(forecast, json::array()).second.find("could not be decoded") !=
          std::string::npos);
}

TEST_CASE("typed tools report any exception thrown by from_json", "[tool][typed]") {
    const ullm::Tool picky = echo_tool<Picky>();
    ullm::ToolContext context;
    CHECK(picky.execute({{"value", 1}}, context) == "ok");
    CHECK(decode_failure(picky, {{"value", -1}}).second ==
          "argument (root) could not be decoded: value must not be negative");

    const ullm::Tool precise = echo_tool<Precise>();
    const auto [path, message] = decode_failure(precise, {{"id", ""}});
    CHECK(path == "/id");
    CHECK(message == "argument /id must not be empty");
}

}  // namespace tool_test
