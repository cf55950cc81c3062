#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"

namespace conversation_test {

using namespace std::chrono_literals;
using ullm::json;

using ullm::test::error_code_of;

using Scripted = ullm::test::ScriptedClient;
using ullm::test::parallel_calls;
using ullm::test::tool_running;
using ullm::test::wait_until;

namespace {

ullm::Tool weather_tool(std::atomic<int>* calls = nullptr) {
    return ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather by city name",
         .parameters = ullm::schema::object({{"city", ullm::schema::string("The city to look up")}},
                                            {"city"}),
         .execute = [calls](const json& args, ullm::ToolContext&) -> json {
             if (calls != nullptr) ++*calls;
             return {{"city", args["city"]}, {"forecast", "Sunny"}};
         }});
}

std::vector<ullm::Role> roles(const std::vector<ullm::Message>& messages) {
    std::vector<ullm::Role> out;
    for (const auto& message : messages) out.push_back(message.role);
    return out;
}

using R = ullm::Role;

}  // namespace

TEST_CASE("a conversation stores each turn and sends the whole history", "[conversation]") {
    Scripted s;
    s.provider->push_text("Hello Ada.", {10, 3, 0, 0, 0, std::nullopt});
    s.provider->push_text("You said your name is Ada.", {20, 7, 4, 0, 1, std::nullopt});
    auto conversation = s.client.conversation({.system = "Be brief."});

    CHECK(conversation.id().rfind("conv_", 0) == 0);
    CHECK(conversation.id().size() == 37);
    const auto first = conversation.send("My name is Ada.");
    CHECK(first.text == "Hello Ada.");
    CHECK(first.model_rounds == 1);
    CHECK(first.tool_rounds == 0);
    const auto second = conversation.send("What is my name?");
    CHECK(second.text == "You said your name is Ada.");

    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[1].system == "Be brief.");
    CHECK(requests[1].model == "model-a");
    REQUIRE(requests[1].messages.size() == 3);
    CHECK(requests[1].messages[0].text() == "My name is Ada.");
    CHECK(requests[1].messages[1].text() == "Hello Ada.");
    CHECK(requests[1].messages[2].text() == "What is my name?");

    CHECK(roles(conversation.history()) ==
          std::vector<R>{R::user, R::assistant, R::user, R::assistant});
    const auto all = conversation.to_messages();
    REQUIRE(all.size() == 5);
    CHECK(all[0].role == R::system);
    CHECK(all[0].text() == "Be brief.");
    const auto totals = conversation.totals();
    CHECK(totals.input_tokens == 30);
    CHECK(totals.output_tokens == 10);
    CHECK(totals.cached_read_tokens == 4);
    CHECK(totals.reasoning_tokens == 1);
    CHECK(totals.rounds == 2);
    CHECK(conversation.version() == 0);  // No session store.
}

