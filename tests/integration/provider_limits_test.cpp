// ClientOptions::limits against the in-process server: requests in flight per provider for
// blocking calls, async calls and streams; lanes served in turn; a full queue; a call cancelled
// while it waits; invalid limits.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/catch.hpp"
#include "support/chat_completion_bodies.hpp"
#include "support/concurrency_counter.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace provider_limits_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::chat_completion_reply;
using ullm::test::error_code_of;
using ullm::test::failure_code;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

ullm::ClientOptions limited_options(const TestServer& server, ullm::ProviderLimits limits) {
    ullm::ClientOptions options;
    options.retry.initial_backoff = 10ms;
    options.providers = {std::make_shared<ullm::OpenAiChatProvider>(
        ullm::OpenAiChatOptions{.api_key = "sk-test", .base_url = server.base_url() + "/v1"})};
    options.default_model = "gpt-4o";
    options.limits = {{"openai", limits}};
    return options;
}

ullm::ChatRequest question(const std::string& text) {
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    request.messages = {ullm::Message::user(text)};
    return request;
}

std::string last_message(const ullm::test::RecordedRequest& request) {
    return json::parse(request.body)["messages"].back()["content"].get<std::string>();
}

// Answers each request with its last message after `delay`, and counts how many it was
// answering at once.
struct ConcurrencyProbe {
    ullm::test::ConcurrencyCounter answering;
    std::mutex mutex;
    std::vector<std::string> arrivals;
    /// The request "first" is answered only once this is set (`open`).
    std::atomic<bool> first_may_go{true};

    ullm::test::RequestHandler handler(std::chrono::milliseconds delay) {
        return [this, delay](const ullm::test::RecordedRequest& request) {
            const auto counted = answering.enter();
            {
                std::lock_guard lock(mutex);
                arrivals.push_back(last_message(request));
            }
            const auto give_up = std::chrono::steady_clock::now() + 10s;  // a failed test ends
            while (last_message(request) == "first" && !first_may_go.load() &&
                   std::chrono::steady_clock::now() < give_up) {
                std::this_thread::sleep_for(1ms);
            }
            std::this_thread::sleep_for(delay);
            return chat_completion_reply("re: " + last_message(request));
        };
    }
};

// One Chat Completions stream event: a delta of `text`, or the end (`finish_reason`).
std::string stream_chunk(const std::string& text, bool end = false) {
    const json chunk = {
        {"id", "c1"},
        {"object", "chat.completion.chunk"},
        {"model", "gpt-4o"},
        {"choices", json::array({{{"index", 0},
                                  {"delta", end ? json::object() : json{{"content", text}}},
                                  {"finish_reason", end ? json("stop") : json(nullptr)}}})}};
    return "data: " + chunk.dump() + "\n\n";
}

// A whole Chat Completions stream of one delta, `text`.
std::string one_delta_stream(const std::string& text) {
    return stream_chunk(text) + stream_chunk("", true) + "data: [DONE]\n\n";
}

}  // namespace

TEST_CASE("max_in_flight holds async calls, blocking calls and batches of one provider",
          "[limits][integration]") {
    TestServer server;
    ConcurrencyProbe probe;
    server.set_handler(probe.handler(40ms));
    const ullm::Client client(limited_options(server, {.max_in_flight = 2}));

    SECTION("a batch") {
        std::vector<ullm::ChatRequest> requests;
        for (int i = 0; i < 8; ++i) requests.push_back(question("q" + std::to_string(i)));
        const auto results = client.complete_many(requests, {.max_in_flight = 8});
        for (std::size_t i = 0; i < results.size(); ++i) {
            REQUIRE(results[i].has_value());
            CHECK(results[i].value().text == "re: q" + std::to_string(i));
        }
    }
    SECTION("blocking calls from many threads") {
        std::vector<std::thread> callers;
        std::atomic<int> answered{0};
        for (int i = 0; i < 6; ++i) {
            callers.emplace_back([&, i] {
                const std::string text = "t" + std::to_string(i);
                if (client.complete(question(text)).text == "re: " + text) ++answered;
            });
        }
        for (auto& caller : callers) caller.join();
        CHECK(answered == 6);
    }
    CHECK(probe.answering.most() <= 2);
    CHECK(probe.answering.most() >= 1);
}

TEST_CASE("waiting requests are served lane by lane", "[limits][integration]") {
    TestServer server;
    ConcurrencyProbe probe;
    probe.first_may_go = false;  // held until every other request is queued behind it
    server.set_handler(probe.handler(10ms));
    const ullm::Client client(limited_options(server, {.max_in_flight = 1}));
    std::vector<std::future<ullm::ChatResponse>> answers;
    answers.push_back(client.complete_async(question("first"), {.lane = 1}));
    REQUIRE(server.wait_for_requests(1, 5s));
    for (const char* text : {"busy-1", "busy-2", "busy-3"}) {
        answers.push_back(client.complete_async(question(text), {.lane = 1}));
    }
    answers.push_back(client.complete_async(question("quiet-1"), {.lane = 2}));
    probe.first_may_go = true;  // an async call is queued before `complete_async` returns
    for (auto& answer : answers) CHECK(answer.get().text.starts_with("re: "));
    const std::lock_guard lock(probe.mutex);
    CHECK(probe.arrivals ==
          std::vector<std::string>{"first", "busy-1", "quiet-1", "busy-2", "busy-3"});
}

