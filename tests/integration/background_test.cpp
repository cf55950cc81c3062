// OpenAI Responses background mode end to end, through the real Client and libcurl against the
// in-process server: a queued response polled until it finishes, waits that fail or are
// cancelled, cancelling, and streams that lose their connection and are resumed.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <algorithm>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace background_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::error_code_of;
using ullm::test::RecordedRequest;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;
using Type = ullm::StreamEvent::Type;

namespace {

const std::string api_key = "sk-bg-test-4f9c2a7e1b";

// What `on_usage` was told, from any thread.
struct UsageLog {
    std::mutex mutex;
    std::vector<ullm::UsageReport> reports;

    std::vector<ullm::UsageReport> all() {
        std::lock_guard lock(mutex);
        return reports;
    }
};

ullm::Client client_for(const TestServer& server, UsageLog* usage = nullptr) {
    ullm::RetryPolicy retry;
    retry.initial_backoff = 10ms;
    auto responses = std::make_shared<ullm::OpenAiResponsesProvider>(
        ullm::OpenAiResponsesOptions{.api_key = api_key,
                                     .base_url = server.base_url() + "/v1",
                                     .provider_name = "openai-responses"});
    auto chat = std::make_shared<ullm::OpenAiChatProvider>(
        ullm::OpenAiChatOptions{.api_key = api_key, .base_url = server.base_url() + "/v1"});
    ullm::ClientOptions options{.retry = retry, .providers = {responses, chat}};
    if (usage != nullptr) {
        options.on_usage = [usage](const ullm::UsageReport& report) {
            std::lock_guard lock(usage->mutex);
            usage->reports.push_back(report);
        };
    }
    return ullm::Client(std::move(options));
}

ullm::ChatRequest ask(std::string text) {
    ullm::ChatRequest request;
    request.model = "openai-responses/gpt-4.1";
    request.messages = {ullm::Message::user(std::move(text))};
    return request;
}

const json message_item = {
    {"id", "msg_1"},
    {"type", "message"},
    {"status", "completed"},
    {"role", "assistant"},
    {"content",
     {{{"type", "output_text"}, {"text", "Hello, world"}, {"annotations", json::array()}}}}};

const json call_item = {{"id", "fc_1"},          {"type", "function_call"},
                        {"status", "completed"}, {"call_id", "call_1"},
                        {"name", "weather"},     {"arguments", R"({"city":"Paris"})"}};

// A background response object in `status`; finished ones hold the message and the call.
json response_in(const std::string& status, const std::string& id = "resp_bg") {
    json response = {{"id", id},           {"object", "response"}, {"status", status},
                     {"background", true}, {"model", "gpt-4.1"},   {"output", json::array()},
                     {"usage", nullptr}};
    if (status == "completed") {
        response["output"] = {message_item, call_item};
        response["usage"] = {{"input_tokens", 12}, {"output_tokens", 9}};
    } else if (status == "cancelled") {
        json partial = message_item;
        partial["content"][0]["text"] = "Hello";
        partial["status"] = "incomplete";
        response["output"] = json::array({partial});
    }
    return response;
}

std::string body_in(const std::string& status) {
    return response_in(status).dump();
}

// The events of the streamed background response, numbered 0 to 16.
std::vector<json> stream_events(bool background = true) {
    const json part = {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}};
    const auto text = [](const char* type, const char* key, const char* value) {
        return json{{"type", type},
                    {"item_id", "msg_1"},
                    {"output_index", 0},
                    {"content_index", 0},
                    {key, value}};
    };
    const auto arguments = [](const char* type, const char* key, const char* value) {
        return json{{"type", type}, {"item_id", "fc_1"}, {"output_index", 1}, {key, value}};
    };
    json added_message = message_item;
    added_message["content"] = json::array();
    added_message["status"] = "in_progress";
    json added_call = call_item;
    added_call["arguments"] = "";
    added_call["status"] = "in_progress";
    std::vector<json> events = {
        {{"type", "response.created"}, {"response", response_in("queued")}},
        {{"type", "response.queued"}, {"response", response_in("queued")}},
        {{"type", "response.in_progress"}, {"response", response_in("in_progress")}},
        {{"type", "response.output_item.added"}, {"output_index", 0}, {"item", added_message}},
        {{"type", "response.content_part.added"},
         {"item_id", "msg_1"},
         {"output_index", 0},
         {"content_index", 0},
         {"part", part}},
        text("response.output_text.delta", "delta", "Hel"),
        text("response.output_text.delta", "delta", "lo, "),
        text("response.output_text.delta", "delta", "world"),
        text("response.output_text.done", "text", "Hello, world"),
        {{"type", "response.content_part.done"},
         {"item_id", "msg_1"},
         {"output_index", 0},
         {"content_index", 0},
         {"part", message_item["content"][0]}},
        {{"type", "response.output_item.done"}, {"output_index", 0}, {"item", message_item}},
        {{"type", "response.output_item.added"}, {"output_index", 1}, {"item", added_call}},
        arguments("response.function_call_arguments.delta", "delta", R"({"city":)"),
        arguments("response.function_call_arguments.delta", "delta", R"("Paris"})"),
        arguments("response.function_call_arguments.done", "arguments", R"({"city":"Paris"})"),
        {{"type", "response.output_item.done"}, {"output_index", 1}, {"item", call_item}},
        {{"type", "response.completed"}, {"response", response_in("completed")}},
    };
    for (std::size_t i = 0; i < events.size(); ++i) {
        events[i]["sequence_number"] = i;
        if (!background && events[i].contains("response")) {
            events[i]["response"]["background"] = false;
        }
    }
    return events;
}