TEST_CASE("conversation options are checked before the model is routed", "[conversation]") {
    // No provider serves "nowhere/model": an option error must come first.
    const ullm::Client client({.default_model = "nowhere/model"});
    const auto code = [&](ullm::ConversationOptions options) {
        return error_code_of([&] { (void)client.conversation(std::move(options)); });
    };
    CHECK(code({.max_tool_rounds = -1}) == "invalid_max_tool_rounds");
    CHECK(code({.max_tool_rounds = 101}) == "invalid_max_tool_rounds");
    CHECK(code({.tool_execution_timeout = 0ms}) == "invalid_tool_execution_timeout");
    CHECK(code({.tool_execution_timeout = -5ms}) == "invalid_tool_execution_timeout");
    CHECK(code({.tool_execution_timeout = 300'001ms}) == "invalid_tool_execution_timeout");
    CHECK(code({.max_tokens = 0}) == "invalid_max_tokens");
    CHECK(code({.temperature = 2.5}) == "invalid_temperature");
    CHECK(code({.budget_usd = -0.01}) == "invalid_budget");
    CHECK(code({.budget_usd = std::numeric_limits<double>::quiet_NaN()}) == "invalid_budget");
    CHECK(code({.budget_usd = std::numeric_limits<double>::infinity()}) == "invalid_budget");
    CHECK(code({.budget_action = static_cast<ullm::BudgetAction>(7)}) == "invalid_budget_action");
    CHECK(code({.session_id = std::string(257, 'x')}) == "invalid_session_id");
    CHECK(code({.session_id = "line\nbreak"}) == "invalid_session_id");
    CHECK(code({.tenant = std::string(129, 't')}) == "invalid_tenant");
    CHECK(code({.provider_options = json::array()}) == "invalid_provider_options");
    CHECK(code({.tool_choice = ullm::ToolChoice::required()}) == "invalid_tool_choice");
    CHECK(code({.tools = {weather_tool()}, .tool_choice = ullm::ToolChoice::tool("other")}) ==
          "unknown_tool_choice");
    CHECK(code({.tools = {weather_tool(), weather_tool()}}) == "duplicate_tool_name");
    CHECK(code({.tool_validation = static_cast<ullm::ValidationMode>(9)}) ==
          "invalid_tool_validation");
    // Valid edges pass the checks and then fail on routing.
    CHECK(code({.max_tool_rounds = 0}) == "unknown_model_route");
    CHECK(code({.max_tool_rounds = 100}) == "unknown_model_route");
    CHECK(code({.tool_execution_timeout = 300'000ms}) == "unknown_model_route");
    CHECK(code({.budget_usd = 0.0}) == "unknown_model_route");
    CHECK(code({.budget_usd = 1e-9}) == "unknown_model_route");
    try {
        (void)client.conversation({.max_tool_rounds = 101});
    } catch (const ullm::InvalidOptionError& error) {
        CHECK(error.status() == 400);
        CHECK(error.message().find("0 to 100") != std::string::npos);
    }
}

TEST_CASE("per-send options are checked before the turn starts", "[conversation]") {
    Scripted s;
    auto conversation = s.client.conversation({});
    CHECK(error_code_of([&] { (void)conversation.send("hi", {.budget_usd = -1.0}); }) ==
          "invalid_budget");
    CHECK(error_code_of([&] { (void)conversation.send("hi", {.max_tokens = -3}); }) ==
          "invalid_max_tokens");
    CHECK(error_code_of([&] {
              (void)conversation.send_stream(
                  "hi", {.budget_usd = -std::numeric_limits<double>::infinity()});
          }) == "invalid_budget");
    CHECK(error_code_of([&] {
              (void)conversation.send("hi",
                                      {.budget_usd = std::numeric_limits<double>::quiet_NaN()});
          }) == "invalid_budget");
    CHECK(s.provider->requests().empty());
    CHECK(conversation.history().empty());
}

TEST_CASE("the tool loop runs a tool and sends its result back", "[conversation]") {
    Scripted s;
    std::atomic<int> calls{0};
    ullm::ToolContext seen;
    auto recording = ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather by city name",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [&](const json& args, ullm::ToolContext& context) -> json {
             ++calls;
             seen = context;
             return {{"city", args["city"]}, {"forecast", "Sunny"}};
         }});
    s.provider->push_tool_call("lookup_weather", {{"city", "Berlin"}}, "", "call_1");
    s.provider->push_text("It is sunny in Berlin.");
    auto conversation = s.client.conversation(
        {.session_id = "weather-demo", .tenant = "acme", .tools = {recording}});
    const auto reply = conversation.send("What is the weather in Berlin?");

    CHECK(reply.text == "It is sunny in Berlin.");
    CHECK(reply.tool_rounds == 1);
    CHECK(reply.model_rounds == 2);
    CHECK(calls == 1);
    CHECK(seen.session_id == "weather-demo");
    CHECK(seen.tenant == "acme");
    CHECK(seen.model == "model-a");
    CHECK(seen.provider == "scripted");
    CHECK(seen.tool_call_id == "call_1");
    CHECK(seen.deadline != std::chrono::steady_clock::time_point::max());

    const auto history = conversation.history();
    REQUIRE(roles(history) == std::vector<R>{R::user, R::assistant, R::tool, R::assistant});
    const auto results = history[2].tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].tool_call_id == "call_1");
    CHECK(results[0].name == "lookup_weather");
    CHECK(results[0].result == json{{"city", "Berlin"}, {"forecast", "Sunny"}});
    CHECK_FALSE(results[0].is_error);
    CHECK(reply.messages.size() == 4);

    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 2);
    REQUIRE(requests[0].tools.size() == 1);
    CHECK(requests[0].tools[0].name == "lookup_weather");
    CHECK(requests[1].messages.size() == 3);
    CHECK(requests[1].messages[2].tool_results()[0].result["forecast"] == "Sunny");
}

