// The async face of Conversation (send_async, send_stream_async, co_send) against the in-process
// server, through the real libcurl transport: tool turns, the FIFO shared with blocking turns,
// cancellation at every step, errors through the result, and the threads it takes.

#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/tools/schema.hpp>

#include <dirent.h>
#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/chat_completion_bodies.hpp"
#include "support/error_code.hpp"
#include "support/queue_executor.hpp"
#include "support/test_server.hpp"

namespace conversation_async_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::chat_completion_body;
using ullm::test::chat_completion_reply;
using ullm::test::failure_code;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

ullm::ClientOptions options_for(const TestServer& server) {
    return ullm::test::chat_completion_client_options(server);
}

// A reply that calls `lookup` with the city `city`.
ScriptedResponse tool_call_reply(const std::string& city, const std::string& id = "call_1") {
    return ScriptedResponse::json(
        200,
        chat_completion_body(
            {{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls",
              {{{"id", id},
                {"type", "function"},
                {"function", {{"name", "lookup"}, {"arguments", json{{"city", city}}.dump()}}}}}}},
            "tool_calls")
            .dump());
}

// One Chat Completions stream event.
std::string chunk(const json& delta, const json& finish) {
    return "data: " +
           json{{"id", "c"},
                {"object", "chat.completion.chunk"},
                {"model", "gpt-4o"},
                {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}}
               .dump() +
           "\n\n";
}

// A streamed reply that calls `lookup` for `city`.
std::string tool_call_events(const std::string& city) {
    return chunk({{"role", "assistant"},
                  {"tool_calls",
                   {{{"index", 0},
                     {"id", "call_s"},
                     {"type", "function"},
                     {"function",
                      {{"name", "lookup"}, {"arguments", json{{"city", city}}.dump()}}}}}}},
                 nullptr) +
           chunk(json::object(), "tool_calls") + "data: [DONE]\n\n";
}

// A streamed reply of `text`, in two deltas.
std::string text_events(const std::string& text) {
    const std::size_t half = text.size() / 2;
    return chunk({{"content", text.substr(0, half)}}, nullptr) +
           chunk({{"content", text.substr(half)}}, nullptr) + chunk(json::object(), "stop") +
           "data: [DONE]\n\n";
}

// The tool every test conversation has: answers with the city, or waits for its stop token
// when the city is "wait".
ullm::Tool lookup_tool(std::atomic<int>& calls) {
    return ullm::define_tool(
        {.name = "lookup",
         .description = "Look up a city",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [&calls](const json& args, ullm::ToolContext& context) -> json {
             ++calls;
             if (args["city"] == "wait") {
                 while (!context.stop_token.stop_requested()) std::this_thread::sleep_for(2ms);
             }
             return {{"city", args["city"]}, {"forecast", "Sunny"}};
         }});
}

// Answers a tool result with the forecast, anything else by calling the tool for the city the
// user named; `delay` before each answer.
ullm::test::RequestHandler weather(std::chrono::milliseconds delay = {}) {
    return [delay](const ullm::test::RecordedRequest& request) {
        const json body = json::parse(request.body);
        const json& last = body["messages"].back();
        const bool answered = last["role"] == "tool";
        const std::string city =
            answered ? json::parse(last["content"].get<std::string>())["city"].get<std::string>()
                     : last["content"].get<std::string>();
        ScriptedResponse reply;
        if (body.value("stream", false)) {
            reply = ScriptedResponse::sse(
                answered ? text_events("Sunny in " + city + ".") : tool_call_events(city), 11);
        } else {
            reply =
                answered ? chat_completion_reply("Sunny in " + city + ".") : tool_call_reply(city);
        }
        reply.delay_before_headers = delay;
        return reply;
    };
}

// The in-process server playing the weather model, a client on it, and a conversation with
// the lookup tool.
struct Weather {
    TestServer server;
    std::atomic<int> calls{0};
    const ullm::Client client{served(server)};
    ullm::Conversation conversation =
        client.conversation({.model = "gpt-4o", .tools = {lookup_tool(calls)}});

