// ullm async calls: many requests in flight on one client, with no thread per request.
//
// An in-process HTTP server on 127.0.0.1 plays the OpenAI Chat Completions API: it answers each
// question after 50 ms, counting how many it is answering at once, and streams one answer
// word by word. The program sends a request for a future, one with a callback, a batch of 24
// with at most 8 in flight, the batch again through a client that limits its provider to 4, a
// stream pushed to callbacks, the same from a coroutine, then cancels a request the server
// never answers.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/test_server.hpp"

namespace {

using namespace std::chrono_literals;

ullm::ChatRequest ask(std::string prompt) {
    ullm::ChatRequest request;
    request.model = "gpt-4o-mini";
    request.messages = {ullm::Message::user(std::move(prompt))};
    return request;
}

// A Chat Completions answer, "Answer to <question>", after 50 ms; or a stream of words.
ullm::test::ScriptedResponse answer(const ullm::test::RecordedRequest& request) {
    const ullm::json body = ullm::json::parse(request.body);
    const std::string question = body["messages"].back()["content"].get<std::string>();
    if (body.value("stream", false)) {
        std::vector<std::string> events;
        for (const char* word : {"Streams ", "arrive ", "as ", "they ", "are ", "written."}) {
            const ullm::json chunk = {
                {"model", "gpt-4o-mini"},
                {"choices", {{{"index", 0}, {"delta", {{"content", word}}}}}}};
            events.push_back("data: " + chunk.dump() + "\n\n");
        }
        events.push_back(
            R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":6}})"
            "\n\ndata: [DONE]\n\n");
        return {.headers = {{"Content-Type", "text/event-stream"}},
                .chunks = events,
                .chunk_delay = 10ms};
    }
    const ullm::json reply = {
        {"id", "chatcmpl-1"},
        {"model", "gpt-4o-mini"},
        {"choices",
         {{{"index", 0},
           {"message", {{"role", "assistant"}, {"content", "Answer to " + question}}},
           {"finish_reason", "stop"}}}},
        {"usage", {{"prompt_tokens", 8}, {"completion_tokens", 4}}}};
    return {.headers = {{"Content-Type", "application/json"}},
            .body = reply.dump(),
            .delay_before_headers = 50ms};
}

// A coroutine type of the plainest kind (it starts at once, nobody awaits it): ullm's
// awaitables need no coroutine library.
struct Detached {
    struct promise_type {
        Detached get_return_object() { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() {}
        void unhandled_exception() { std::terminate(); }
    };
};

// Asks one question with co_await, then streams the answer to another, event by event.
Detached converse(ullm::Client client, std::shared_ptr<std::promise<void>> finished) {
    try {
        const ullm::ChatResponse first = co_await client.co_complete(ask("question 3"));
        fmt::print("coroutine: {}\n", first.text);

        ullm::AsyncEventStream stream = client.co_stream(ask("how do coroutines stream?"));
        std::string streamed;
        while (auto event = co_await stream.next()) {
            if (const auto* delta = event->text_delta()) streamed += *delta;
        }
        fmt::print("coroutine streamed: {}\n", streamed);
    } catch (const ullm::Error& error) {
        fmt::print("coroutine failed: {}\n", error.what());
    }
    finished->set_value();
}

}  // namespace

int main() try {
    ullm::test::TestServer server;
    std::atomic<int> answering{0};
    std::atomic<int> most{0};
    server.set_handler([&](const ullm::test::RecordedRequest& request) {
        const int now = ++answering;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        auto response = answer(request);
        std::this_thread::sleep_for(response.delay_before_headers);
        response.delay_before_headers = {};
        --answering;
        return response;
    });
    const ullm::Client client(
        {.providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
             .api_key = "sk-offline-example", .base_url = server.base_url() + "/v1"})}});

    // 1. A future: the request is sent at once; get() waits for the answer.
    std::future<ullm::ChatResponse> future = client.complete_async(ask("question 1"));
    fmt::print("future: {}\n", future.get().text);

    // 2. A callback, given the outcome as a Result: the response, or the error.
    std::promise<std::string> told;
    client.complete_async(ask("question 2"), [&told](ullm::Result<ullm::ChatResponse> result) {
        told.set_value(result ? result.value().text : "failed: " + result.error_code());
    });
    fmt::print("callback: {}\n", told.get_future().get());

    // 3. A batch: one result per request, in request order, at most 8 in flight at once.
    std::vector<ullm::ChatRequest> batch;
    for (int i = 1; i <= 24; ++i) batch.push_back(ask("batch question " + std::to_string(i)));
    batch[4].model = "nowhere/model";  // fails alone
    most = 0;
    const std::vector<ullm::Result<ullm::ChatResponse>> results =
        client.complete_many(batch, {.max_in_flight = 8});
    const auto answered = std::count_if(results.begin(), results.end(),
                                        [](const auto& result) { return result.has_value(); });
    fmt::print("batch: {} answered, #5 failed with {}, #24: {}\n", answered,
               results[4].error_code(), results[23].value().text);
    fmt::print("the server answered at most {} at once\n", most.load());

    // 3b. Limits per provider, across every call of a client: at most 4 requests to "openai"
    //     in flight, however many are asked for; the rest wait in its queue, lane by lane.
    const ullm::Client limited(
        {.providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
             .api_key = "sk-offline-example", .base_url = server.base_url() + "/v1"})},
         .limits = {{"openai", {.max_in_flight = 4, .requests_per_minute = 600}}}});
    batch[4].model = "gpt-4o-mini";
    most = 0;
    const auto limited_results = limited.complete_many(batch, {.max_in_flight = 24});
    fmt::print("limited: {} answered, the server answered at most {} at once\n",
               std::count_if(limited_results.begin(), limited_results.end(),
                             [](const auto& result) { return result.has_value(); }),
               most.load());

    // 4. A stream pushed to callbacks as it arrives: on_event for each event, then on_done.
    std::promise<void> streamed;
    std::string text;
    client.stream_async(ask("how do streams work?"),
                        {.on_event =
                             [&text](const ullm::StreamEvent& event) {
                                 if (const auto* delta = event.text_delta()) text += *delta;
                             },
                         .on_done =
                             [&streamed](ullm::Result<ullm::ChatResponse> result) {
                                 fmt::print("stream done: {} tokens out\n",
                                            result.value().usage.output_tokens);
                                 streamed.set_value();
                             }});
    streamed.get_future().wait();
    fmt::print("streamed text: {}\n", text);

    // 5. The same from a coroutine.
    auto finished = std::make_shared<std::promise<void>>();
    converse(client, finished);
    finished->get_future().wait();

    // 6. Cancelling: a stop token completes the call with `cancelled`, even while the server
    //    has not answered at all.
    server.set_handler([](const ullm::test::RecordedRequest&) {
        return ullm::test::ScriptedResponse{.delay_before_headers = 30s, .stall = true};
    });
    std::stop_source stop;
    auto never =
        client.complete_async(ask("a question nobody answers"), {.stop = stop.get_token()});
    (void)server.wait_for_requests(30, 5s);
    stop.request_stop();
    try {
        (void)never.get();
    } catch (const ullm::CancelledError& error) {
        fmt::print("cancelled: {} (status {})\n", error.code(), error.status());
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "async example failed: %s\n", error.what());
    return 1;
}
