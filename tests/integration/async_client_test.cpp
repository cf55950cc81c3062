// The async face of Client (complete_async, complete_many) against the in-process server,
// through the real libcurl transport.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/scripted_provider.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/chat_completion_bodies.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::chat_completion_reply;
using ullm::test::error_code_of;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

ullm::ClientOptions options_for(const TestServer& server) {
    ullm::ClientOptions options;
    options.retry.initial_backoff = 10ms;
    options.providers = {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
        .api_key = "sk-test-secret", .base_url = server.base_url() + "/v1"})};
    return options;
}

ullm::ChatRequest ask(std::string text = "Hi") {
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    request.messages = {ullm::Message::user(std::move(text))};
    return request;
}

// Answers each request with the text of its last message, after `delay`.
ullm::test::RequestHandler echo(std::chrono::milliseconds delay = {}) {
    return [delay](const ullm::test::RecordedRequest& request) {
        const json body = json::parse(request.body);
        ScriptedResponse reply =
            chat_completion_reply("echo: " + body["messages"].back()["content"].get<std::string>());
        reply.delay_before_headers = delay;
        return reply;
    };
}

// A test executor: one thread that runs what is posted, in order.
class QueueExecutor final : public ullm::Executor {
public:
    QueueExecutor() : thread_([this] { run(); }) {}
    ~QueueExecutor() override {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }
    void post(std::function<void()> work) noexcept override {
        {
            std::lock_guard lock(mutex_);
            queue_.push_back(std::move(work));
        }
        changed_.notify_all();
    }
    std::thread::id id() const { return thread_.get_id(); }

private:
    void run() {
        std::unique_lock lock(mutex_);
        for (;;) {
            changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;
            auto work = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            work();
            lock.lock();
        }
    }
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::function<void()>> queue_;
    bool stopping_ = false;
    std::thread thread_;
};

// Collects callback results; waits for `count` of them.
struct Collected {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<ullm::Result<ullm::ChatResponse>> results;
    std::vector<std::thread::id> threads;

    auto handler() {
        return [this](ullm::Result<ullm::ChatResponse> result) {
            {
                std::lock_guard lock(mutex);
                results.push_back(std::move(result));
                threads.push_back(std::this_thread::get_id());
            }
            changed.notify_all();
        };
    }
    bool wait(std::size_t count, std::chrono::milliseconds timeout = 10s) {
        std::unique_lock lock(mutex);
        return changed.wait_for(lock, timeout, [&] { return results.size() >= count; });
    }
};

}  // namespace

TEST_CASE("complete_async returns a future of the response", "[async][integration]") {
    TestServer server;
    server.set_handler(echo());
    std::atomic<int> reported{0};
    ullm::ClientOptions options = options_for(server);
    options.on_usage = [&](const ullm::UsageReport& report) {
        if (!report.streamed && report.usage.input_tokens == 10) ++reported;
    };
    const ullm::Client client(options);
    auto future = client.complete_async(ask("one"));
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    const ullm::ChatResponse response = future.get();
    CHECK(response.text == "echo: one");
    CHECK(response.usage.output_tokens == 5);
    CHECK(reported == 1);
    CHECK(json::parse(server.requests().at(0).body)["model"] == "gpt-4o");
}

TEST_CASE("many async calls share the loop and each gets its own answer", "[async][integration]") {
    TestServer server;
    server.set_handler(echo(20ms));
    const ullm::Client client(options_for(server));
    std::vector<std::future<ullm::ChatResponse>> futures;
    for (int i = 0; i < 40; ++i) futures.push_back(client.complete_async(ask(std::to_string(i))));
    for (int i = 0; i < 40; ++i) {
        REQUIRE(futures[static_cast<std::size_t>(i)].wait_for(20s) == std::future_status::ready);
        CHECK(futures[static_cast<std::size_t>(i)].get().text == "echo: " + std::to_string(i));
    }
    CHECK(server.request_count() == 40);
}

