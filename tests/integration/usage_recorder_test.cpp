// UsageRecorder fed by a real client: each record's `started_at` is when the request began,
// so a server that waits before answering shows up as the time between start and finish.

#include <ullm/client/client.hpp>
#include <ullm/client/usage_recorder.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/store/sqlite_usage_ledger.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/chat_completion_bodies.hpp"
#include "support/temp_dir.hpp"
#include "support/test_server.hpp"

namespace usage_recorder_test {

using namespace std::chrono_literals;
using ullm::test::chat_completion_reply;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

// How long the server waits before the status line of each delayed answer.
constexpr auto server_delay = 150ms;

// A client of `server` whose usage goes to a SQLite ledger in a temporary directory.
struct RecordedClient {
    explicit RecordedClient(const TestServer& server)
        : ledger(ullm::SqliteUsageLedger::open((dir / "usage.db").string())),
          recorder(ullm::UsageRecorder::make(ledger, {.tenant = "acme", .session_id = ""})) {
        ullm::ClientOptions options;
        options.retry.initial_backoff = 10ms;
        options.providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
            .api_key = "sk-test-secret", .base_url = server.base_url() + "/v1"})};
        options.on_usage = recorder->callback();
        client.emplace(options);
    }

    // Every record the ledger holds, in order of `started_at`.
    std::vector<ullm::UsageRecord> records() const {
        std::vector<ullm::UsageRecord> all;
        ledger->for_each({}, [&](const ullm::UsageRecord& record) { all.push_back(record); });
        return all;
    }

    ullm::test::TempDir dir{"usage-recorder"};
    std::shared_ptr<ullm::SqliteUsageLedger> ledger;
    std::shared_ptr<ullm::UsageRecorder> recorder;
    std::optional<ullm::Client> client;
};

ullm::ChatRequest ask() {
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    request.messages = {ullm::Message::user("Hi")};
    return request;
}

ScriptedResponse delayed(ScriptedResponse response) {
    response.delay_before_headers = server_delay;
    return response;
}

ScriptedResponse delayed_stream() {
    const std::string wire =
        R"(data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"finish_reason":null}]})"
        "\n\n"
        R"(data: {"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"
        "\n\n"
        R"(data: {"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}})"
        "\n\n"
        "data: [DONE]\n\n";
    return delayed(ScriptedResponse::sse(wire, 0));
}

// The one record of `client`'s ledger, checked to span at least the server's delay.
void check_one_record_spans_the_delay(const RecordedClient& client, bool streamed) {
    CHECK(client.recorder->failures() == 0);
    const auto records = client.records();
    REQUIRE(records.size() == 1);
    const ullm::UsageRecord& record = records[0];
    CHECK(record.tenant == "acme");
    CHECK(record.model == "gpt-4o");
    CHECK(record.streamed == streamed);
    CHECK(record.usage.input_tokens == 10);
    CHECK(record.started_at + server_delay <= record.finished_at);
}

}  // namespace

TEST_CASE("a recorded blocking call starts before the server's delay", "[usage][integration]") {
    TestServer server;
    server.enqueue(delayed(chat_completion_reply("Hello")));
    RecordedClient recorded(server);
    CHECK(recorded.client->complete(ask()).text == "Hello");
    check_one_record_spans_the_delay(recorded, false);
}

TEST_CASE("a recorded retried call starts with its first attempt", "[usage][integration]") {
    TestServer server;
    // The first attempt waits, then fails with a status that is retried; the second answers at
    // once: the record still spans the first attempt's wait.
    server.enqueue(delayed(ScriptedResponse::json(503, R"({"error":{"message":"busy"}})")));
    server.enqueue(chat_completion_reply("Hello"));
    RecordedClient recorded(server);
    CHECK(recorded.client->complete(ask()).text == "Hello");
    CHECK(server.request_count() == 2);
    check_one_record_spans_the_delay(recorded, false);
}

TEST_CASE("a recorded async call starts before the server's delay", "[usage][integration]") {
    TestServer server;
    server.enqueue(delayed(chat_completion_reply("Hello")));
    RecordedClient recorded(server);
    auto future = recorded.client->complete_async(ask());
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    CHECK(future.get().text == "Hello");
    check_one_record_spans_the_delay(recorded, false);
}

TEST_CASE("a recorded stream starts when it is opened", "[usage][integration]") {
    TestServer server;
    server.enqueue(delayed_stream());
    RecordedClient recorded(server);
    std::string text;
    for (const auto& event : recorded.client->stream(ask())) {
        if (const auto* delta = event.text_delta()) text += *delta;
    }
    CHECK(text == "Hello");
    check_one_record_spans_the_delay(recorded, true);
}

TEST_CASE("a recorded async stream starts when it is opened", "[usage][integration]") {
    TestServer server;
    server.enqueue(delayed_stream());
    RecordedClient recorded(server);
    std::mutex mutex;
    std::condition_variable changed;
    std::optional<bool> succeeded;
    const auto handle = recorded.client->stream_async(
        ask(), {.on_event = {}, .on_done = [&](ullm::Result<ullm::ChatResponse> result) {
                    const std::lock_guard lock(mutex);
                    succeeded = static_cast<bool>(result);
                    changed.notify_all();
                }});
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, 10s, [&] { return succeeded.has_value(); }));
    CHECK(*succeeded);
    lock.unlock();
    check_one_record_spans_the_delay(recorded, true);
}

}  // namespace usage_recorder_test