TEST_CASE("a conversation's turn is its own lane: a batch queued before it does not delay it",
          "[limits][integration]") {
    TestServer server;
    ConcurrencyProbe probe;
    probe.first_may_go = false;
    server.set_handler(probe.handler(10ms));
    const ullm::Client client(limited_options(server, {.max_in_flight = 1}));
    auto first = client.complete_async(question("first"));
    REQUIRE(server.wait_for_requests(1, 5s));
    std::vector<std::future<ullm::ChatResponse>> batch;
    for (int i = 1; i <= 3; ++i) {
        batch.push_back(client.complete_async(question("batch-" + std::to_string(i))));
    }
    ullm::Conversation conversation = client.conversation({.session_id = "chat-1"});
    // The turn blocks its thread; "first" is let go once the turn has had ample time to queue.
    std::thread release([&probe] {
        std::this_thread::sleep_for(300ms);
        probe.first_may_go = true;
    });
    CHECK(conversation.send("turn").text == "re: turn");
    release.join();
    CHECK(first.get().text == "re: first");
    for (auto& answer : batch) CHECK(answer.get().text.starts_with("re: batch-"));
    const std::lock_guard lock(probe.mutex);
    CHECK(probe.arrivals ==
          std::vector<std::string>{"first", "batch-1", "turn", "batch-2", "batch-3"});
}

TEST_CASE("a stream holds its provider's slot until it ends", "[limits][integration]") {
    TestServer server;
    ScriptedResponse open_stream = ScriptedResponse::sse(stream_chunk("one"), 0);
    open_stream.stall = true;  // unfinished, the stream stays open until the client goes
    server.enqueue(open_stream);
    server.enqueue(ScriptedResponse::sse(one_delta_stream("two"), 0));
    const ullm::Client client(limited_options(server, {.max_in_flight = 1}));

    std::stop_source stop_first;
    std::promise<std::string> first_done;
    client.stream_async(question("a"),
                        {[](const ullm::StreamEvent&) {},
                         [&](ullm::Result<ullm::ChatResponse> result) {
                             first_done.set_value(result.error_code());
                         }},
                        {.stop = stop_first.get_token()});
    REQUIRE(server.wait_for_requests(1, 5s));

    std::promise<std::string> second_text;
    client.stream_async(question("b"), {[](const ullm::StreamEvent&) {},
                                        [&](ullm::Result<ullm::ChatResponse> result) {
                                            second_text.set_value(result ? result.value().text
                                                                         : result.error_code());
                                        }});
    std::this_thread::sleep_for(100ms);
    CHECK(server.request_count() == 1);  // the second waits for the first's slot

    stop_first.request_stop();
    CHECK(first_done.get_future().get() == "cancelled");
    CHECK(second_text.get_future().get() == "two");
    CHECK(server.request_count() == 2);

    // A stream waiting for the slot is cancelled at once, and never sent.
    server.enqueue(open_stream);
    std::stop_source stop_holder;
    std::promise<std::string> holder_done;
    client.stream_async(question("holder"),
                        {[](const ullm::StreamEvent&) {},
                         [&](ullm::Result<ullm::ChatResponse> result) {
                             holder_done.set_value(result.error_code());
                         }},
                        {.stop = stop_holder.get_token()});
    REQUIRE(server.wait_for_requests(3, 5s));
    std::promise<std::string> waiter_done;
    const ullm::StreamHandle waiter =
        client.stream_async(question("waiter"), {[](const ullm::StreamEvent&) {},
                                                 [&](ullm::Result<ullm::ChatResponse> result) {
                                                     waiter_done.set_value(result.error_code());
                                                 }});
    waiter.cancel();
    auto waiter_result = waiter_done.get_future();
    REQUIRE(waiter_result.wait_for(1s) == std::future_status::ready);
    CHECK(waiter_result.get() == "cancelled");
    stop_holder.request_stop();
    CHECK(holder_done.get_future().get() == "cancelled");
    CHECK(server.request_count() == 3);

    // A blocking stream takes its slot back once it has ended.
    server.enqueue(ScriptedResponse::sse(one_delta_stream("three"), 0));
    std::string text;
    for (auto stream = client.stream(question("c"));;) {
        auto event = stream.next();
        if (!event) break;
        if (event->type == ullm::StreamEvent::Type::text_delta) text += event->delta;
    }
    CHECK(text == "three");
    CHECK(server.request_count() == 4);
}