    static ullm::ClientOptions served(TestServer& server) {
        server.set_handler(weather());
        return options_for(server);
    }
};

// After a turn that failed: nothing of it was kept, and the next turn works.
void goes_on(ullm::Conversation& conversation) {
    CHECK(conversation.history().empty());
    auto next = conversation.send_async("Rome");
    REQUIRE(next.wait_for(20s) == std::future_status::ready);
    CHECK(next.get().text == "Sunny in Rome.");
}

// The user messages of a history, in order.
std::vector<std::string> user_texts(const std::vector<ullm::Message>& history) {
    std::vector<std::string> texts;
    for (const auto& message : history) {
        if (message.role == ullm::Role::user) texts.push_back(message.text());
    }
    return texts;
}

// The threads of this process whose names start with "ullm-" (the ones ullm starts).
std::multiset<std::string> ullm_threads() {
    std::multiset<std::string> names;
    DIR* tasks = opendir("/proc/self/task");
    if (tasks == nullptr) return names;
    while (const dirent* entry = readdir(tasks)) {
        if (entry->d_name[0] == '.') continue;
        std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        if (name.rfind("ullm-", 0) == 0) names.insert(name);
    }
    closedir(tasks);
    return names;
}

// One outcome, handed from a callback to the test thread.
template <class T>
struct Outcome {
    std::promise<ullm::Result<T>> promise;
    std::future<ullm::Result<T>> future = promise.get_future();
    std::atomic<int> calls{0};

    auto handler() {
        return [this](ullm::Result<T> result) {
            if (++calls == 1) promise.set_value(std::move(result));
        };
    }
    ullm::Result<T> get() {
        REQUIRE(future.wait_for(20s) == std::future_status::ready);
        return future.get();
    }
};

struct Detached {
    struct promise_type {
        Detached get_return_object() { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() {}
        void unhandled_exception() { std::terminate(); }
    };
};

}  // namespace

TEST_CASE("send_async runs a tool turn and commits it as send does",
          "[conversation][async][integration]") {
    Weather setup;
    auto& calls = setup.calls;
    auto& conversation = setup.conversation;

    auto future = conversation.send_async("Berlin");
    REQUIRE(future.wait_for(20s) == std::future_status::ready);
    const ullm::ConversationReply reply = future.get();
    CHECK(reply.text == "Sunny in Berlin.");
    CHECK(reply.model_rounds == 2);
    CHECK(reply.tool_rounds == 1);
    CHECK(reply.messages.size() == 4);
    CHECK(calls == 1);
    CHECK(conversation.history().size() == 4);
    CHECK(conversation.totals().rounds == 2);

    // The callback form, on the client's callback thread, never on the caller's.
    Outcome<ullm::ConversationReply> outcome;
    std::atomic<bool> on_caller{false};
    const auto caller = std::this_thread::get_id();
    conversation.send_async("Paris", [&](ullm::Result<ullm::ConversationReply> result) {
        on_caller = std::this_thread::get_id() == caller;
        outcome.handler()(std::move(result));
    });
    CHECK(outcome.get().value().text == "Sunny in Paris.");
    CHECK_FALSE(on_caller);
    CHECK(user_texts(conversation.history()) == std::vector<std::string>{"Berlin", "Paris"});
}

TEST_CASE("async and blocking turns share one FIFO", "[conversation][async][integration]") {
    TestServer server;
    server.set_handler(weather(30ms));
    std::atomic<int> calls{0};
    const ullm::Client client(options_for(server));
    auto conversation = client.conversation({.model = "gpt-4o", .tools = {lookup_tool(calls)}});

    std::vector<std::future<ullm::ConversationReply>> futures;
    futures.push_back(conversation.send_async("A"));
    std::atomic<bool> sending{false};
    std::thread blocking([&] {
        sending = true;
        (void)conversation.send("B");
    });
    // B queues behind A (A holds the slot for its two rounds); C and D queue behind B. B's
    // thread gets time to queue once it runs (a loaded machine may start it late); whether A
    // has finished by then does not matter.
    while (!sending) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(200ms);
    futures.push_back(conversation.send_async("C"));
    futures.push_back(conversation.send_async("D"));
    for (auto& future : futures) REQUIRE(future.wait_for(20s) == std::future_status::ready);
    blocking.join();
    for (auto& future : futures) CHECK(future.get().tool_rounds == 1);
    const auto texts = user_texts(conversation.history());
    REQUIRE(texts.size() == 4);
    CHECK(texts[0] == "A");
    CHECK(texts[2] == "C");
    CHECK(texts[3] == "D");
    CHECK(calls == 4);
    CHECK(conversation.history().size() == 16);
}

