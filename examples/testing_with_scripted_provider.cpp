// ullm example: testing your own code with the scripted provider.
//
// `plan_picnic` is application code: it asks a model, which may call a weather tool, whether
// a picnic is a good idea. The test below runs it offline against `ullm::ScriptedProvider`: it
// queues what the model will answer, runs the code, and checks both the code's result and
// what the code sent (the system prompt, the tool result the model got back). Streams are
// scripted event by event, and a slow tool shows that it stops at its timeout. Last, recorded
// provider traffic is replayed through an in-process HTTP server to the real OpenAI adapter and
// libcurl transport. The same works inside any test framework; here plain checks keep the example
// self-contained.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/testing/replay.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>

#include <fmt/core.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "support/test_server.hpp"

namespace {

using ullm::json;

// --- The application code under test -------------------------------------------------------

ullm::Tool weather_tool() {
    return ullm::define_tool(
        {.name = "weather",
         .description = "Tomorrow's forecast for a city",
         .parameters = ullm::schema::object({{"city", ullm::schema::string()}}, {"city"}),
         .execute = [](const json& input, ullm::ToolContext&) -> json {
             return {{"city", input["city"]}, {"forecast", "sunny"}, {"high_c", 24}};
         }});
}

std::string plan_picnic(const ullm::Client& client, const std::string& city) {
    auto conversation = client.conversation(
        {.system = "You plan picnics. Check the weather first.", .tools = {weather_tool()}});
    return conversation.send("Should we have a picnic in " + city + " tomorrow?").text;
}

// A tool that waits for a slow archive. It waits on its stop token, so a timeout or a cancelled
// turn ends it at once (a tool that ignores the token keeps the conversation busy until it
// returns).
ullm::Tool slow_lookup_tool() {
    return ullm::define_tool(
        {.name = "slow_lookup",
         .description = "Looks a term up in a slow archive",
         .parameters = ullm::schema::object({{"term", ullm::schema::string()}}, {"term"}),
         .execute = [](const json&, ullm::ToolContext& context) -> json {
             std::mutex mutex;
             std::condition_variable_any archive_answered;  // Never notified: the archive is slow.
             std::unique_lock lock(mutex);
             archive_answered.wait(lock, context.stop_token, [] { return false; });
             throw ullm::ToolResultError("The archive did not answer.");
         }});
}

// Streams the answer to `question`; returns the text and how many pieces it came in.
std::pair<std::string, int> stream_answer(const ullm::Client& client, const std::string& question) {
    auto conversation = client.conversation({.system = "You plan picnics."});
    std::pair<std::string, int> answer;
    for (const auto& event : conversation.send_stream(question)) {
        if (const auto* delta = event.text_delta()) {
            answer.first += *delta;
            ++answer.second;
        }
    }
    return answer;
}

// --- The test ----------------------------------------------------------------------------

// A recorded Chat Completions stream in the `*.chunks.txt` form: one SSE payload per line.
constexpr const char* recorded_stream =
    R"({"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Pack a"}}]}
{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" blanket."},"finish_reason":"stop"}]}
{"id":"chatcmpl-1","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}
)";

ullm::StreamEvent text_delta(std::string text) {
    ullm::StreamEvent event;
    event.type = ullm::StreamEvent::Type::text_delta;
    event.delta = std::move(text);
    return event;
}

int failures = 0;

void check(bool ok, const char* what) {
    fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failures;
}

}  // namespace

