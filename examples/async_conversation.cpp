// ullm async conversations: a streamed tool-using conversation driven by a coroutine, and a
// hundred conversations' turns in flight at once on a few threads.
//
// An in-process HTTP server on 127.0.0.1 plays the OpenAI Chat Completions API: asked about a
// city, it calls the `lookup_weather` tool, then answers with the tool's forecast word by word
// (or whole, when the request does not stream).

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/tools/schema.hpp>

#include <fmt/core.h>

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdio>
#include <exception>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/test_server.hpp"

namespace {

using namespace std::chrono_literals;
using ullm::json;

// One Chat Completions stream event carrying `delta`.
std::string event(const json& delta, const json& finish = nullptr) {
    const json chunk = {{"model", "gpt-4o-mini"},
                        {"choices", {{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}}}};
    return "data: " + chunk.dump() + "\n\n";
}

// The server's side: a tool call for a question, the forecast for a tool result.
ullm::test::ScriptedResponse answer(const ullm::test::RecordedRequest& request) {
    const json body = json::parse(request.body);
    const json& last = body["messages"].back();
    const bool streaming = body.value("stream", false);
    const std::string usage =
        R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":9}})";
    if (last["role"] == "tool") {
        const json result = json::parse(last["content"].get<std::string>());
        const std::string text = result["forecast"].get<std::string>() + " in " +
                                 result["city"].get<std::string>() + ".";
        if (!streaming) {
            const json reply = {{"model", "gpt-4o-mini"},
                                {"choices",
                                 {{{"index", 0},
                                   {"message", {{"role", "assistant"}, {"content", text}}},
                                   {"finish_reason", "stop"}}}},
                                {"usage", {{"prompt_tokens", 40}, {"completion_tokens", 9}}}};
            return {.headers = {{"Content-Type", "application/json"}},
                    .body = reply.dump(),
                    .delay_before_headers = 20ms};
        }
        std::vector<std::string> events;
        std::size_t from = 0;
        while (from < text.size()) {  // word by word
            const std::size_t space = text.find(' ', from);
            const std::size_t to = space == std::string::npos ? text.size() : space + 1;
            events.push_back(event({{"content", text.substr(from, to - from)}}));
            from = to;
        }
        events.push_back(event(json::object(), "stop") + "data: " + usage + "\n\ndata: [DONE]\n\n");
        return {.headers = {{"Content-Type", "text/event-stream"}},
                .chunks = events,
                .chunk_delay = 5ms};
    }
    const json call = {
        {"index", 0},
        {"id", "call_" + std::to_string(request.body.size())},
        {"type", "function"},
        {"function",
         {{"name", "lookup_weather"}, {"arguments", json{{"city", last["content"]}}.dump()}}}};
    if (!streaming) {
        json message = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call}}};
        message["tool_calls"][0].erase("index");
        const json reply = {
            {"model", "gpt-4o-mini"},
            {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", "tool_calls"}}}},
            {"usage", {{"prompt_tokens", 30}, {"completion_tokens", 8}}}};
        return {.headers = {{"Content-Type", "application/json"}},
                .body = reply.dump(),
                .delay_before_headers = 20ms};
    }
    return {.headers = {{"Content-Type", "text/event-stream"}},
            .chunks = {
                event({{"role", "assistant"}, {"tool_calls", {call}}}),
                event(json::object(), "tool_calls") + "data: " + usage + "\n\ndata: [DONE]\n\n"}};
}

ullm::Tool weather_tool() {
    return ullm::define_tool(
        {.name = "lookup_weather",
         .description = "The weather in a city",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [](const json& args, ullm::ToolContext&) -> json {
             return {{"city", args["city"]}, {"forecast", "Sunny"}};
         }});
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

// Two streamed turns of one conversation, event by event, with no thread waiting for them.
Detached chat(ullm::Conversation conversation, std::shared_ptr<std::promise<void>> finished) {
    try {
        for (const char* city : {"Lisbon", "Oslo"}) {
            fmt::print("user> {}\nassistant> ", city);
            ullm::AsyncEventStream stream = conversation.co_send_stream(ullm::Message::user(city));
            while (auto event = co_await stream.next()) {
                if (const auto* delta = event->text_delta()) fmt::print("{}", *delta);
                if (event->type == ullm::StreamEvent::Type::tool_call_result) {
                    fmt::print("[{} -> {}] ", event->tool_name, event->tool_result->result.dump());
                }
            }
            fmt::print("\n");
        }
        // A whole turn, awaited.
        const ullm::ConversationReply reply = co_await conversation.co_send("Rome");
        fmt::print("user> Rome\nassistant> {} ({} rounds)\n", reply.text, reply.model_rounds);
    } catch (const ullm::Error& error) {
        fmt::print("the conversation failed: {}\n", error.what());
    }
    finished->set_value();
}

// How many threads of this process ullm started (their names begin with "ullm-").
int ullm_threads() {
    int count = 0;
    DIR* tasks = opendir("/proc/self/task");
    if (tasks == nullptr) return 0;
    while (const dirent* entry = readdir(tasks)) {
        std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        if (name.rfind("ullm-", 0) == 0) ++count;
    }
    closedir(tasks);
    return count;
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
    // At most 8 requests to the provider at once, whatever the conversations ask: the others
    // wait in its queue, one lane per conversation, served in turn.
    const ullm::Client client(
        {.providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
             .api_key = "sk-offline-example", .base_url = server.base_url() + "/v1"})},
         .limits = {{"openai", {.max_in_flight = 8}}},
         .max_tool_threads = 4});

    // 1. A streamed conversation driven by a coroutine.
    auto finished = std::make_shared<std::promise<void>>();
    chat(client.conversation({.model = "gpt-4o-mini", .tools = {weather_tool()}}), finished);
    finished->get_future().wait();

    // 2. A hundred conversations, a tool turn each, all in flight at once.
    std::vector<ullm::Conversation> conversations;
    std::vector<std::future<ullm::ConversationReply>> replies;
    for (int i = 0; i < 100; ++i) {
        conversations.push_back(
            client.conversation({.model = "gpt-4o-mini", .tools = {weather_tool()}}));
        replies.push_back(conversations.back().send_async("city " + std::to_string(i)));
    }
    int threads = 0;
    int answered = 0;
    for (auto& reply : replies) {
        while (reply.wait_for(5ms) != std::future_status::ready) {
            threads = std::max(threads, ullm_threads());
        }
        if (reply.get().text.rfind("Sunny in city ", 0) == 0) ++answered;
    }
    fmt::print("{} of 100 turns answered; the server answered at most {} at once\n", answered,
               most.load());
    fmt::print("threads ullm started: at most {} (the I/O loop, the callback thread, tools)\n",
               threads);
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "example failed: %s\n", error.what());
    return 1;
}
