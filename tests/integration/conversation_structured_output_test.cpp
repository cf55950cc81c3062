// `Conversation::send_object`: structured output as one turn of a conversation, through the real
// transport and the test server. Repairs stay inside the turn; the turn commits only a good or
// refused reply.

#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/tools/reflect.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/chat_completion_bodies.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace conversation_structured_output_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::chat_completion_body;
using ullm::test::chat_completion_reply;
using ullm::test::error_code_of;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace conversation_object_test {

struct Ticket {
    std::string title;
    int priority = 0;
    std::vector<std::string> labels;
};
ULLM_REFLECT(Ticket, title, priority, labels)

}  // namespace conversation_object_test

using conversation_object_test::Ticket;

namespace {

ScriptedResponse tool_call_reply(const std::string& name, const std::string& arguments) {
    const json call = {{"id", "call_1"},
                       {"type", "function"},
                       {"function", {{"name", name}, {"arguments", arguments}}}};
    return ScriptedResponse::json(
        200, chat_completion_body(
                 {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}},
                 "tool_calls")
                 .dump());
}

const std::string good_ticket = R"({"title": "Login fails", "priority": 2, "labels": ["auth"]})";

ullm::Client client_for(const TestServer& server) {
    ullm::RetryPolicy retry;
    retry.initial_backoff = 10ms;
    return ullm::Client(ullm::ClientOptions{
        .retry = retry,
        .providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
            .api_key = "sk-test", .base_url = server.base_url() + "/v1"})}});
}

ullm::Conversation conversation_of(const ullm::Client& client, std::vector<ullm::Tool> tools = {}) {
    return client.conversation({.use_session_store = false,
                                .system = "File tickets.",
                                .model = "openai/gpt-4o-mini",
                                .tools = std::move(tools)});
}

json body_of(const TestServer& server, std::size_t index) {
    return json::parse(server.requests().at(index).body);
}

}  // namespace

TEST_CASE("send_object: the turn sends T's schema, decodes the reply and commits it",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(chat_completion_reply(good_ticket));
    server.enqueue(chat_completion_reply("Filed."));
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    const auto ticket =
        conversation.send_object<Ticket>("The login page fails.", {.name = "ticket"});
    REQUIRE(ticket.object);
    CHECK(ticket.object->title == "Login fails");
    CHECK(ticket.object->priority == 2);
    CHECK(ticket.object->labels == std::vector<std::string>{"auth"});
    CHECK(ticket.value.at("title") == "Login fails");
    CHECK(ticket.repairs == 0);
    CHECK(ticket.model_rounds == 1);
    CHECK(ticket.usage.input_tokens == 10);
    REQUIRE(ticket.messages.size() == 2);
    CHECK(ticket.messages[1].text() == good_ticket);
    const json format = body_of(server, 0).at("response_format");
    CHECK(format.at("type") == "json_schema");
    CHECK(format.at("json_schema").at("name") == "ticket");
    CHECK(format.at("json_schema").at("strict") == true);
    CHECK(format.at("json_schema").at("schema") == ullm::json_schema_of<Ticket>());
    // The turn is in the history; the next plain turn goes out without the format.
    CHECK(conversation.history().size() == 2);
    CHECK(conversation.send("Thanks").text == "Filed.");
    CHECK_FALSE(body_of(server, 1).contains("response_format"));
    CHECK(body_of(server, 1).at("messages").size() == 4);  // system, user, reply, user
}

TEST_CASE("send_object: a reply that breaks the schema is repaired inside the same turn",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(
        chat_completion_reply(R"({"title": "Login fails", "labels": []})"));  // no priority
    server.enqueue(chat_completion_reply(good_ticket));
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    const auto ticket =
        conversation.send_object<Ticket>("The login page fails.", {.max_repairs = 1});
    REQUIRE(ticket.object);
    CHECK(ticket.object->priority == 2);
    CHECK(ticket.repairs == 1);
    CHECK(ticket.model_rounds == 2);
    CHECK(ticket.usage.input_tokens == 20);  // both rounds count
    CHECK(conversation.totals().rounds == 2);
    // user, refused reply, repair request, good reply: all of it is the turn.
    const auto history = conversation.history();
    REQUIRE(history.size() == 4);
    CHECK(history[2].role == ullm::Role::user);
    CHECK(history[2].text().find("priority") != std::string::npos);
    CHECK(history[3].text() == good_ticket);
    // The repair request went to the model, after the reply it answers, still with the format.
    const json second = body_of(server, 1);
    const json& messages = second.at("messages");
    REQUIRE(messages.size() == 4);
    CHECK(messages[3].at("role") == "user");
    CHECK(messages[3].at("content").get<std::string>().find("priority") != std::string::npos);
    CHECK(second.contains("response_format"));
}

TEST_CASE("send_object: without repairs left the turn fails and commits nothing",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(chat_completion_reply("Sure! Here is your ticket."));
    server.enqueue(chat_completion_reply(R"({"title": 7, "priority": 1, "labels": []})"));
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    try {
        (void)conversation.send_object<Ticket>("The login page fails.", {.max_repairs = 1});
        FAIL("a reply that breaks the schema after the last repair must throw");
    } catch (const ullm::StructuredOutputError& error) {
        CHECK(error.code() == "structured_output_invalid");
        CHECK(error.path() == "/title");
        CHECK(error.raw_text() == R"({"title": 7, "priority": 1, "labels": []})");
        CHECK(error.usage().input_tokens == 20);
        CHECK(std::string(error.what()).find("after 1 repair") != std::string::npos);
    }
    CHECK(conversation.history().empty());
    CHECK(conversation.totals().rounds == 2);  // the spend still counts
    CHECK(server.requests().size() == 2);
}