int main() try {
    // A client whose default model is served by the scripted provider: no network, no key.
    auto model = std::make_shared<ullm::ScriptedProvider>("scripted");
    const ullm::Client client({.default_model = "scripted/test-model", .providers = {model}});

    // What the model will do, one queued answer per request: call the tool, then answer.
    model->push_tool_call("weather", {{"city", "Lyon"}});
    model->push_text("Yes: sunny and 24 °C in Lyon tomorrow.");

    const std::string answer = plan_picnic(client, "Lyon");

    check(answer == "Yes: sunny and 24 °C in Lyon tomorrow.", "the code returns the answer");
    // Every request the code made is recorded, so the test can look at what was sent.
    // requests() returns a copy: keep it in a variable. A range-for over a member of the
    // temporary, `for (const auto& m : model->requests().back().messages)`, reads freed memory.
    const auto requests = model->requests();
    check(requests.size() == 2, "two requests: the question, then the tool result");
    check(requests[0].system == "You plan picnics. Check the weather first.",
          "the system prompt is sent");
    check(requests[0].tools.size() == 1 && requests[0].tools[0].name == "weather",
          "the weather tool is offered");
    const auto results = requests[1].messages.back().tool_results();
    check(results.size() == 1 && results[0].result["forecast"] == "sunny",
          "the model got the tool's result back");
    check(model->remaining() == 0, "every queued answer was used");

    // Failures are scripted the same way: the next request throws this error.
    model->push_error(
        std::make_exception_ptr(ullm::AuthenticationError("the key was revoked", 401)));
    try {
        (void)plan_picnic(client, "Lyon");
        check(false, "a provider error reaches the caller");
    } catch (const ullm::Error& error) {
        check(error.code() == "authentication_failed", "a provider error reaches the caller");
    }

    // Streams: queue the events one by one; the `done` that ends the stream is built from them.
    model->push_events({text_delta("Bring "), text_delta("a "), text_delta("hat.")});
    const auto [streamed, pieces] = stream_answer(client, "What should we bring?");
    check(streamed == "Bring a hat." && pieces == 3, "a scripted stream arrives in three pieces");

    // Each tool call runs on its own thread with a deadline. Past it, the call is asked to
    // stop and the model is told; the conversation takes the next turn at once.
    model->push_tool_call("slow_lookup", {{"term", "picnic"}});
    model->push_text("The archive is slow today.");
    model->push_text("Then bring sandwiches.");
    auto patient = client.conversation(
        {.tools = {slow_lookup_tool()}, .tool_execution_timeout = std::chrono::milliseconds(50)});
    (void)patient.send("Look up the history of picnics.");
    const auto told = model->requests().back().messages.back().tool_results().at(0).result;
    check(told ==
              "Error: tool \"slow_lookup\" did not finish within 50 ms and was stopped. Try "
              "again or proceed without its result.",
          "a tool past its timeout is stopped and the model is told");
    check(patient.send("What should we eat?").text == "Then bring sandwiches.",
          "the next turn runs at once");

    // Recorded traffic: the in-process server sends the recording, framed as the provider's
    // SSE, in 16-byte pieces; the real adapter and transport decode it.
    ullm::test::TestServer server;
    server.enqueue(ullm::test::ScriptedResponse::sse(
        ullm::testing::frame_chunks_as_sse(recorded_stream,
                                           ullm::testing::ChunkFraming::chat_completions),
        16));
    const ullm::Client replayed(
        {.providers = {std::make_shared<ullm::OpenAiChatProvider>(
             ullm::OpenAiChatOptions{.api_key = "sk-test-key", .base_url = server.base_url()})}});
    auto stream = replayed.stream(
        {.model = "gpt-4o-mini", .messages = {ullm::Message::user("What should we bring?")}});
    std::string text;
    for (const auto& event : stream) {
        if (const auto* delta = event.text_delta()) text += *delta;
    }
    check(text == "Pack a blanket.", "the recorded stream decodes to its text");
    check(stream.response() && stream.response()->usage.output_tokens == 3,
          "the final response carries the recorded usage");
    // What reached the wire: the path and the key.
    const auto sent = server.requests().at(0);
    check(sent.target == "/chat/completions", "the adapter posted to /chat/completions");
    check(sent.header("authorization") == "Bearer sk-test-key", "with the key as a bearer token");

    fmt::print("{}\n", failures == 0 ? "all checks passed" : "some checks FAILED");
    return failures == 0 ? 0 : 1;
} catch (const std::exception& error) {
    std::fprintf(stderr, "testing_with_scripted_provider failed: %s\n", error.what());
    return 1;
}