TEST_CASE("independent tool calls of one round run in parallel", "[conversation]") {
    Scripted s;
    std::atomic<int> running{0};
    std::atomic<int> most{0};
    const auto slow = [&](const json&, ullm::ToolContext& context) -> json {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        // Wait (bounded) for the other call to start too.
        const auto give_up = std::chrono::steady_clock::now() + 2s;
        while (most.load() < 3 && std::chrono::steady_clock::now() < give_up &&
               !context.stop_requested()) {
            std::this_thread::sleep_for(1ms);
        }
        --running;
        return context.tool_call_id;
    };
    s.provider->push(parallel_calls({{"c1", "slow", json::object()},
                                     {"c2", "slow", json::object()},
                                     {"c3", "slow", json::object()}}));
    s.provider->push_text("done");
    auto conversation = s.client.conversation({.tools = {tool_running("slow", slow)}});
    const auto reply = conversation.send("go");
    CHECK(most == 3);
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 3);
    // Results keep the order of the calls, whatever order they finished in.
    CHECK(results[0].result == "c1");
    CHECK(results[1].result == "c2");
    CHECK(results[2].result == "c3");
    CHECK(reply.text == "done");
}

TEST_CASE("tool failures become error results the model sees", "[conversation]") {
    Scripted s;
    s.provider->push(parallel_calls({{"a", "lookup_weather", {{"city", 42}}},
                                     {"b", "no_such_tool", json::object()},
                                     {"c", "explode", json::object()},
                                     {"d", "lookup_weather", json("{not json")}}));
    s.provider->push_text("Sorry.");
    auto explode = tool_running("explode", [](const json&, ullm::ToolContext&) -> json {
        throw std::runtime_error("disk on fire");
    });
    auto conversation = s.client.conversation({.tools = {weather_tool(), explode}});
    const auto reply = conversation.send("go");
    CHECK(reply.text == "Sorry.");
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 4);
    for (const auto& result : results) {
        CHECK(result.is_error);
        CHECK(result.result.is_string());
    }
    CHECK(results[0].result.get<std::string>().find("/city") != std::string::npos);
    CHECK(results[1].result.get<std::string>().find("no_such_tool") != std::string::npos);
    CHECK(results[2].result.get<std::string>().find("disk on fire") != std::string::npos);
    // The model's request carried all four error results.
    CHECK(s.provider->requests()[1].messages[2].tool_results().size() == 4);
}

TEST_CASE("permissive validation lets a tool see arguments strict mode refuses", "[conversation]") {
    Scripted s;
    json received;
    auto lenient = ullm::define_tool(
        {.name = "lookup_weather",
         .description = "Look up weather",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [&](const json& args, ullm::ToolContext&) -> json {
             received = args;
             return "ok";
         }});
    s.provider->push_tool_call("lookup_weather", {{"city", 42}});
    s.provider->push_text("fine");
    auto conversation = s.client.conversation(
        {.tools = {lenient}, .tool_validation = ullm::ValidationMode::permissive});
    (void)conversation.send("go");
    CHECK(received == json{{"city", 42}});
    CHECK_FALSE(conversation.history()[2].tool_results()[0].is_error);
}

TEST_CASE("max_tool_rounds bounds the tool loop at 0, at the limit and past it", "[conversation]") {
    Scripted s;
    std::atomic<int> calls{0};
    SECTION("0 rounds: the first tool call is already one too many") {
        s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}}, "", "", {5, 5});
        auto conversation =
            s.client.conversation({.tools = {weather_tool(&calls)}, .max_tool_rounds = 0});
        try {
            (void)conversation.send("weather?");
            FAIL("no error");
        } catch (const ullm::MaxToolRoundsError& error) {
            CHECK(error.code() == "max_tool_rounds_exceeded");
            CHECK(error.max_rounds() == 0);
            CHECK(error.status() == 422);
        }
        CHECK(calls == 0);
        CHECK(conversation.history().empty());
        CHECK(conversation.totals().input_tokens == 5);  // The spend is still counted.
    }
    SECTION("exactly the limit of rounds is allowed") {
        for (int i = 0; i < 3; ++i)
            s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}});
        s.provider->push_text("done");
        auto conversation =
            s.client.conversation({.tools = {weather_tool(&calls)}, .max_tool_rounds = 3});
        const auto reply = conversation.send("weather?");
        CHECK(reply.tool_rounds == 3);
        CHECK(calls == 3);
        CHECK(conversation.history().size() == 8);
    }
    SECTION("one round past the limit throws and commits nothing") {
        for (int i = 0; i < 4; ++i)
            s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}});
        auto conversation =
            s.client.conversation({.tools = {weather_tool(&calls)}, .max_tool_rounds = 3});
        CHECK(error_code_of([&] { (void)conversation.send("weather?"); }) ==
              "max_tool_rounds_exceeded");
        CHECK(calls == 3);
        CHECK(conversation.history().empty());
        CHECK(conversation.totals().rounds == 4);
    }
    SECTION("100 rounds, the most allowed") {
        for (int i = 0; i < 100; ++i)
            s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}});
        s.provider->push_text("done");
        auto conversation =
            s.client.conversation({.tools = {weather_tool(&calls)}, .max_tool_rounds = 100});
        CHECK(conversation.send("weather?").tool_rounds == 100);
        CHECK(calls == 100);
    }
}