TEST_CASE("send_object: the model may use the conversation's tools before it answers",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(tool_call_reply("lookup_user", R"({"email": "ana@example.com"})"));
    server.enqueue(chat_completion_reply(good_ticket));
    std::atomic<int> calls{0};
    const auto lookup = ullm::define_tool(
        {.name = "lookup_user",
         .description = "Finds a user by e-mail",
         .parameters = ullm::schema::object({{"email", ullm::schema::string()}}, {"email"}),
         .execute = [&calls](const json&, ullm::ToolContext&) -> json {
             ++calls;
             return {{"plan", "pro"}};
         }});
    const auto client = client_for(server);
    auto conversation = conversation_of(client, {lookup});
    const auto ticket = conversation.send_object<Ticket>("ana@example.com cannot log in.");
    REQUIRE(ticket.object);
    CHECK(calls == 1);
    CHECK(ticket.tool_rounds == 1);
    CHECK(ticket.model_rounds == 2);
    CHECK(ticket.messages.size() == 4);  // user, call, result, reply
    // The tools and the format go out together.
    CHECK(body_of(server, 0).contains("tools"));
    CHECK(body_of(server, 0).contains("response_format"));
    CHECK(body_of(server, 1).contains("response_format"));
}

TEST_CASE("send_object: a refusal is committed as the turn's answer",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        200, chat_completion_body(
                 {{"role", "assistant"}, {"content", nullptr}, {"refusal", "I can't file that."}},
                 "stop")
                 .dump()));
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    const auto ticket = conversation.send_object<Ticket>("File a ticket.", {.max_repairs = 3});
    CHECK(ticket.refused());
    CHECK(*ticket.refusal == "I can't file that.");
    CHECK_FALSE(ticket.object);
    CHECK(ticket.repairs == 0);
    CHECK(server.requests().size() == 1);
    CHECK(error_code_of([&] { (void)ticket.get(); }) == "structured_output_refused");
    CHECK(conversation.history().size() == 2);
}

TEST_CASE("send_object: a reply cut off by max_tokens fails at once",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(chat_completion_reply(R"({"title": "Login f)", "length"));
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    CHECK(error_code_of([&] {
              (void)conversation.send_object<Ticket>("File a ticket.", {.max_repairs = 3});
          }) == "structured_output_truncated");
    CHECK(server.requests().size() == 1);
    CHECK(conversation.history().empty());

    // After a repair, the error's usage is the whole turn's.
    server.enqueue(chat_completion_reply("Not JSON yet"));
    server.enqueue(chat_completion_reply(R"({"title": "Login f)", "length"));
    try {
        (void)conversation.send_object<Ticket>("File a ticket.", {.max_repairs = 3});
        FAIL("a cut-off reply must throw");
    } catch (const ullm::StructuredOutputError& error) {
        CHECK(error.code() == "structured_output_truncated");
        CHECK(error.usage().input_tokens == 20);
        CHECK(error.raw_text() == R"({"title": "Login f)");
    }
    CHECK(server.requests().size() == 3);
}

TEST_CASE("send_object: a tool that ends the turn leaves no JSON reply",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(tool_call_reply("done", "{}"));
    const auto finish =
        ullm::define_tool({.name = "done",
                           .description = "Ends the turn",
                           .parameters = ullm::schema::object({}, {}),
                           .execute = [](const json&, ullm::ToolContext& context) -> json {
                               context.end_turn = true;
                               return "ok";
                           }});
    const auto client = client_for(server);
    auto conversation = conversation_of(client, {finish});
    CHECK(error_code_of([&] { (void)conversation.send_object<Ticket>("File a ticket."); }) ==
          "structured_output_not_json");
    CHECK(conversation.history().empty());
}

TEST_CASE("send_object: bad options and schemas are refused before any request",
          "[structured][conversation]") {
    TestServer server;
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    CHECK(error_code_of([&] {
              (void)conversation.send_object<Ticket>("x", {.budget = ullm::CallBudget{.usd = 1}});
          }) == "invalid_budget");
    CHECK(error_code_of([&] {
              (void)conversation.send_object<Ticket>("x", {.max_repairs = 11});
          }) == "invalid_max_repairs");
    CHECK(error_code_of([&] { (void)conversation.send_object<Ticket>("x", {.name = "a b"}); }) ==
          "invalid_response_format");
    CHECK_THROWS_AS(conversation.send_object("x", json{{"type", "nonsense"}}),
                    ullm::ToolDefinitionError);
    // OpenAI strict mode wants every property required: refused before sending.
    const json loose = {{"type", "object"},
                        {"properties", {{"a", {{"type", "string"}}}}},
                        {"additionalProperties", false}};
    CHECK(error_code_of([&] { (void)conversation.send_object("x", loose); }) ==
          "unsupported_schema_keyword");
    CHECK(server.requests().empty());
    CHECK(conversation.history().empty());
}

TEST_CASE("send_object: the json-schema form returns the validated value",
          "[structured][conversation]") {
    TestServer server;
    server.enqueue(chat_completion_reply(R"({"answer": 42})"));
    const auto client = client_for(server);
    auto conversation = conversation_of(client);
    const json schema = {{"type", "object"},
                         {"properties", {{"answer", {{"type", "integer"}}}}},
                         {"required", json::array({"answer"})},
                         {"additionalProperties", false}};
    const auto result = conversation.send_object("What is the answer?", schema);
    REQUIRE(result.object);
    CHECK(*result.object == json{{"answer", 42}});
    CHECK(result.get() == json{{"answer", 42}});
}

}  // namespace conversation_structured_output_test