TEST_CASE("an async callback runs once, on the executor it was given", "[async][integration]") {
    TestServer server;
    server.set_handler(echo());
    const ullm::Client client(options_for(server));
    auto executor = std::make_shared<QueueExecutor>();
    Collected collected;
    client.complete_async(ask("x"), collected.handler(), {.executor = executor});
    REQUIRE(collected.wait(1));
    CHECK(collected.results.at(0).value().text == "echo: x");
    CHECK(collected.threads.at(0) == executor->id());

    // Without an executor it runs on the client's callback thread: never the caller's.
    Collected plain;
    client.complete_async(ask("y"), plain.handler());
    REQUIRE(plain.wait(1));
    CHECK(plain.threads.at(0) != std::this_thread::get_id());
    CHECK(plain.threads.at(0) != executor->id());
}

TEST_CASE("errors of an async call come through its result, never thrown at the caller",
          "[async][integration]") {
    TestServer server;
    const ullm::Client client(options_for(server));

    SECTION("a model no provider serves") {
        auto request = ask();
        request.model = "nowhere/model";
        auto future = client.complete_async(request);
        CHECK(error_code_of([&] { (void)future.get(); }) == "unknown_model_route");
    }
    SECTION("an invalid option, through the callback, after complete_async returned") {
        auto request = ask();
        request.max_tokens = 0;
        Collected collected;
        std::atomic<bool> returned{false};
        std::atomic<bool> early{false};
        client.complete_async(request, [&](ullm::Result<ullm::ChatResponse> result) {
            early = !returned.load();
            collected.handler()(std::move(result));
        });
        returned = true;
        REQUIRE(collected.wait(1));
        CHECK_FALSE(early.load());
        CHECK_FALSE(collected.results.at(0).has_value());
        CHECK(collected.results.at(0).error_code() == "invalid_max_tokens");
    }
    SECTION("an authentication failure is not retried") {
        server.enqueue(ScriptedResponse::json(
            401, R"({"error":{"message":"Incorrect API key","type":"invalid_request_error"}})"));
        auto future = client.complete_async(ask());
        CHECK(error_code_of([&] { (void)future.get(); }) == "authentication_failed");
        CHECK(server.request_count() == 1);
    }
    CHECK(server.request_count() <= 1);
}

TEST_CASE("an async call retries on a timer and the secret never reaches its error",
          "[async][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy sk-test-secret"}})"));
    server.enqueue(chat_completion_reply("after a retry"));
    const ullm::Client client(options_for(server));
    auto future = client.complete_async(ask());
    CHECK(future.get().text == "after a retry");
    CHECK(server.request_count() == 2);

    ullm::ClientOptions once = options_for(server);
    once.retry.max_attempts = 1;
    server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy sk-test-secret"}})"));
    const ullm::Client no_retries(once);
    auto failed = no_retries.complete_async(ask());
    const auto what = [](const auto& call) -> std::string {
        try {
            call();
        } catch (const ullm::Error& error) {
            return error.what();
        }
        return "no error";
    };
    const std::string async_error = what([&] { (void)failed.get(); });
    CHECK(async_error.find("[ullm.provider_error]") == 0);
    CHECK(async_error.find("sk-test-secret") == std::string::npos);
    // The same error as the blocking call's.
    server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy sk-test-secret"}})"));
    CHECK(what([&] { (void)no_retries.complete(ask()); }) == async_error);
}