TEST_CASE("a forced tool choice applies to the first round of a turn only", "[conversation]") {
    Scripted s;
    s.provider->push_tool_call("lookup_weather", {{"city", "Rome"}});
    s.provider->push_text("Sunny in Rome.");
    auto conversation = s.client.conversation(
        {.tools = {weather_tool()}, .tool_choice = ullm::ToolChoice::tool("lookup_weather")});
    (void)conversation.send("Rome?");
    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].tool_choice == ullm::ToolChoice::tool("lookup_weather"));
    CHECK(requests[1].tool_choice == ullm::ToolChoice::automatic());
}

TEST_CASE("set_tools replaces the tools from the next turn; a running turn keeps its own",
          "[conversation]") {
    Scripted s;
    std::atomic<int> clock_calls{0};
    const auto clock = ullm::define_tool({.name = "read_clock",
                                          .description = "Read the clock",
                                          .parameters = ullm::schema::object({}, {}),
                                          .execute = [&](const json&, ullm::ToolContext&) -> json {
                                              ++clock_calls;
                                              return "noon";
                                          }});
    ullm::Conversation* self = nullptr;
    const auto swap = ullm::define_tool({.name = "swap_tools",
                                         .description = "Swap the tools",
                                         .parameters = ullm::schema::object({}, {}),
                                         .execute = [&](const json&, ullm::ToolContext&) -> json {
                                             self->set_tools({clock});
                                             return "swapped";
                                         }});
    auto conversation = s.client.conversation({.tools = {swap}});
    self = &conversation;
    s.provider->push_tool_call("swap_tools", json::object());
    s.provider->push_text("Swapped.");
    s.provider->push_tool_call("read_clock", json::object());
    s.provider->push_text("It is noon.");
    CHECK(conversation.send("swap").text == "Swapped.");
    CHECK(conversation.send("time?").text == "It is noon.");
    CHECK(clock_calls == 1);

    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 4);
    const auto offered = [&](std::size_t i) {
        std::vector<std::string> names;
        for (const auto& tool : requests[i].tools) names.push_back(tool.name);
        return names;
    };
    CHECK(offered(0) == std::vector<std::string>{"swap_tools"});
    CHECK(offered(1) == std::vector<std::string>{"swap_tools"});  // the same turn
    CHECK(offered(2) == std::vector<std::string>{"read_clock"});
    REQUIRE(conversation.tools().size() == 1);
    CHECK(conversation.tools()[0].name() == "read_clock");

    // A set the rules refuse leaves the tools as they were.
    CHECK(error_code_of([&] { conversation.set_tools({clock, clock}); }) == "duplicate_tool_name");
    CHECK(conversation.tools()[0].name() == "read_clock");
}

TEST_CASE("set_tools keeps what the tool choice needs", "[conversation]") {
    Scripted s;
    auto named = s.client.conversation(
        {.tools = {weather_tool()}, .tool_choice = ullm::ToolChoice::tool("lookup_weather")});
    const auto other = ullm::define_tool(
        {.name = "other",
         .description = "Another tool",
         .parameters = ullm::schema::object({}, {}),
         .execute = [](const json&, ullm::ToolContext&) -> json { return nullptr; }});
    CHECK(error_code_of([&] { named.set_tools({other}); }) == "unknown_tool_choice");
    auto forced = s.client.conversation(
        {.tools = {weather_tool()}, .tool_choice = ullm::ToolChoice::required()});
    CHECK(error_code_of([&] { forced.set_tools({}); }) == "invalid_tool_choice");
    forced.set_tools({other});
    CHECK(forced.tools()[0].name() == "other");
    CHECK(named.tools()[0].name() == "lookup_weather");
}

