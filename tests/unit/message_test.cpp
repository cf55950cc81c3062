#include <ullm/core/error.hpp>
#include <ullm/core/message.hpp>

#include <cmath>
#include <limits>

#include "support/catch.hpp"

namespace message_test {

using ullm::json;

namespace {

ullm::Message full_assistant_message() {
    ullm::Message message;
    message.role = ullm::Role::assistant;
    message.parts = {ullm::ReasoningPart{"thinking about Berlin"}, ullm::TextPart{"Let me check."},
                     ullm::ToolCallPart{"call_1", "lookup_weather", {{"city", "Berlin"}}}};
    message.metadata = {{"pinned", true}};
    message.replay = ullm::ReplayState{"gemini", "gemini-2.5-pro", {{"signature", "abc=="}}};
    return message;
}

std::string failing_path(const json& value) {
    try {
        (void)ullm::parse_message(value);
    } catch (const ullm::InvalidMessageError& error) {
        CHECK(error.code() == "invalid_message");
        CHECK(error.status() == 400);
        return error.path();
    }
    FAIL("parse_message accepted " << value.dump());
    return {};
}

}  // namespace

TEST_CASE("every kind of message round-trips through JSON losslessly", "[message]") {
    const std::vector<ullm::Message> messages = {
        ullm::Message::system("Be brief."),
        ullm::Message{ullm::Role::user,
                      {ullm::TextPart{"What is this?"},
                       ullm::ImagePart{"https://example.com/cat.png", "", ""},
                       ullm::ImagePart{"", "aGVsbG8=", "image/png"},
                       ullm::DocumentPart{"", "JVBERi0=", "application/pdf", "report.pdf"}},
                      json::object(),
                      std::nullopt},
        full_assistant_message(),
        ullm::Message::tool_results({{"call_1", "lookup_weather", {{"forecast", "Sunny"}}, false},
                                     {"call_2", "broken", "it failed", true}}),
    };
    for (const auto& message : messages) {
        const json encoded = ullm::message_to_json(message);
        CHECK(ullm::parse_message(encoded) == message);
        CHECK(ullm::parse_message(json::parse(encoded.dump())) == message);
    }
}

TEST_CASE("message helpers collect text, tool calls and tool results", "[message]") {
    const auto message = full_assistant_message();
    CHECK(message.text() == "Let me check.");
    REQUIRE(message.tool_calls().size() == 1);
    CHECK(message.tool_calls()[0].arguments["city"] == "Berlin");
    const auto results = ullm::Message::tool_results({{"c1", "t", 1, false}}).tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].tool_call_id == "c1");
}

TEST_CASE("the public JSON form can leave the replay state out", "[message]") {
    const auto encoded = ullm::message_to_json(full_assistant_message(), false);
    CHECK_FALSE(encoded.contains("replay"));
    CHECK(encoded.dump().find("abc==") == std::string::npos);
}

TEST_CASE("malformed messages name the JSON path that failed", "[message]") {
    CHECK(failing_path(json::array()) == "");
    CHECK(failing_path({{"parts", json::array()}}) == "/role");
    CHECK(failing_path({{"role", "robot"}, {"parts", json::array()}}) == "/role");
    CHECK(failing_path({{"role", "user"}}) == "/parts");
    CHECK(failing_path({{"role", "user"}, {"parts", "hi"}}) == "/parts");
    CHECK(failing_path({{"role", "user"}, {"parts", {{{"type", "text"}}}}}) == "/parts/0/text");
    CHECK(failing_path({{"role", "user"}, {"parts", {{{"type", "text"}, {"text", 3}}}}}) ==
          "/parts/0/text");
    CHECK(failing_path({{"role", "user"}, {"parts", {{{"type", "video"}}}}}) == "/parts/0/type");
    CHECK(failing_path({{"role", "user"},
                        {"parts", {{{"type", "text"}, {"text", "a"}, {"x", 1}}}}}) == "/parts/0/x");
    CHECK(failing_path({{"role", "user"}, {"parts", json::array()}, {"extra", 1}}) == "/extra");
}