std::string frame(const json& event) {
    return "event: " + event["type"].get<std::string>() + "\ndata: " + event.dump() + "\n\n";
}

// The wire bytes of events `first` to `last`, then half of event `last + 1` when `cut`.
std::string wire(std::size_t first, std::size_t last, bool cut = false, bool background = true) {
    const auto events = stream_events(background);
    std::string out;
    for (std::size_t i = first; i <= last && i < events.size(); ++i) out += frame(events[i]);
    if (cut && last + 1 < events.size()) {
        const std::string next = frame(events[last + 1]);
        out += next.substr(0, next.size() / 2);
    }
    return out;
}

// A stream that sends `bytes` and then drops the connection.
ScriptedResponse dropped_after(const std::string& bytes) {
    ScriptedResponse response = ScriptedResponse::sse(bytes, 0);
    response.disconnect = true;
    return response;
}

// The `starting_after` a request asked for; -1 when none.
long starting_after_of(const RecordedRequest& request) {
    const auto at = request.target.find("starting_after=");
    return at == std::string::npos ? -1 : std::stol(request.target.substr(at + 15));
}

struct Drained {
    std::string text;
    std::string arguments;
    std::vector<ullm::StreamEvent> retries;
    std::vector<Type> types;
};

Drained drain(ullm::ChatStream& stream) {
    Drained out;
    for (const auto& event : stream) {
        out.types.push_back(event.type);
        if (const auto* delta = event.text_delta()) out.text += *delta;
        if (event.type == Type::tool_call_delta) out.arguments += event.delta;
        if (event.type == Type::retry) out.retries.push_back(event);
    }
    return out;
}

}  // namespace