TEST_CASE("a timed-out tool gets an error result and its stop token is signalled",
          "[conversation]") {
    Scripted s;
    std::atomic<bool> stopped{false};
    auto polite = tool_running("polite", [&](const json&, ullm::ToolContext& context) -> json {
        while (!context.stop_token.stop_requested()) std::this_thread::sleep_for(1ms);
        stopped = true;
        return "too late";
    });
    s.provider->push_tool_call("polite", json::object());
    s.provider->push_text("moving on");
    auto conversation = s.client.conversation({.tools = {polite}, .tool_execution_timeout = 30ms});
    const auto reply = conversation.send("go");
    CHECK(reply.text == "moving on");
    const auto result = conversation.history()[2].tool_results()[0];
    CHECK(result.is_error);
    CHECK(result.result.get<std::string>().find("30 ms") != std::string::npos);
    wait_until([&] { return stopped.load(); });
}

TEST_CASE("a tool that returns once it sees its own deadline has still timed out",
          "[conversation]") {
    // The tool sees the deadline pass (ToolContext::stop_requested) and returns at once, often
    // before the turn's wait notices the deadline: the call took too long all the same.
    for (int attempt = 0; attempt < 20; ++attempt) {
        Scripted s;
        auto watcher = tool_running("watcher", [](const json&, ullm::ToolContext& context) -> json {
            while (!context.stop_requested()) std::this_thread::yield();
            return "saw my deadline";
        });
        s.provider->push_tool_call("watcher", json::object());
        s.provider->push_text("moving on");
        auto conversation =
            s.client.conversation({.tools = {watcher}, .tool_execution_timeout = 2ms});
        (void)conversation.send("go");
        const auto result = conversation.history()[2].tool_results()[0];
        INFO("attempt " << attempt);
        CHECK(result.is_error);
        CHECK(result.result.get<std::string>().find("did not finish within 2 ms") !=
              std::string::npos);
    }
}

TEST_CASE("a timed-out tool that ignores its stop token keeps the busy guard", "[conversation]") {
    Scripted s;
    std::atomic<bool> release{false};
    std::atomic<bool> returned{false};
    auto stubborn = tool_running("stubborn", [&](const json&, ullm::ToolContext&) -> json {
        while (!release) std::this_thread::sleep_for(1ms);
        returned = true;
        return "late";
    });
    s.provider->push_tool_call("stubborn", json::object());
    s.provider->push_text("gave up waiting");
    s.provider->push_text("second turn");
    auto conversation =
        s.client.conversation({.tools = {stubborn}, .tool_execution_timeout = 20ms});
    CHECK(conversation.send("go").text == "gave up waiting");
    // The callback still runs: new turns and streams are refused, clear() too.
    CHECK(error_code_of([&] { (void)conversation.send("again"); }) == "conversation_busy");
    auto stream = conversation.send_stream("again");
    CHECK(error_code_of([&] { (void)stream.next(); }) == "conversation_busy");
    CHECK(error_code_of([&] { conversation.clear(); }) == "conversation_busy");
    release = true;
    wait_until([&] { return returned.load(); });
    wait_until([&] { return error_code_of([&] { conversation.clear(); }) == "no error"; });
    CHECK(conversation.send("again").text == "second turn");
    CHECK(conversation.history().size() == 2);
}

TEST_CASE("a tool cannot start a turn on its own conversation", "[conversation]") {
    Scripted s;
    std::optional<ullm::Conversation> self;
    std::string inner_code;
    std::string outsider_code;
    std::future<ullm::ConversationReply> inner_async;
    auto reentrant = tool_running("reentrant", [&](const json&, ullm::ToolContext&) -> json {
        inner_code = error_code_of([&] { (void)self->send("nested"); });
        // An async turn is refused on arrival too (it takes its place inside send_async).
        inner_async = self->send_async("nested async");
        // Another thread arriving during the callback is refused the same way.
        std::thread outsider(
            [&] { outsider_code = error_code_of([&] { (void)self->send("x"); }); });
        outsider.join();
        return "ok";
    });
    s.provider->push_tool_call("reentrant", json::object());
    s.provider->push_text("done");
    self.emplace(s.client.conversation({.tools = {reentrant}}));
    CHECK(self->send("go").text == "done");
    CHECK(inner_code == "conversation_busy");
    CHECK(outsider_code == "conversation_busy");
    CHECK(error_code_of([&] { (void)inner_async.get(); }) == "conversation_busy");
    CHECK(s.provider->requests().size() == 2);
}