TEST_CASE("a role may hold only its own kinds of parts", "[message]") {
    const json tool_call = {
        {"type", "tool_call"}, {"id", "c"}, {"name", "n"}, {"arguments", json::object()}};
    const json tool_result = {{"type", "tool_result"}, {"tool_call_id", "c"}, {"result", 1}};
    const json image = {{"type", "image"}, {"url", "https://x/y.png"}};
    CHECK(failing_path({{"role", "user"}, {"parts", {tool_call}}}) == "/parts/0/type");
    CHECK(failing_path({{"role", "system"}, {"parts", {image}}}) == "/parts/0/type");
    CHECK(failing_path({{"role", "assistant"}, {"parts", {tool_result}}}) == "/parts/0/type");
    CHECK(failing_path({{"role", "tool"}, {"parts", {{{"type", "text"}, {"text", "x"}}}}}) ==
          "/parts/0/type");
    CHECK(failing_path({{"role", "tool"}, {"parts", json::array()}}) == "/parts");
}

TEST_CASE("part fields are checked against their constraints", "[message]") {
    auto in_assistant = [](json part) { return json{{"role", "assistant"}, {"parts", {part}}}; };
    auto in_user = [](json part) { return json{{"role", "user"}, {"parts", {part}}}; };
    CHECK(failing_path(in_assistant(
              {{"type", "tool_call"}, {"id", ""}, {"name", "n"}, {"arguments", json::object()}})) ==
          "/parts/0/id");
    CHECK(failing_path(in_assistant(
              {{"type", "tool_call"}, {"id", "c"}, {"name", "n"}, {"arguments", 42}})) ==
          "/parts/0/arguments");
    CHECK(failing_path(in_user({{"type", "image"}})) == "/parts/0/url");
    CHECK(failing_path(in_user({{"type", "image"}, {"url", "u"}, {"data", "d"}})) ==
          "/parts/0/url");
    CHECK(failing_path(in_user({{"type", "image"}, {"data", "aGk="}})) == "/parts/0/media_type");
    CHECK(failing_path({{"role", "tool"},
                        {"parts",
                         {{{"type", "tool_result"},
                           {"tool_call_id", "c"},
                           {"result", 1},
                           {"is_error", "yes"}}}}}) == "/parts/0/is_error");
    CHECK(failing_path(
              {{"role", "tool"}, {"parts", {{{"type", "tool_result"}, {"tool_call_id", "c"}}}}}) ==
          "/parts/0/result");
}

TEST_CASE("non-finite numbers and runaway nesting are rejected", "[message]") {
    json bad_args = {{"x", {{"y", std::numeric_limits<double>::quiet_NaN()}}}};
    CHECK(failing_path(
              {{"role", "assistant"},
               {"parts",
                {{{"type", "tool_call"}, {"id", "c"}, {"name", "n"}, {"arguments", bad_args}}}}}) ==
          "/parts/0/arguments/x/y");
    json deep = json::array();
    for (int i = 0; i < 1000; ++i) deep = json::array({deep});
    CHECK(failing_path(
              {{"role", "tool"},
               {"parts", {{{"type", "tool_result"}, {"tool_call_id", "c"}, {"result", deep}}}}})
              .rfind("/parts/0/result", 0) == 0);
}

TEST_CASE("metadata and replay state are validated", "[message]") {
    CHECK(failing_path({{"role", "user"}, {"parts", json::array()}, {"metadata", 3}}) ==
          "/metadata");
    CHECK(failing_path({{"role", "user"},
                        {"parts", json::array()},
                        {"replay", {{"provider", "gemini"}, {"model", "m"}, {"data", 1}}}}) ==
          "/replay");
    CHECK(failing_path({{"role", "assistant"},
                        {"parts", json::array()},
                        {"replay", {{"provider", ""}, {"model", "m"}, {"data", 1}}}}) ==
          "/replay/provider");
}

TEST_CASE("paths escape ~ and / in keys as RFC 6901 requires", "[message]") {
    CHECK(failing_path({{"role", "user"}, {"parts", json::array()}, {"a/b~c", 1}}) == "/a~1b~0c");
}

TEST_CASE("messages convert through nlohmann's ADL hooks", "[message]") {
    const json encoded = full_assistant_message();
    CHECK(encoded.get<ullm::Message>() == full_assistant_message());
    CHECK_THROWS_AS(json(3).get<ullm::Message>(), ullm::InvalidMessageError);
}

