// ullm streaming: print an answer as it arrives, then cancel a stream half-way.
//
// An in-process HTTP server on 127.0.0.1 plays the OpenAI Chat Completions API and sends its
// answers as server-sent events, one small piece at a time. The first stream runs to its end;
// the second is stopped by a "Stop" button (another thread) while the server is still writing,
// and keeps exactly the text that had arrived. The third is a conversation turn, cancelled the
// same way: what the conversation keeps of it is up to `on_interrupted_turn`.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/test_server.hpp"

namespace {

using namespace std::chrono_literals;

// A Chat Completions event stream that sends one SSE event per piece of text, 20 ms apart.
// With `stall` set the server then goes quiet, as a slow model does, until the client leaves.
ullm::test::ScriptedResponse event_stream(const std::vector<std::string>& pieces, bool stall) {
    std::vector<std::string> events;
    for (const auto& piece : pieces) {
        const ullm::json chunk = {{"model", "gpt-4o-mini"},
                                  {"choices", {{{"index", 0}, {"delta", {{"content", piece}}}}}}};
        events.push_back("data: " + chunk.dump() + "\n\n");
    }
    if (!stall) {
        events.push_back(R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"
                         "\n\n");
        events.push_back(
            R"(data: {"choices":[],"usage":{"prompt_tokens":15,"completion_tokens":9}})"
            "\n\ndata: [DONE]\n\n");
    }
    return {.headers = {{"Content-Type", "text/event-stream"}},
            .chunks = events,
            .chunk_delay = 20ms,
            .stall = stall};
}

ullm::ChatRequest ask(std::string prompt) {
    ullm::ChatRequest request;
    request.model = "gpt-4o-mini";
    request.messages = {ullm::Message::user(std::move(prompt))};
    return request;
}

}  // namespace

int main() try {
    ullm::test::TestServer server;
    server.enqueue(event_stream(
        {"Streams ", "arrive ", "piece ", "by ", "piece, ", "so ", "the ", "answer ", "grows."},
        false));
    server.enqueue(event_stream({"Once upon a time, ", "a small robot ", "learned to"}, true));

    const ullm::Client client(
        {.providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
             .api_key = "sk-offline-example", .base_url = server.base_url() + "/v1"})}});

    // 1. A stream is pulled event by event; nothing is sent before the first pull.
    auto stream = client.stream(ask("How do streams work?"));
    int deltas = 0;
    fmt::print("assistant> ");
    for (const auto& event : stream) {
        if (const auto* delta = event.text_delta()) {
            fmt::print("{}", *delta);
            std::fflush(stdout);  // Show each piece the moment it arrives.
            ++deltas;
        }
    }
    // After the `done` event the whole response is there, with its usage.
    const auto& response = *stream.response();
    fmt::print("\n[{} text deltas, {} tokens in, {} out]\n", deltas, response.usage.input_tokens,
               response.usage.output_tokens);

    // 2. A stream cancelled through a stop token. `stream.cancel()`, from any thread, does the
    //    same. Here a thread plays the user who presses Stop once the first three pieces are
    //    on screen, while the model is still writing.
    std::stop_source stop;
    std::atomic<int> pieces{0};
    auto story = client.stream(ask("Tell me a story."), stop.get_token());
    const std::jthread stop_button([&stop, &pieces] {
        while (pieces.load() < 3) std::this_thread::sleep_for(5ms);
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
    });
    std::string received;
    fmt::print("assistant> ");
    try {
        for (const auto& event : story) {
            if (const auto* delta = event.text_delta()) {
                fmt::print("{}", *delta);
                std::fflush(stdout);
                received += *delta;
                ++pieces;
            }
        }
    } catch (const ullm::CancelledError& error) {
        // The pull that was waiting throws at once; the transfer is aborted.
        fmt::print("\n[stopped: {}, status {}]\n", error.code(), error.status());
    }
    fmt::print("partial text: \"{}\"\n", received);
    fmt::print("final response: {}\n", story.response() ? "yes" : "none");
    fmt::print("server saw the client hang up: {}\n",
               server.wait_for_client_aborts(1, 2s) ? "yes" : "no");

    // 3. A conversation turn, cancelled with `cancel()` from another thread. A cancelled turn
    //    commits nothing to the history, unless `on_interrupted_turn` is set: then the user's
    //    message is kept, followed by the message the callback returns.
    server.enqueue(event_stream({"Chapter one: ", "the robot ", "wakes"}, true));
    auto conversation = client.conversation(
        {.model = "gpt-4o-mini", .on_interrupted_turn = [](const ullm::InterruptedTurn& turn) {
             return std::optional(ullm::Message::assistant("[reply " + turn.code + "]"));
         }});
    auto turn = conversation.send_stream("Write chapter one.");
    pieces = 0;
    const std::jthread cancel_button([&turn, &pieces] {
        while (pieces.load() < 3) std::this_thread::sleep_for(5ms);
        turn.cancel();
    });
    try {
        for (const auto& event : turn) {
            if (event.text_delta()) ++pieces;
        }
    } catch (const ullm::CancelledError& error) {
        fmt::print("turn stopped after {} pieces: {}\n", pieces.load(), error.code());
    }
    for (const auto& message : conversation.history()) {
        fmt::print("  history: {}: {}\n", ullm::to_string(message.role), message.text());
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "streaming example failed: %s\n", error.what());
    return 1;
}