TEST_CASE("a turn queued before a tool callback began is refused when it gets the slot",
          "[conversation]") {
    Scripted s;
    std::atomic<bool> release{false};
    std::atomic<bool> returned{false};
    auto stubborn = tool_running("stubborn", [&](const json&, ullm::ToolContext&) -> json {
        while (!release) std::this_thread::sleep_for(1ms);
        returned = true;  // The last touch of this test's stack.
        return "late";
    });
    s.provider->push_tool_call("stubborn", json::object());
    s.provider->push_text("first turn done");
    auto conversation =
        s.client.conversation({.tools = {stubborn}, .tool_execution_timeout = 50ms});
    auto first = conversation.send_stream("first");
    REQUIRE(first.next());  // The first turn holds the slot; no callback runs yet.
    std::string queued_code;
    std::thread queued(
        [&] { queued_code = error_code_of([&] { (void)conversation.send("2nd"); }); });
    std::this_thread::sleep_for(50ms);  // Let the second turn queue up.
    while (first.next()) {
    }
    queued.join();
    CHECK(queued_code == "conversation_busy");
    release = true;
    CHECK(roles(conversation.history()) ==
          std::vector<R>{R::user, R::assistant, R::tool, R::assistant});
    CHECK(s.provider->requests().size() == 2);
    wait_until([&] { return returned.load(); });  // The orphaned callback must not outlive us.
}

TEST_CASE("turns from 8 threads run one at a time, each on the previous commit", "[conversation]") {
    Scripted s;
    for (int i = 0; i < 8; ++i) s.provider->push_text("reply " + std::to_string(i));
    auto conversation = s.client.conversation({});
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
        threads.emplace_back([&, i] { (void)conversation.send("message " + std::to_string(i)); });
    }
    for (auto& thread : threads) thread.join();
    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 8);
    for (std::size_t i = 0; i < requests.size(); ++i) {
        // Each request carries every earlier turn: 1, 3, 5, … messages.
        CHECK(requests[i].messages.size() == 2 * i + 1);
    }
    const auto history = conversation.history();
    REQUIRE(history.size() == 16);
    for (std::size_t i = 0; i < 8; ++i) {
        CHECK(history[2 * i].role == R::user);
        CHECK(history[2 * i + 1].text() == "reply " + std::to_string(i));
        // The user message of request i is the one committed at position 2i.
        CHECK(requests[i].messages.back().text() == history[2 * i].text());
    }
}

TEST_CASE("a streamed turn yields round events, tool results and one done", "[conversation]") {
    Scripted s;
    s.provider->push_tool_call("lookup_weather", {{"city", "Paris"}}, "Let me check.", "call_p");
    s.provider->push_text("It is sunny in Paris.");
    auto conversation = s.client.conversation({.tools = {weather_tool()}});
    auto stream = conversation.send_stream("Weather in Paris?");
    std::string text;
    int done = 0;
    int tool_results = 0;
    for (const auto& event : stream) {
        if (const auto* delta = event.text_delta()) text += *delta;
        if (event.type == ullm::StreamEvent::Type::tool_call_result) {
            ++tool_results;
            CHECK(event.tool_call_id == "call_p");
            REQUIRE(event.tool_result);
            CHECK(event.tool_result->result["forecast"] == "Sunny");
            // The result event comes before anything is committed.
            CHECK(conversation.history().empty());
        }
        if (event.type == ullm::StreamEvent::Type::done) {
            ++done;
            REQUIRE(event.response);
            CHECK(event.response->text == "It is sunny in Paris.");
        }
    }
    CHECK(done == 1);
    CHECK(tool_results == 1);
    CHECK(text == "Let me check.It is sunny in Paris.");
    REQUIRE(stream.reply());
    CHECK(stream.reply()->tool_rounds == 1);
    CHECK(conversation.history().size() == 4);
}

TEST_CASE("a stream that is never pulled takes no slot", "[conversation]") {
    Scripted s;
    s.provider->push_text("from send");
    auto conversation = s.client.conversation({});
    auto idle = conversation.send_stream("never pulled");
    CHECK(conversation.send("hi").text == "from send");
    CHECK(conversation.history().size() == 2);
}