TEST_CASE("an async turn takes its place in the FIFO inside send_async",
          "[conversation][async][integration]") {
    Weather weather;
    // A closed executor runs none of the async turn's steps until it is opened.
    const auto gate =
        std::make_shared<ullm::test::QueueExecutor>(ullm::test::QueueExecutor::Gate::closed);
    Outcome<ullm::ConversationReply> first;
    (void)weather.conversation.send_async("A", first.handler(), {}, gate);
    // A holds the slot, though none of its steps can run yet: a blocking send started after
    // send_async returned waits for it, and sends nothing.
    std::string second;  // checked on this thread: Catch's assertions are not thread-safe
    std::thread blocking([&] { second = weather.conversation.send("B").text; });
    std::this_thread::sleep_for(100ms);
    CHECK(weather.server.request_count() == 0);
    gate->open();
    CHECK(first.get().value().text == "Sunny in A.");
    blocking.join();
    CHECK(second == "Sunny in B.");
    CHECK(user_texts(weather.conversation.history()) == std::vector<std::string>{"A", "B"});
    // The first request the server saw was A's.
    CHECK(json::parse(weather.server.requests().front().body)["messages"].back()["content"] == "A");
}

TEST_CASE("many async turns run on a few threads", "[conversation][async][integration]") {
    TestServer server;
    server.set_handler(weather(20ms));
    std::atomic<int> calls{0};
    ullm::ClientOptions options = options_for(server);
    options.max_tool_threads = 4;
    const ullm::Client client(options);
    std::vector<ullm::Conversation> conversations;
    for (int i = 0; i < 100; ++i) {
        conversations.push_back(
            client.conversation({.model = "gpt-4o", .tools = {lookup_tool(calls)}}));
    }
    std::vector<std::future<ullm::ConversationReply>> futures;
    for (int i = 0; i < 100; ++i) {
        futures.push_back(
            conversations[static_cast<std::size_t>(i)].send_async("city " + std::to_string(i)));
    }
    std::size_t most = 0;
    for (std::size_t done = 0; done < futures.size();) {
        most = std::max(most, ullm_threads().size());
        done = 0;
        for (auto& future : futures) {
            if (future.wait_for(0s) == std::future_status::ready) ++done;
        }
        if (done < futures.size()) std::this_thread::sleep_for(5ms);
    }
    for (int i = 0; i < 100; ++i) {
        CHECK(futures[static_cast<std::size_t>(i)].get().text ==
              "Sunny in city " + std::to_string(i) + ".");
    }
    CHECK(calls == 100);
    // The transport's loop, the callback thread and the tool pool: no thread per turn.
    CHECK(most <= 2 + 4);
    const auto names = ullm_threads();
    CHECK(names.count("ullm-tool") <= 4);
}