TEST_CASE("a background request is queued, polled twice and returned once it completes",
          "[client][integration][background]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, body_in("queued"), {{"x-request-id", "req_1"}}));
    // The first poll finds it running and asks for a wait, the second finds it done.
    server.enqueue(
        ScriptedResponse::json(200, body_in("in_progress"), {{"retry-after-ms", "150"}}));
    server.enqueue(ScriptedResponse::json(200, body_in("completed")));
    UsageLog usage;
    const auto client = client_for(server, &usage);
    std::stop_source stop;
    const auto started = std::chrono::steady_clock::now();

    // A background request returns at once: queued, with the id to poll it by.
    ullm::ChatRequest request = ask("Write a long report.");
    request.provider_options = {{"background", true}};
    const ullm::ChatResponse queued = client.complete(request);
    CHECK(queued.status == ullm::ResponseStatus::queued);
    CHECK(queued.text.empty());
    CHECK(queued.usage.output_tokens == 0);

    // Poll until it finishes, every 20 ms at first and at most every 100 ms (or as long as a
    // Retry-After asks); the stop token ends the wait early.
    const ullm::ChatResponse report =
        client.wait_response(request.model, queued.response_id,
                             {.initial_interval = 20ms, .max_interval = 100ms}, stop.get_token());
    CHECK(report.finished());
    CHECK(report.text == "Hello, world");

    CHECK(std::chrono::steady_clock::now() - started >= 150ms);  // the Retry-After was kept
    CHECK(queued.response_id == "resp_bg");
    CHECK(queued.request_id == "req_1");
    CHECK(report.response_id == "resp_bg");
    CHECK(report.tool_calls.size() == 1);
    CHECK(report.usage.input_tokens == 12);
    CHECK(report.usage.output_tokens == 9);
    // Usage is reported once, when the response finished; the queued answer spent nothing.
    const auto reports = usage.all();
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].usage.output_tokens == 9);
    CHECK(reports[0].model == "gpt-4.1");

    const auto sent = server.requests();
    REQUIRE(sent.size() == 3);
    CHECK(sent[0].method == "POST");
    CHECK(sent[0].target == "/v1/responses");
    CHECK(json::parse(sent[0].body)["background"] == true);
    for (std::size_t i = 1; i < 3; ++i) {
        CHECK(sent[i].method == "GET");
        CHECK(sent[i].target == "/v1/responses/resp_bg");
        CHECK(sent[i].header("authorization") == "Bearer " + api_key);
        CHECK(sent[i].body.empty());
    }
}

TEST_CASE("a wait ends with the failed response's error, response_cancelled, or a poll's error",
          "[client][integration][background]") {
    const std::string model = "openai-responses/gpt-4.1";
    {
        // A 503 poll is retried; a failed response is the mapped error and is not polled again.
        TestServer server;
        server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy"}})"));
        server.enqueue(ScriptedResponse::json(200, body_in("in_progress")));
        json failed = response_in("failed");
        failed["error"] = {{"code", "server_error"}, {"message", "The model crashed"}};
        server.enqueue(ScriptedResponse::json(200, failed.dump()));
        server.enqueue(ScriptedResponse::json(200, body_in("completed")));
        UsageLog usage;
        CHECK(error_code_of([&] {
                  (void)client_for(server, &usage)
                      .wait_response(model, "resp_bg", {.initial_interval = 5ms});
              }) == "provider_error");
        CHECK(server.request_count() == 3);
        CHECK(usage.all().empty());
    }
    {
        TestServer server;
        server.enqueue(ScriptedResponse::json(200, body_in("cancelled")));
        try {
            (void)client_for(server).wait_response(model, "resp_bg");
            FAIL("no error");
        } catch (const ullm::ProviderError& error) {
            CHECK(error.code() == "response_cancelled");
            CHECK(error.status() == 409);
            CHECK_FALSE(error.retryable());
            CHECK(error.provider() == "openai-responses");
        }
    }
    {
        // An id the server does not know; the key it echoes never reaches the error.
        TestServer server;
        server.enqueue(
            ScriptedResponse::json(404, R"({"error":{"message":"No response resp_gone for key )" +
                                            api_key + R"(","type":"invalid_request_error"}})"));
        try {
            (void)client_for(server).wait_response(model, "resp_gone");
            FAIL("no error");
        } catch (const ullm::Error& error) {
            CHECK(error.code() == "invalid_request");
            CHECK(std::string(error.what()).find(api_key.substr(0, 10)) == std::string::npos);
        }
        CHECK(server.request_count() == 1);
    }
    {
        // Refused before anything is sent.
        TestServer server;
        const auto client = client_for(server);
        CHECK(error_code_of([&] { (void)client.wait_response("gpt-4o", "resp_bg"); }) ==
              "unsupported_option");
        CHECK(error_code_of([&] { (void)client.wait_response(model, "resp/../x"); }) ==
              "invalid_response_id");
        CHECK(error_code_of([&] { (void)client.cancel_response(model, ""); }) ==
              "invalid_response_id");
        CHECK(error_code_of([&] { (void)client.resume_stream(model, "resp bg", 3); }) ==
              "invalid_response_id");
        CHECK(error_code_of([&] {
                  (void)client.wait_response(model, "resp_bg", {.multiplier = 0.5});
              }) == "invalid_poll_options");
        CHECK(error_code_of([&] {
                  (void)client.wait_response(model, "resp_bg", {.initial_interval = 0ms});
              }) == "invalid_poll_options");
        CHECK(error_code_of([&] {
                  (void)client.wait_response(model, "resp_bg",
                                             {.initial_interval = 2s, .max_interval = 1s});
              }) == "invalid_poll_options");
        CHECK(server.request_count() == 0);
    }
}