TEST_CASE("a full queue refuses, and a waiting call cancels without being sent",
          "[limits][integration]") {
    TestServer server;
    std::atomic<bool> running_may_end{false};  // "running" holds the slot until this is set
    server.set_handler([&](const ullm::test::RecordedRequest& request) {
        const auto give_up = std::chrono::steady_clock::now() + 10s;  // a failed test ends
        while (last_message(request) == "running" && !running_may_end.load() &&
               std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(1ms);
        }
        return chat_completion_reply("re: " + last_message(request));
    });
    const ullm::Client client(limited_options(server, {.max_in_flight = 1, .max_queued = 1}));

    auto running = client.complete_async(question("running"));
    REQUIRE(server.wait_for_requests(1, 5s));
    std::stop_source stop;
    auto waiting = client.complete_async(question("waiting"), {.stop = stop.get_token()});
    auto refused = client.complete_async(question("refused"));
    CHECK(failure_code(refused) == "queue_full");
    CHECK(error_code_of([&] { (void)client.complete(question("blocking")); }) == "queue_full");

    const auto cancelled_at = std::chrono::steady_clock::now();
    stop.request_stop();
    REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
    CHECK(std::chrono::steady_clock::now() - cancelled_at < 1s);
    CHECK(failure_code(waiting) == "cancelled");
    running_may_end = true;
    CHECK(running.get().text == "re: running");
    CHECK(client.complete(question("after")).text == "re: after");
    CHECK(server.request_count() == 2);  // "running" and "after": nothing else was sent
}

TEST_CASE("a 429 with a delay holds every request of the provider for that long",
          "[limits][integration]") {
    TestServer server;
    std::mutex mutex;
    std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> arrivals;
    std::atomic<bool> limited_once{false};
    server.set_handler([&](const ullm::test::RecordedRequest& request) {
        {
            const std::lock_guard lock(mutex);
            arrivals.emplace_back(last_message(request), std::chrono::steady_clock::now());
        }
        if (!limited_once.exchange(true)) {
            return ScriptedResponse::json(429, R"({"error":{"message":"slow down"}})",
                                          {{"retry-after-ms", "400"}});
        }
        if (json::parse(request.body).value("stream", false)) {
            return ScriptedResponse::sse(one_delta_stream("streamed"), 0);
        }
        return chat_completion_reply("re: " + last_message(request));
    });
    const ullm::Client client(limited_options(server, {.max_in_flight = 4}));
    // A stream tells of its retry: by then the client has seen the 429 and holds the provider.
    std::promise<void> retrying;
    std::promise<std::string> streamed;
    client.stream_async(question("first"),
                        {[&](const ullm::StreamEvent& event) {
                             if (event.type == ullm::StreamEvent::Type::retry) retrying.set_value();
                         },
                         [&](ullm::Result<ullm::ChatResponse> result) {
                             streamed.set_value(result ? result.value().text : result.error_code());
                         }});
    REQUIRE(retrying.get_future().wait_for(5s) == std::future_status::ready);
    auto second = client.complete_async(question("second"));
    CHECK(streamed.get_future().get() == "streamed");
    CHECK(second.get().text == "re: second");
    const std::lock_guard lock(mutex);
    REQUIRE(arrivals.size() == 3);
    // Neither the retry nor the other request went out before the provider's delay was over.
    CHECK(arrivals[1].second - arrivals[0].second >= 350ms);
    CHECK(arrivals[2].second - arrivals[0].second >= 350ms);
}

TEST_CASE("a request that waits past max_queue_wait fails unsent with queue_timeout",
          "[limits][integration]") {
    TestServer server;
    ConcurrencyProbe probe;
    probe.first_may_go = false;  // held until the others have given up
    server.set_handler(probe.handler(0ms));
    const ullm::Client client(
        limited_options(server, {.max_in_flight = 1, .max_queue_wait = 50ms}));
    auto first = client.complete_async(question("first"));
    REQUIRE(server.wait_for_requests(1, 5s));
    auto queued = client.complete_async(question("queued"));
    CHECK(failure_code(queued) == "queue_timeout");
    CHECK(error_code_of([&] { (void)client.complete(question("blocking")); }) == "queue_timeout");
    probe.first_may_go = true;
    CHECK(first.get().text == "re: first");
    CHECK(client.complete(question("after")).text == "re: after");
    const std::lock_guard lock(probe.mutex);
    CHECK(probe.arrivals == std::vector<std::string>{"first", "after"});
}

TEST_CASE("invalid limits fail the client's construction", "[limits][integration]") {
    TestServer server;
    ullm::ClientOptions options = limited_options(server, {.tokens_per_minute = -1});
    CHECK(error_code_of([&] { const ullm::Client client(options); }) == "invalid_limits");
    options.limits = {{"", ullm::ProviderLimits{}}};
    CHECK(error_code_of([&] { const ullm::Client client(options); }) == "invalid_limits");
    options.limits = {{"openai", {.max_queue_wait = std::chrono::milliseconds(-1)}}};
    CHECK(error_code_of([&] { const ullm::Client client(options); }) == "invalid_limits");
}

}  // namespace provider_limits_test