namespace {

// What checking `message` in place says, and what a round trip through its JSON form says: the
// same error at the same path, or the same message.
struct Verdicts {
    std::string in_place;
    std::string round_trip;
    ullm::Message checked;
    ullm::Message parsed;
};

Verdicts verdicts_of(ullm::Message message) {
    Verdicts out;
    out.checked = message;
    try {
        ullm::validate_message(out.checked, "/7");
        out.in_place = "ok";
    } catch (const ullm::InvalidMessageError& error) {
        out.in_place = error.path() + ": " + error.constraint();
    }
    try {
        out.parsed = ullm::parse_message(ullm::message_to_json(message, true), "/7");
        out.round_trip = "ok";
    } catch (const ullm::InvalidMessageError& error) {
        out.round_trip = error.path() + ": " + error.constraint();
    }
    return out;
}

}  // namespace

TEST_CASE("validate_message agrees with a round trip through JSON", "[message]") {
    using ullm::Message;
    using ullm::Role;
    std::vector<Message> cases;
    cases.push_back(full_assistant_message());
    cases.push_back(Message::user("hello"));
    cases.push_back(
        Message::tool_results({{"call_1", "lookup_weather", json{{"ok", true}}, false}}));
    Message user_with_image = Message::user("look");
    user_with_image.parts.emplace_back(ullm::ImagePart{"", "iVBORw0KGgo=", "image/png"});
    cases.push_back(user_with_image);
    // Broken ones, each in a different way.
    Message image_both = Message::user("x");
    image_both.parts.emplace_back(ullm::ImagePart{"https://e.com/a.png", "AAAA", "image/png"});
    cases.push_back(image_both);
    Message document_no_type = Message::user("x");
    document_no_type.parts.emplace_back(ullm::DocumentPart{"", "AAAA", "", "a.pdf"});
    cases.push_back(document_no_type);
    Message user_call = Message::user("x");
    user_call.parts.emplace_back(ullm::ToolCallPart{"c", "n", json::object()});
    cases.push_back(user_call);
    Message nameless_call = full_assistant_message();
    std::get<ullm::ToolCallPart>(nameless_call.parts[2]).name.clear();
    cases.push_back(nameless_call);
    Message array_arguments = full_assistant_message();
    std::get<ullm::ToolCallPart>(array_arguments.parts[2]).arguments = json::array({1});
    cases.push_back(array_arguments);
    Message infinite_result = Message::tool_results(
        {{"call_1", "f", json{{"x", std::numeric_limits<double>::infinity()}}, false}});
    cases.push_back(infinite_result);
    Message idless_result = Message::tool_results({{"", "f", json(1), false}});
    cases.push_back(idless_result);
    Message empty_tool;
    empty_tool.role = Role::tool;
    cases.push_back(empty_tool);
    Message number_metadata = Message::user("x");
    number_metadata.metadata = 5;
    cases.push_back(number_metadata);
    Message empty_array_metadata = Message::user("x");
    empty_array_metadata.metadata = json::array();
    cases.push_back(empty_array_metadata);
    Message null_metadata = Message::user("x");
    null_metadata.metadata = nullptr;
    cases.push_back(null_metadata);
    Message user_replay = Message::user("x");
    user_replay.replay = ullm::ReplayState{"openai", "gpt-4o", json::object()};
    cases.push_back(user_replay);
    Message modelless_replay = full_assistant_message();
    modelless_replay.replay->model.clear();
    cases.push_back(modelless_replay);
    json deep = json::array();
    for (int i = 0; i < 300; ++i) deep = json::array({deep});
    Message deep_metadata = Message::user("x");
    deep_metadata.metadata = {{"deep", deep}};
    cases.push_back(deep_metadata);

    int refused = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        INFO("case " << i << ": " << ullm::message_to_json(cases[i], true).dump().substr(0, 200));
        const Verdicts verdict = verdicts_of(cases[i]);
        CHECK(verdict.in_place == verdict.round_trip);
        if (verdict.in_place == "ok") {
            CHECK(verdict.checked == verdict.parsed);
        } else {
            ++refused;
        }
    }
    CHECK(refused == 12);  // all but the first four and the two empty metadata
}

}  // namespace message_test