TEST_CASE("a wait is cancelled through its stop token, between polls and during one",
          "[client][integration][background]") {
    for (const bool during_poll : {false, true}) {
        INFO((during_poll ? "during a poll" : "between polls"));
        TestServer server;
        server.set_handler([during_poll](const RecordedRequest&) {
            ScriptedResponse running = ScriptedResponse::json(200, body_in("in_progress"));
            if (during_poll) running.delay_before_headers = 30s;
            return running;
        });
        const auto client = client_for(server);
        std::stop_source stop;
        std::jthread stopper([&server, &stop] {
            if (server.wait_for_requests(1, 10s)) std::this_thread::sleep_for(50ms);
            stop.request_stop();
        });
        const auto started = std::chrono::steady_clock::now();
        CHECK(error_code_of([&] {
                  (void)client.wait_response("openai-responses/gpt-4.1", "resp_bg",
                                             {.initial_interval = 30s, .max_interval = 30s},
                                             stop.get_token());
              }) == "cancelled");
        CHECK(std::chrono::steady_clock::now() - started < 10s);
        CHECK(server.request_count() == 1);
    }
}

TEST_CASE("cancel_response posts to /cancel and returns the cancelled response",
          "[client][integration][background]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, body_in("cancelled")));
    UsageLog usage;
    const auto client = client_for(server, &usage);

    const ullm::ChatResponse cancelled =
        client.cancel_response("openai-responses/gpt-4.1", "resp_bg");
    CHECK(cancelled.status == ullm::ResponseStatus::cancelled);

    CHECK(cancelled.text == "Hello");
    CHECK(cancelled.response_id == "resp_bg");
    CHECK(cancelled.finish_reason == ullm::FinishReason::error);
    CHECK(usage.all().empty());
    const auto sent = server.requests();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].method == "POST");
    CHECK(sent[0].target == "/v1/responses/resp_bg/cancel");
    CHECK(sent[0].header("authorization") == "Bearer " + api_key);
}