TEST_CASE("a stream left early or cancelled frees the slot and commits nothing", "[conversation]") {
    Scripted s;
    s.provider->push_text("one two three four five");
    s.provider->push_text("six seven");
    s.provider->push_text("after");
    auto conversation = s.client.conversation({});
    {
        auto stream = conversation.send_stream("first");
        for (const auto& event : stream) {
            if (event.text_delta()) break;  // Leave after the first delta.
        }
    }
    CHECK(conversation.history().empty());
    {
        auto stream = conversation.send_stream("second");
        REQUIRE(stream.next());
        stream.cancel();
        CHECK(error_code_of([&] { (void)stream.next(); }) == "cancelled");
        // The slot is free even while the cancelled stream object lives.
        CHECK(conversation.send("third").text == "after");
    }
    CHECK(roles(conversation.history()) == std::vector<R>{R::user, R::assistant});
    CHECK(conversation.history()[0].text() == "third");
}

TEST_CASE("cancelling a send through its stop token stops a running tool", "[conversation]") {
    Scripted s;
    std::stop_source cancel;
    std::atomic<bool> tool_stopped{false};
    auto waits = tool_running("waits", [&](const json&, ullm::ToolContext& context) -> json {
        cancel.request_stop();  // The caller cancels while the tool runs.
        while (!context.stop_requested()) std::this_thread::sleep_for(1ms);
        tool_stopped = true;
        return "stopped";
    });
    s.provider->push_tool_call("waits", json::object());
    auto conversation = s.client.conversation({.tools = {waits}});
    CHECK(error_code_of([&] { (void)conversation.send("go", {.stop = cancel.get_token()}); }) ==
          "cancelled");
    wait_until([&] { return tool_stopped.load(); });
    CHECK(conversation.history().empty());
    CHECK(conversation.totals().rounds == 1);
}

TEST_CASE("a provider error fails the turn and leaves the history as it was", "[conversation]") {
    Scripted s;
    s.provider->push_text("first");
    s.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "overloaded", 529, true)));
    auto conversation = s.client.conversation({});
    (void)conversation.send("one");
    CHECK(error_code_of([&] { (void)conversation.send("two"); }) == "provider_overloaded");
    CHECK(conversation.history().size() == 2);
    // A queue that ran dry is an error too, not a hang.
    CHECK(error_code_of([&] { (void)conversation.send("three"); }) == "mock_queue_exhausted");
}

TEST_CASE("provider replay state flows between rounds but stays out of history", "[conversation]") {
    Scripted s;
    auto first = parallel_calls({{"call_g", "lookup_weather", {{"city", "Lima"}}}});
    first.message.replay = ullm::ReplayState{"scripted", "model-a", {{"signature", "sig-123"}}};
    s.provider->push(first);
    s.provider->push_text("Sunny in Lima.");
    auto conversation = s.client.conversation({.tools = {weather_tool()}});
    const auto reply = conversation.send("Lima?");
    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 2);
    REQUIRE(requests[1].messages[1].replay);
    CHECK(requests[1].messages[1].replay->data["signature"] == "sig-123");
    for (const auto& message : conversation.history()) CHECK_FALSE(message.replay);
    for (const auto& message : reply.messages) CHECK_FALSE(message.replay);
    CHECK(conversation.to_markdown().find("sig-123") == std::string::npos);
    // The snapshot keeps it, for the next turn after a restore.
    CHECK(conversation.serialise().dump().find("sig-123") != std::string::npos);
}

TEST_CASE("clear empties the history, keeps the totals and refuses during a turn",
          "[conversation]") {
    Scripted s;
    s.provider->push_text("one", {3, 4});
    s.provider->push_text("two");
    s.provider->push_text("three");
    auto conversation = s.client.conversation({.system = "sys"});
    (void)conversation.send("a");
    conversation.clear();
    CHECK(conversation.history().empty());
    CHECK(conversation.to_messages().size() == 1);
    CHECK(conversation.totals().input_tokens == 3);
    auto stream = conversation.send_stream("b");
    REQUIRE(stream.next());
    CHECK(error_code_of([&] { conversation.clear(); }) == "conversation_busy");
    while (stream.next()) {
    }
    CHECK(conversation.history().size() == 2);
    CHECK(conversation.send("c").text == "three");
    CHECK(s.provider->requests().back().messages.size() == 3);
}