TEST_CASE("cancelling an async call completes it promptly, even with a silent server",
          "[async][integration]") {
    TestServer server;
    const ullm::Client client(options_for(server));

    SECTION("waiting for the headers") {
        ScriptedResponse silent;
        silent.stall = true;
        silent.delay_before_headers = 30s;
        server.enqueue(silent);
        std::stop_source stop;
        auto future = client.complete_async(ask(), {.stop = stop.get_token()});
        REQUIRE(server.wait_for_requests(1, 10s));
        stop.request_stop();
        REQUIRE(future.wait_for(10s) == std::future_status::ready);
        CHECK(error_code_of([&] { (void)future.get(); }) == "cancelled");
        CHECK(server.wait_for_client_aborts(1, 10s));
    }
    SECTION("waiting for a retry") {
        server.enqueue(ScriptedResponse::json(429, R"({"error":{"message":"slow down"}})",
                                              {{"Retry-After", "30"}}));
        std::stop_source stop;
        auto future = client.complete_async(ask(), {.stop = stop.get_token()});
        REQUIRE(server.wait_for_requests(1, 10s));
        std::this_thread::sleep_for(50ms);  // the answer arrives, the retry waits
        stop.request_stop();
        REQUIRE(future.wait_for(10s) == std::future_status::ready);
        CHECK(error_code_of([&] { (void)future.get(); }) == "cancelled");
        CHECK(server.request_count() == 1);
    }
    SECTION("already cancelled: nothing is sent") {
        std::stop_source stop;
        stop.request_stop();
        auto future = client.complete_async(ask(), {.stop = stop.get_token()});
        CHECK(error_code_of([&] { (void)future.get(); }) == "cancelled");
        CHECK(server.request_count() == 0);
    }
}

TEST_CASE("a callback that throws fails nothing else", "[async][integration]") {
    TestServer server;
    server.set_handler(echo());
    const ullm::Client client(options_for(server));
    Collected collected;
    for (int i = 0; i < 10; ++i) {
        if (i % 2 == 0) {
            client.complete_async(ask(std::to_string(i)), [](ullm::Result<ullm::ChatResponse>) {
                throw std::logic_error("boom");
            });
        } else {
            client.complete_async(ask(std::to_string(i)), collected.handler());
        }
    }
    REQUIRE(collected.wait(5));
    for (const auto& result : collected.results) CHECK(result.has_value());
    CHECK(client.complete_async(ask("after")).get().text == "echo: after");
}

TEST_CASE("when the last copy of a client goes, its calls in flight complete cancelled",
          "[async][integration]") {
    TestServer server;
    ScriptedResponse silent;
    silent.stall = true;
    silent.delay_before_headers = 30s;
    server.set_handler([silent](const ullm::test::RecordedRequest&) { return silent; });
    std::vector<std::future<ullm::ChatResponse>> futures;
    {
        const ullm::Client client(options_for(server));
        const ullm::Client copy = client;  // copies share the client: both must go
        for (int i = 0; i < 20; ++i) futures.push_back(copy.complete_async(ask()));
        REQUIRE(server.wait_for_requests(20, 10s));
    }
    for (auto& future : futures) {
        REQUIRE(future.wait_for(10s) == std::future_status::ready);
        CHECK(error_code_of([&] { (void)future.get(); }) == "cancelled");
    }
}

TEST_CASE("the last copy of a client may go inside a callback", "[async][integration]") {
    TestServer server;
    server.set_handler(echo());
    auto holder = std::make_shared<std::optional<ullm::Client>>(ullm::Client(options_for(server)));
    std::promise<std::string> seen;
    (*holder)->complete_async(ask("bye"), [holder, &seen](ullm::Result<ullm::ChatResponse> result) {
        holder->reset();  // the client's last copy
        seen.set_value(result.value().text);
    });
    auto future = seen.get_future();
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    CHECK(future.get() == "echo: bye");
}

TEST_CASE("an async call applies its budget before any I/O", "[async][integration]") {
    TestServer server;
    const ullm::Client client(options_for(server));
    auto request = ask();
    request.max_tokens = 100000;
    auto skipped = client.complete_async(
        request, {.budget = ullm::CallBudget{.usd = 0.0001, .action = ullm::BudgetAction::skip}});
    CHECK(skipped.get().raw_finish_reason == "budget_exceeded");
    auto refused = client.complete_async(
        request,
        {.budget = ullm::CallBudget{.usd = 0.0001, .action = ullm::BudgetAction::throw_error}});
    CHECK(error_code_of([&] { (void)refused.get(); }) == "budget_exceeded");
    CHECK(server.request_count() == 0);
}