TEST_CASE("a background stream that loses its connection is resumed after its last event",
          "[client][integration][background]") {
    TestServer server;
    // The stream drops in the middle of event 7 ("world"), and the resumed one in the middle of
    // the call's arguments (event 13): the call starts before the drop and ends after it.
    server.enqueue(dropped_after(wire(0, 6, true)));
    server.set_handler([](const RecordedRequest& request) {
        const long after = starting_after_of(request);
        if (after == 6) return dropped_after(wire(7, 12, true));
        return ScriptedResponse::sse(wire(static_cast<std::size_t>(after + 1), 16), 7);
    });
    UsageLog usage;
    const auto client = client_for(server, &usage);
    ullm::ChatRequest request = ask("Say hello, then look up the weather.");
    request.provider_options = {{"background", true}};
    request.tools = {{"weather", "Look up the weather",
                      json{{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}};

    auto stream = client.stream(request);
    const Drained out = drain(stream);

    // Every event once: the text whole, the call's arguments whole, one done.
    CHECK(out.text == "Hello, world");
    CHECK(out.arguments == R"({"city":"Paris"})");
    CHECK(std::count(out.types.begin(), out.types.end(), Type::tool_call_start) == 1);
    CHECK(std::count(out.types.begin(), out.types.end(), Type::tool_call_end) == 1);
    CHECK(std::count(out.types.begin(), out.types.end(), Type::done) == 1);
    REQUIRE(out.retries.size() == 2);
    for (const auto& retry : out.retries) {
        CHECK(retry.resumed);
        CHECK(retry.error_code == "connection_failed");
    }
    REQUIRE(stream.response());
    CHECK(stream.response()->text == "Hello, world");
    CHECK(stream.response()->tool_calls.size() == 1);
    CHECK(usage.all().size() == 1);
    CHECK_FALSE(stream.resume_position());  // done: nothing left to resume

    const auto sent = server.requests();
    REQUIRE(sent.size() == 3);
    CHECK(sent[0].method == "POST");
    const json body = json::parse(sent[0].body);
    CHECK(body["background"] == true);
    CHECK(body["stream"] == true);
    CHECK(sent[1].method == "GET");
    CHECK(sent[1].target == "/v1/responses/resp_bg?stream=true&starting_after=6");
    CHECK(sent[1].header("accept") == "text/event-stream");
    CHECK(sent[1].header("authorization") == "Bearer " + api_key);
    CHECK(sent[2].target == "/v1/responses/resp_bg?stream=true&starting_after=12");
}

TEST_CASE("a stream that is not a background one is still never retried after visible events",
          "[client][integration][background]") {
    TestServer server;
    server.enqueue(dropped_after(wire(0, 6, true, false)));
    server.enqueue(ScriptedResponse::sse(wire(0, 16, false, false), 0));
    auto stream = client_for(server).stream(ask("Hi"));
    std::string text;
    CHECK(error_code_of([&] {
              for (const auto& event : stream) {
                  if (const auto* delta = event.text_delta()) text += *delta;
              }
          }) == "connection_failed");
    CHECK(text == "Hello, ");
    CHECK(server.request_count() == 1);
}

TEST_CASE("a resume the server refuses ends the stream with its error, without the key",
          "[client][integration][background]") {
    TestServer server;
    server.enqueue(dropped_after(wire(0, 6, true)));
    server.enqueue(ScriptedResponse::json(404, R"({"error":{"message":"Response not found, key )" +
                                                   api_key +
                                                   R"(","type":"invalid_request_error"}})"));
    auto stream = client_for(server).stream(ask("Hi"));
    std::string text;
    try {
        for (const auto& event : stream) {
            if (const auto* delta = event.text_delta()) text += *delta;
        }
        FAIL("no error");
    } catch (const ullm::Error& error) {
        CHECK(error.code() == "invalid_request");
        CHECK(std::string(error.what()).find(api_key.substr(0, 10)) == std::string::npos);
    }
    CHECK(text == "Hello, ");
    CHECK(server.request_count() == 2);
}

TEST_CASE("a stream is resumed explicitly from a response id and a sequence number",
          "[client][integration][background]") {
    TestServer server;
    // The first stream sends everything, slowly; its consumer leaves after two pieces of text.
    server.enqueue(ScriptedResponse::sse(wire(0, 16), 64, 5ms));
    server.set_handler([](const RecordedRequest& request) {
        return ScriptedResponse::sse(
            wire(static_cast<std::size_t>(starting_after_of(request) + 1), 16), 0);
    });
    const auto client = client_for(server);
    ullm::ChatRequest request = ask("Say hello.");
    request.provider_options = {{"background", true}};
    std::string text;
    std::optional<ullm::StreamPosition> position;
    {
        auto first = client.stream(request);
        int pieces = 0;
        for (const auto& event : first) {
            if (const auto* delta = event.text_delta()) {
                text += *delta;
                if (++pieces == 2) break;
            }
        }
        position = first.resume_position();
    }
    REQUIRE(position);
    CHECK(position->response_id == "resp_bg");
    CHECK(position->sequence_number == 6);

    // Later, perhaps in another process: go on after the last event this one had.
    auto rest =
        client.resume_stream(request.model, position->response_id, position->sequence_number);
    for (const auto& event : rest) {
        if (const auto* delta = event.text_delta()) text += *delta;
    }
    CHECK(text == "Hello, world");

    REQUIRE(rest.response());
    CHECK(rest.response()->text == "Hello, world");
    CHECK(rest.response()->tool_calls.size() == 1);
    const auto sent = server.requests();
    REQUIRE(sent.size() == 2);
    CHECK(sent[1].method == "GET");
    CHECK(sent[1].target == "/v1/responses/resp_bg?stream=true&starting_after=6");
}