TEST_CASE("an async turn is cancelled at every step it can wait in",
          "[conversation][async][integration]") {
    TestServer server;
    std::atomic<int> calls{0};
    const ullm::Client client(options_for(server));
    auto conversation = client.conversation({.model = "gpt-4o", .tools = {lookup_tool(calls)}});

    SECTION("waiting for the model, the server silent") {
        server.enqueue({.status = 200, .stall = true});
        Outcome<ullm::ConversationReply> outcome;
        const ullm::TurnHandle handle = conversation.send_async("Berlin", outcome.handler());
        for (int i = 0; i < 2000 && server.request_count() == 0; ++i) {
            std::this_thread::sleep_for(1ms);
        }
        handle.cancel();
        CHECK(outcome.get().error_code() == "cancelled");
    }
    SECTION("waiting for its tools") {
        server.set_handler(weather());
        std::stop_source stop;
        auto future = conversation.send_async("wait", {.stop = stop.get_token()});
        for (int i = 0; i < 2000 && calls == 0; ++i) std::this_thread::sleep_for(1ms);
        stop.request_stop();
        CHECK(failure_code(std::move(future)) == "cancelled");
    }
    SECTION("waiting for its slot behind a blocking turn") {
        server.enqueue({.status = 200, .stall = true});
        std::stop_source first;
        std::thread blocking([&] {
            (void)ullm::test::error_code_of(
                [&] { (void)conversation.send("first", {.stop = first.get_token()}); });
        });
        for (int i = 0; i < 2000 && server.request_count() == 0; ++i) {
            std::this_thread::sleep_for(1ms);
        }
        Outcome<ullm::ConversationReply> outcome;
        const ullm::TurnHandle handle = conversation.send_async("second", outcome.handler());
        handle.cancel();
        CHECK(outcome.get().error_code() == "cancelled");
        first.request_stop();
        blocking.join();
        CHECK(server.request_count() == 1);  // the second turn never sent anything
    }
    // Nothing of a cancelled turn is kept, and the conversation goes on.
    server.set_handler(weather());
    goes_on(conversation);
}

TEST_CASE("an async turn's errors come through its result, never thrown at the caller",
          "[conversation][async][integration]") {
    TestServer server;
    server.set_handler(weather());
    std::atomic<int> calls{0};
    const ullm::Client client(options_for(server));
    auto conversation = client.conversation(
        {.model = "gpt-4o", .tools = {lookup_tool(calls)}, .max_tool_rounds = 0});

    CHECK(failure_code(conversation.send_async("x", {.max_tokens = 0})) == "invalid_max_tokens");
    CHECK(failure_code(conversation.send_async(ullm::Message::assistant("not a user"))) ==
          "invalid_message");
    CHECK(failure_code(conversation.send_async("Berlin")) == "max_tool_rounds_exceeded");

    server.set_handler([](const ullm::test::RecordedRequest&) {
        return ScriptedResponse::json(401, R"({"error":{"message":"bad key"}})");
    });
    Outcome<ullm::ConversationReply> outcome;
    conversation.send_async("Berlin", outcome.handler());
    const auto result = outcome.get();
    CHECK(result.error_code() == "authentication_failed");
    CHECK(conversation.history().empty());
    CHECK(conversation.totals().rounds == 2);  // the failed rounds still count
}

TEST_CASE("send_stream_async pushes the events send_stream yields, in order",
          "[conversation][async][integration]") {
    const std::string first = tool_call_events("Oslo");
    const std::string second = text_events("Sunny in Oslo.");
    TestServer server;
    std::atomic<int> calls{0};
    const ullm::Client client(options_for(server));

    // The same bytes through the blocking stream, for the events it yields.
    server.enqueue(ScriptedResponse::sse(first, 7));
    server.enqueue(ScriptedResponse::sse(second, 7));
    auto blocking = client.conversation({.model = "gpt-4o", .tools = {lookup_tool(calls)}});
    std::vector<ullm::StreamEvent::Type> expected;
    for (const auto& event : blocking.send_stream("Oslo")) expected.push_back(event.type);

    server.enqueue(ScriptedResponse::sse(first, 7));
    server.enqueue(ScriptedResponse::sse(second, 7));
    auto conversation = client.conversation({.model = "gpt-4o", .tools = {lookup_tool(calls)}});
    std::mutex mutex;
    std::vector<ullm::StreamEvent::Type> types;
    std::string text;
    std::atomic<int> running{0};
    std::atomic<int> overlapped{0};
    Outcome<ullm::ConversationReply> outcome;
    conversation.send_stream_async(ullm::Message::user("Oslo"),
                                   {.on_event =
                                        [&](const ullm::StreamEvent& event) {
                                            if (++running > 1) ++overlapped;
                                            {
                                                std::lock_guard lock(mutex);
                                                types.push_back(event.type);
                                                if (const auto* delta = event.text_delta())
                                                    text += *delta;
                                            }
                                            --running;
                                        },
                                    .on_done = outcome.handler()});
    const auto reply = outcome.get();
    CHECK(reply.value().text == "Sunny in Oslo.");
    CHECK(reply.value().tool_rounds == 1);
    std::lock_guard lock(mutex);
    CHECK(types == expected);
    CHECK(text == "Sunny in Oslo.");
    CHECK(overlapped == 0);
    CHECK(types.back() == ullm::StreamEvent::Type::done);
    CHECK(conversation.history().size() == 4);
}