TEST_CASE("an offline provider and a transport without start serve async calls too",
          "[async][integration]") {
    SECTION("offline") {
        auto scripted = std::make_shared<ullm::ScriptedProvider>();
        scripted->push_text("scripted answer");
        const ullm::Client client({.providers = {scripted}});
        auto request = ask();
        request.model = "scripted/any";
        CHECK(client.complete_async(request).get().text == "scripted answer");
    }
    SECTION("a custom transport") {
        struct Canned final : ullm::Transport {
            ullm::HttpResponse send(const ullm::HttpRequest&, std::stop_token) override {
                ullm::HttpResponse response;
                response.status = 200;
                response.headers = {{"content-type", "application/json"}};
                response.body =
                    ullm::test::chat_completion_body({{"role", "assistant"}, {"content", "canned"}})
                        .dump();
                return response;
            }
            std::unique_ptr<ullm::HttpStream> open_stream(const ullm::HttpRequest&,
                                                          std::stop_token) override {
                throw ullm::TransportError(ullm::ErrorCode::transport_error, "no streams", false);
            }
        };
        ullm::ClientOptions options;
        options.transport = std::make_shared<Canned>();
        options.providers = {std::make_shared<ullm::OpenAiChatProvider>(
            ullm::OpenAiChatOptions{.api_key = "k", .base_url = "http://127.0.0.1:9/v1"})};
        CHECK(ullm::Client(options).complete_async(ask()).get().text == "canned");
    }
}

TEST_CASE("complete_many keeps its limit and returns each result in request order",
          "[async][integration]") {
    TestServer server;
    std::atomic<int> running{0};
    std::atomic<int> peak{0};
    server.set_handler([&](const ullm::test::RecordedRequest& request) {
        const int now = ++running;
        int seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(15ms);
        --running;
        return echo()(request);
    });
    const ullm::Client client(options_for(server));
    std::vector<ullm::ChatRequest> requests;
    for (int i = 0; i < 30; ++i) requests.push_back(ask(std::to_string(i)));
    requests[7].model = "nowhere/model";  // fails alone
    const auto results = client.complete_many(requests, {.max_in_flight = 4});
    REQUIRE(results.size() == 30);
    for (int i = 0; i < 30; ++i) {
        const auto& result = results[static_cast<std::size_t>(i)];
        if (i == 7) {
            CHECK(result.error_code() == "unknown_model_route");
        } else {
            REQUIRE(result.has_value());
            CHECK(result.value().text == "echo: " + std::to_string(i));
        }
    }
    CHECK(peak.load() <= 4);
    CHECK(peak.load() >= 2);
    CHECK(server.request_count() == 29);

    CHECK(error_code_of([&] { (void)client.complete_many(requests, {.max_in_flight = 0}); }) ==
          "invalid_batch_options");
    CHECK(client.complete_many({}, {}).empty());
}

TEST_CASE("complete_many stops what has not finished when asked", "[async][integration]") {
    TestServer server;
    server.set_handler(echo(10s));
    const ullm::Client client(options_for(server));
    std::stop_source stop;
    std::thread stopper([&] {
        (void)server.wait_for_requests(2, 10s);
        stop.request_stop();
    });
    std::vector<ullm::ChatRequest> requests(6, ask());
    const auto results =
        client.complete_many(requests, {.max_in_flight = 2, .stop = stop.get_token()});
    stopper.join();
    REQUIRE(results.size() == 6);
    for (const auto& result : results) CHECK(result.error_code() == "cancelled");
    CHECK(server.request_count() == 2);
}