namespace {

// A finished background response with a text answer only (a conversation would run a call).
std::string answered(const std::string& text) {
    json response = response_in("completed");
    json message = message_item;
    message["content"][0]["text"] = text;
    response["output"] = json::array({message});
    return response.dump();
}

ullm::Conversation background_conversation(const ullm::Client& client) {
    return client.conversation(
        {.use_session_store = false,
         .model = "openai-responses/gpt-4.1",
         .provider_options = {{"background", true}},
         .background_poll = {.initial_interval = 5ms, .max_interval = 20ms}});
}

}  // namespace

TEST_CASE("a conversation waits for a background reply and commits only the finished one",
          "[conversation][integration][background]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, body_in("queued")));
    server.enqueue(ScriptedResponse::json(200, body_in("in_progress")));
    server.enqueue(ScriptedResponse::json(200, answered("The report is done.")));
    server.enqueue(ScriptedResponse::json(200, body_in("queued")));
    server.enqueue(ScriptedResponse::json(200, answered("Second.")));
    UsageLog usage;
    const auto client = client_for(server, &usage);
    auto conversation = background_conversation(client);

    const ullm::ConversationReply reply = conversation.send("Write a long report.");
    CHECK(reply.finished());
    CHECK(reply.text == "The report is done.");
    CHECK(reply.model_rounds == 1);
    CHECK(reply.turn_usage.output_tokens == 9);
    const auto history = conversation.history();
    REQUIRE(history.size() == 2);
    CHECK(history[1].text() == "The report is done.");
    CHECK(conversation.totals().rounds == 1);
    CHECK(conversation.totals().output_tokens == 9);
    CHECK(usage.all().size() == 1);

    // The next turn sends the whole history again (a background response is stored).
    CHECK(conversation.send("And now?").text == "Second.");
    const auto sent = server.requests();
    REQUIRE(sent.size() == 5);
    CHECK(sent[0].method == "POST");
    CHECK(sent[1].target == "/v1/responses/resp_bg");
    CHECK(sent[2].target == "/v1/responses/resp_bg");
    CHECK(sent[3].method == "POST");
    CHECK(json::parse(sent[3].body)["input"].size() == 3);
    CHECK(conversation.history().size() == 4);
}

TEST_CASE("a background reply that is cancelled or waited out commits nothing",
          "[conversation][integration][background]") {
    SECTION("cancelled on the server while the turn waits") {
        TestServer server;
        server.enqueue(ScriptedResponse::json(200, body_in("queued")));
        server.enqueue(ScriptedResponse::json(200, body_in("cancelled")));
        auto conversation = background_conversation(client_for(server));
        CHECK(error_code_of([&] { (void)conversation.send("Write."); }) == "response_cancelled");
        CHECK(conversation.history().empty());
        CHECK(conversation.totals().rounds == 1);
    }
    SECTION("already cancelled in the answer to the request") {
        TestServer server;
        server.enqueue(ScriptedResponse::json(200, body_in("cancelled")));
        auto conversation = background_conversation(client_for(server));
        CHECK(error_code_of([&] { (void)conversation.send("Write."); }) == "response_cancelled");
        CHECK(server.request_count() == 1);
        CHECK(conversation.history().empty());
    }
    SECTION("the turn is cancelled while it polls") {
        TestServer server;
        // Queued, then running for as long as the turn waits; a new request is answered.
        server.set_handler([](const RecordedRequest& request) {
            return ScriptedResponse::json(
                200, request.method == "POST" ? body_in("queued") : body_in("in_progress"));
        });
        auto conversation = background_conversation(client_for(server));
        std::stop_source stop;
        std::thread canceller([&] {
            std::this_thread::sleep_for(100ms);
            stop.request_stop();
        });
        CHECK_THROWS_AS(conversation.send("Write.", {.stop = stop.get_token()}),
                        ullm::CancelledError);
        canceller.join();
        CHECK(server.request_count() >= 2);
        CHECK(conversation.history().empty());
        // The turn's slot is free again.
        server.set_handler({});
        server.enqueue(ScriptedResponse::json(200, answered("Done.")));
        CHECK(conversation.send("Again.").text == "Done.");
    }
}