TEST_CASE("a consumer callback that throws ends its own turn alone",
          "[conversation][async][integration]") {
    Weather setup;
    auto& conversation = setup.conversation;
    Outcome<ullm::ConversationReply> outcome;
    conversation.send_stream_async(
        ullm::Message::user("Berlin"),
        {.on_event =
             [](const ullm::StreamEvent& event) {
                 if (event.type == ullm::StreamEvent::Type::tool_call_result) {
                     throw std::runtime_error("the consumer gave up");
                 }
             },
         .on_done = outcome.handler()});
    const auto result = outcome.get();
    REQUIRE_FALSE(result.has_value());
    CHECK_THROWS_WITH(result.value(), "the consumer gave up");
    goes_on(conversation);
}

TEST_CASE("an async turn's callback that runs a blocking turn on its conversation is refused",
          "[conversation][async][integration]") {
    // The callback runs while its turn holds the slot: a blocking send there would wait for
    // the turn that waits for the callback. It is refused; once the turn is done (`on_done`),
    // a blocking turn runs.
    Weather setup;
    auto& conversation = setup.conversation;
    std::string inside;
    std::promise<std::string> after;
    conversation.send_stream_async(
        ullm::Message::user("Berlin"),
        {.on_event =
             [&](const ullm::StreamEvent& event) {
                 if (event.type == ullm::StreamEvent::Type::tool_call_result) {
                     inside = ullm::test::error_code_of([&] { (void)conversation.send("Paris"); });
                 }
             },
         .on_done =
             [&](ullm::Result<ullm::ConversationReply> result) {
                 try {
                     after.set_value(result.value().text + " / " + conversation.send("Rome").text);
                 } catch (const std::exception& error) {
                     after.set_value(error.what());
                 }
             }});
    auto later = after.get_future();
    REQUIRE(later.wait_for(20s) == std::future_status::ready);
    CHECK(later.get() == "Sunny in Berlin. / Sunny in Rome.");
    CHECK(inside == "conversation_busy");
    CHECK(user_texts(conversation.history()) == std::vector<std::string>{"Berlin", "Rome"});
}

TEST_CASE("co_send is awaited in a coroutine, turn after turn",
          "[conversation][async][integration]") {
    Weather setup;
    auto& conversation = setup.conversation;
    std::promise<std::vector<std::string>> finished;
    auto run = [&]() -> Detached {
        std::vector<std::string> replies;
        try {
            for (const char* city : {"Lima", "Quito"}) {
                const ullm::ConversationReply reply = co_await conversation.co_send(city);
                replies.push_back(reply.text);
            }
            ullm::SendOptions invalid;
            invalid.max_tokens = -1;
            const ullm::ConversationReply never =
                co_await conversation.co_send(ullm::Message::user("x"), invalid);
            replies.push_back(never.text);
        } catch (const ullm::Error& error) {
            replies.push_back(error.code());
        }
        finished.set_value(std::move(replies));
    };
    run();
    auto future = finished.get_future();
    REQUIRE(future.wait_for(20s) == std::future_status::ready);
    CHECK(future.get() ==
          std::vector<std::string>{"Sunny in Lima.", "Sunny in Quito.", "invalid_max_tokens"});
    CHECK(conversation.history().size() == 8);
}

}  // namespace conversation_async_test