TEST_CASE("the markdown export shows metadata, messages and tool traffic", "[conversation]") {
    Scripted s;
    s.provider->push_tool_call("lookup_weather", {{"city", "Kyiv"}}, "", "call_k", {12, 5});
    s.provider->push_text("Sunny | warm.", {20, 6});
    auto conversation = s.client.conversation(
        {.session_id = "md-1", .system = "Be kind.", .tools = {weather_tool()}});
    (void)conversation.send("Weather in Kyiv?");
    const std::string markdown = conversation.to_markdown();
    CHECK(markdown.rfind("# Conversation md-1\n", 0) == 0);
    CHECK(markdown.find("| Session | md-1 |") != std::string::npos);
    CHECK(markdown.find("| Provider | scripted |") != std::string::npos);
    CHECK(markdown.find("| Model | model-a |") != std::string::npos);
    CHECK(markdown.find("| Messages | 5 |") != std::string::npos);
    CHECK(markdown.find("| Input tokens | 32 |") != std::string::npos);
    CHECK(markdown.find("## System\n\nBe kind.") != std::string::npos);
    CHECK(markdown.find("## User\n\nWeather in Kyiv?") != std::string::npos);
    CHECK(markdown.find("**Tool call** `lookup_weather` (id `call_k`)") != std::string::npos);
    CHECK(markdown.find("\"city\": \"Kyiv\"") != std::string::npos);
    CHECK(markdown.find("**Tool result** `lookup_weather` (id `call_k`)") != std::string::npos);
    CHECK(markdown.find("\"forecast\": \"Sunny\"") != std::string::npos);
    CHECK(markdown.find("Sunny | warm.") != std::string::npos);
    // Sections appear in message order.
    CHECK(markdown.find("## User") < markdown.find("**Tool call**"));
    CHECK(markdown.find("**Tool result**") < markdown.find("Sunny | warm."));
}

TEST_CASE("system context is evaluated before every round and never stored", "[conversation]") {
    Scripted s;
    int rounds = 0;
    s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}});
    s.provider->push_text("done");
    auto conversation = s.client.conversation(
        {.system = "Be brief.",
         .system_context = [&] { return "# Round " + std::to_string(++rounds); },
         .tools = {weather_tool()}});
    (void)conversation.send("go");
    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].system == "Be brief.\n\n# Round 1");
    CHECK(requests[1].system == "Be brief.\n\n# Round 2");
    CHECK(conversation.to_messages()[0].text() == "Be brief.");
}

TEST_CASE("a tool can answer the model with an exact error text", "[conversation]") {
    Scripted s;
    s.provider->push_tool_call("strict", json::object());
    s.provider->push_text("ok");
    auto conversation = s.client.conversation(
        {.tools = {tool_running("strict", [](const json&, ullm::ToolContext&) -> json {
             throw ullm::ToolResultError("Not found", "not_found");
         })}});
    (void)conversation.send("go");
    const auto result = conversation.history()[2].tool_results()[0];
    CHECK(result.is_error);
    CHECK(result.result == "Not found");
}

TEST_CASE("cancel frees the slot at once and the cancelled turn's spend is counted",
          "[conversation]") {
    Scripted s;
    s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}}, "", "", {40, 4});
    s.provider->push_text("never reached");
    auto conversation = s.client.conversation({.tools = {weather_tool()}});
    {
        auto stream = conversation.send_stream("go");
        for (auto event = stream.next(); event; event = stream.next()) {
            if (event->type == ullm::StreamEvent::Type::tool_call_result) break;
        }
        stream.cancel();  // No further pull: the slot must be free now, on this thread.
        CHECK(conversation.send("next").text == "never reached");
        CHECK(error_code_of([&] { (void)stream.next(); }) == "cancelled");
    }
    CHECK(conversation.totals().input_tokens == 40);
    {
        // A stream dropped after a paid round counts its spend too.
        s.provider->push_tool_call("lookup_weather", {{"city", "Oslo"}}, "", "", {100, 1});
        auto stream = conversation.send_stream("again");
        for (const auto& event : stream) {
            if (event.type == ullm::StreamEvent::Type::tool_call_result) break;
        }
    }
    CHECK(conversation.totals().input_tokens == 140);
    CHECK(conversation.history().size() == 2);
}

TEST_CASE("a callback of the running turn that starts a turn is refused, not deadlocked",
          "[conversation]") {
    Scripted s;
    std::optional<ullm::Conversation> self;
    self.emplace(s.client.conversation({.system_context = [&]() -> std::string {
        (void)self->send("nested");
        return "";
    }}));
    CHECK(error_code_of([&] { (void)self->send("go"); }) == "conversation_busy");
    // A consumer holding an unfinished stream cannot wait for itself either.
    s.provider->push_text("streamed");
    auto plain = s.client.conversation({});
    auto stream = plain.send_stream("one");
    REQUIRE(stream.next());
    CHECK(error_code_of([&] { (void)plain.send("two"); }) == "conversation_busy");
}

}  // namespace conversation_test