TEST_CASE("a conversation's background poll options are checked before anything is sent",
          "[conversation][integration][background]") {
    TestServer server;
    const auto client = client_for(server);
    for (const ullm::PollOptions poll :
         {ullm::PollOptions{.initial_interval = 0ms}, ullm::PollOptions{.multiplier = 0.5},
          ullm::PollOptions{.initial_interval = 50ms, .max_interval = 10ms}}) {
        CHECK(error_code_of([&] {
                  (void)client.conversation(
                      {.model = "openai-responses/gpt-4.1", .background_poll = poll});
              }) == "invalid_poll_options");
    }
    CHECK(server.request_count() == 0);
}

TEST_CASE("a streamed conversation turn over a background stream survives a drop",
          "[conversation][integration][background]") {
    TestServer server;
    // Text only: the stream is cut after the text was finished, then resumed from there.
    std::vector<json> events = stream_events();
    server.enqueue(dropped_after(wire(0, 8, true)));
    std::string rest;
    for (std::size_t i = 9; i <= 10; ++i) rest += frame(events[i]);
    json completed = events[16];
    completed["response"] = json::parse(answered("Hello, world"));
    completed["sequence_number"] = 11;
    rest += frame(completed);
    server.enqueue(ScriptedResponse::sse(rest, 0));
    auto conversation = background_conversation(client_for(server));
    std::string text;
    int resumed = 0;
    for (const auto& event : conversation.send_stream("Say hello.")) {
        if (const auto* delta = event.text_delta()) text += *delta;
        if (event.type == Type::retry && event.resumed) ++resumed;
    }
    CHECK(text == "Hello, world");
    CHECK(resumed == 1);
    const auto sent = server.requests();
    REQUIRE(sent.size() == 2);
    CHECK(starting_after_of(sent[1]) == 8);
    REQUIRE(conversation.history().size() == 2);
    CHECK(conversation.history()[1].text() == "Hello, world");
}

TEST_CASE("a background stream lost before its response id is not sent again",
          "[client][integration][background]") {
    // The server accepted the request (200 and the stream's head), then the connection broke
    // before `response.created` named the response: a second POST would start a second one.
    TestServer server;
    server.enqueue(dropped_after(": accepted\n\n"));
    server.enqueue(ScriptedResponse::sse(wire(0, 16), 0));
    ullm::ChatRequest request = ask("Write a long report.");
    request.provider_options = {{"background", true}};
    auto stream = client_for(server).stream(request);
    try {
        (void)drain(stream);
        FAIL("no error");
    } catch (const ullm::Error& error) {
        CHECK(error.retryable());
        CHECK(error.message().find("second response") != std::string::npos);
        CHECK(error.message().find(api_key) == std::string::npos);
    }
    CHECK(server.request_count() == 1);

    // A refusal before the server accepted anything is still retried as usual.
    TestServer refusing;
    refusing.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy"}})"));
    refusing.enqueue(ScriptedResponse::sse(wire(0, 16), 0));
    auto retried = client_for(refusing).stream(request);
    const Drained out = drain(retried);
    CHECK(out.text == "Hello, world");
    CHECK(out.retries.size() == 1);
    CHECK(refusing.request_count() == 2);
}

}  // namespace background_test
