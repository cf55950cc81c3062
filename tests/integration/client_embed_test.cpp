#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/detail/base64_floats.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <mutex>
#include <thread>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/test_server.hpp"

namespace client_embed_test {

using namespace std::chrono_literals;
using ullm::json;
using ullm::test::error_code_of;
using ullm::test::RecordedRequest;
using ullm::test::ScriptedResponse;
using ullm::test::TestServer;

namespace {

// The vector the test servers give `text`: its length, its first byte and a constant, so that
// a vector shows which input it belongs to.
std::vector<float> vector_of(const std::string& text) {
    return {static_cast<float>(text.size()), static_cast<float>(text.front()), 0.5f};
}

// An OpenAI `/embeddings` server: base64 or numbers as asked, the items in reverse order (by
// index), a token per input.
ScriptedResponse openai_answer(const RecordedRequest& request) {
    const json body = json::parse(request.body);
    const bool base64 = body.value("encoding_format", "float") == "base64";
    json data = json::array();
    const auto& inputs = body.at("input");
    for (std::size_t i = inputs.size(); i-- > 0;) {
        const auto vector = vector_of(inputs[i].get<std::string>());
        data.push_back({{"object", "embedding"},
                        {"index", i},
                        {"embedding", base64 ? json(ullm::detail::encode_base64_floats(vector))
                                             : json(vector)}});
    }
    return ScriptedResponse::json(
        200, json{{"object", "list"},
                  {"model", body.at("model")},
                  {"data", data},
                  {"usage", {{"prompt_tokens", inputs.size()}, {"total_tokens", inputs.size()}}}}
                 .dump());
}

std::shared_ptr<ullm::OpenAiChatProvider> openai_at(const TestServer& server,
                                                    std::size_t max_inputs = 2048) {
    return std::make_shared<ullm::OpenAiChatProvider>(
        ullm::OpenAiChatOptions{.api_key = "sk-test-secret-key",
                                .base_url = server.base_url() + "/v1",
                                .embeddings_max_inputs = max_inputs});
}

struct Reports {
    std::mutex mutex;
    std::vector<ullm::UsageReport> seen;
    std::vector<ullm::UsageReport> all() {
        std::lock_guard lock(mutex);
        return seen;
    }
};

ullm::Client client_with(std::shared_ptr<const ullm::Provider> provider,
                         std::shared_ptr<Reports> reports = nullptr) {
    ullm::RetryPolicy retry;
    retry.initial_backoff = 10ms;
    ullm::ClientOptions options{.retry = retry, .providers = {std::move(provider)}};
    if (reports) {
        options.on_usage = [reports](const ullm::UsageReport& report) {
            std::lock_guard lock(reports->mutex);
            reports->seen.push_back(report);
        };
    }
    return ullm::Client(std::move(options));
}

std::vector<std::string> numbered(std::size_t count) {
    std::vector<std::string> inputs;
    for (std::size_t i = 0; i < count; ++i) inputs.push_back("input " + std::to_string(i));
    return inputs;
}

}  // namespace

TEST_CASE("embed() splits a long call within the provider's limit and keeps input order",
          "[embeddings][integration]") {
    TestServer server;
    server.set_handler(openai_answer);
    auto reports = std::make_shared<Reports>();
    const auto client = client_with(openai_at(server, 3), reports);
    const auto inputs = numbered(7);
    const auto response = client.embed({.model = "text-embedding-3-small", .inputs = inputs});

    REQUIRE(response.vectors.size() == 7);
    for (std::size_t i = 0; i < inputs.size(); ++i)
        CHECK(response.vectors[i] == vector_of(inputs[i]));
    CHECK(response.requests == 3);
    CHECK(response.dimensions() == 3);
    CHECK(response.model == "text-embedding-3-small");
    CHECK(response.usage.input_tokens == 7);
    REQUIRE(response.usage.cost_usd);
    CHECK(*response.usage.cost_usd == Approx(7 * 0.02 / 1e6));

    const auto sent = server.requests();
    REQUIRE(sent.size() == 3);
    CHECK(sent[0].target == "/v1/embeddings");
    CHECK(sent[0].header("authorization") == "Bearer sk-test-secret-key");
    CHECK(json::parse(sent[0].body)["input"] == json{"input 0", "input 1", "input 2"});
    CHECK(json::parse(sent[2].body)["input"] == json::array({"input 6"}));
    CHECK(json::parse(sent[0].body)["encoding_format"] == "base64");

    // Each request is told of as it finishes, priced, as an embedding.
    const auto told = reports->all();
    REQUIRE(told.size() == 3);
    CHECK(told[0].usage.input_tokens == 3);
    CHECK(told[2].usage.input_tokens == 1);
    CHECK(told[0].embedding);
    CHECK_FALSE(told[0].streamed);
    CHECK(told[0].provider == "openai");
    CHECK(told[0].model == "text-embedding-3-small");
    REQUIRE(told[0].usage.cost_usd);
    CHECK(*told[0].usage.cost_usd == Approx(3 * 0.02 / 1e6));
}

TEST_CASE("OpenAI's limit of 2,048 inputs a request is the default", "[embeddings][integration]") {
    TestServer server;
    server.set_handler(openai_answer);
    const auto response = client_with(openai_at(server))
                              .embed({.model = "text-embedding-3-large", .inputs = numbered(2049)});
    CHECK(response.vectors.size() == 2049);
    CHECK(response.vectors.back() == vector_of("input 2048"));
    const auto sent = server.requests();
    REQUIRE(sent.size() == 2);
    CHECK(json::parse(sent[0].body)["input"].size() == 2048);
    CHECK(json::parse(sent[1].body)["input"].size() == 1);
    REQUIRE(response.usage.cost_usd);
    CHECK(*response.usage.cost_usd == Approx(2049 * 0.13 / 1e6));
}

TEST_CASE("embed() retries 429 and 5xx as completions do, and a cut body",
          "[embeddings][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        429, R"({"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}})",
        {{"retry-after-ms", "50"}}));
    server.enqueue(ScriptedResponse::json(503, R"({"error":{"message":"busy"}})"));
    server.enqueue({.status = 200,
                    .headers = {{"Content-Type", "application/json"}},
                    .body = R"({"object":"list","data":[{"index":0,"embedding":[1,2]}]})",
                    .truncate_body_at = 20});
    server.set_handler(openai_answer);
    ullm::RetryPolicy retry;
    retry.initial_backoff = 10ms;
    retry.max_attempts = 4;
    const auto client = ullm::Client({.retry = retry, .providers = {openai_at(server)}});
    const auto response = client.embed({.model = "text-embedding-3-small", .inputs = {"hello"}});
    CHECK(response.vectors == std::vector<std::vector<float>>{vector_of("hello")});
    CHECK(server.request_count() == 4);
}

TEST_CASE("a request refused as invalid is not retried, and nothing half-filled is returned",
          "[embeddings][integration]") {
    TestServer server;
    server.set_handler([](const RecordedRequest& request) {
        const json body = json::parse(request.body);
        if (body["input"][0] == "input 2") {
            return ScriptedResponse::json(
                400, R"({"error":{"message":"bad input from sk-test-secret-key"}})");
        }
        return openai_answer(request);
    });
    auto reports = std::make_shared<Reports>();
    const auto client = client_with(openai_at(server, 2), reports);
    std::string message;
    try {
        (void)client.embed({.model = "text-embedding-3-small", .inputs = numbered(4)});
    } catch (const ullm::Error& error) {
        CHECK(error.code() == "invalid_request");
        message = error.what();
    }
    CHECK(server.request_count() == 2);
    CHECK(message.find("sk-test-secret-key") == std::string::npos);
    CHECK_FALSE(message.empty());
    // The first request's usage was spent and told of.
    CHECK(reports->all().size() == 1);
}

TEST_CASE("vectors of another length in a later request fail the call",
          "[embeddings][integration]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(200, R"({"data":[{"index":0,"embedding":[1,2,3]}]})"));
    server.enqueue(ScriptedResponse::json(200, R"({"data":[{"index":0,"embedding":[1,2]}]})"));
    CHECK(error_code_of([&] {
              (void)client_with(openai_at(server, 1))
                  .embed({.model = "text-embedding-3-small", .inputs = {"a", "b"}});
          }) == "invalid_provider_response");
    CHECK(server.request_count() == 2);
}

TEST_CASE("a cancelled embedding call stops at once", "[embeddings][integration]") {
    TestServer server;
    server.enqueue({.status = 200, .body = "{}", .delay_before_headers = 5s});
    std::stop_source stop;
    std::thread canceller([&] {
        std::this_thread::sleep_for(100ms);
        stop.request_stop();
    });
    const auto started = std::chrono::steady_clock::now();
    CHECK(error_code_of([&] {
              (void)client_with(openai_at(server))
                  .embed({.model = "text-embedding-3-small", .inputs = {"a"}}, stop.get_token());
          }) == "cancelled");
    canceller.join();
    CHECK(std::chrono::steady_clock::now() - started < 3s);
    // A token stopped before the call sends nothing.
    TestServer idle;
    CHECK(error_code_of([&] {
              (void)client_with(openai_at(idle))
                  .embed({.model = "text-embedding-3-small", .inputs = {"a"}}, stop.get_token());
          }) == "cancelled");
    CHECK(idle.request_count() == 0);
}

TEST_CASE("bad embedding input is refused before anything is sent", "[embeddings][integration]") {
    TestServer server;
    server.set_handler(openai_answer);
    const auto client = client_with(openai_at(server));
    const auto code = [&](ullm::EmbeddingRequest request) {
        return error_code_of([&] { (void)client.embed(std::move(request)); });
    };
    CHECK(code({.model = "text-embedding-3-small"}) == "invalid_embedding_input");
    CHECK(code({.model = "text-embedding-3-small", .inputs = {"a", ""}}) ==
          "invalid_embedding_input");
    CHECK(code({.model = "text-embedding-3-small", .inputs = {"a", "\xff\xfe"}}) ==
          "invalid_embedding_input");
    CHECK(code({.model = "text-embedding-3-small", .inputs = {"a"}, .dimensions = 0}) ==
          "invalid_embedding_dimensions");
    CHECK(code({.model = "text-embedding-3-small", .inputs = {"a"}, .dimensions = -3}) ==
          "invalid_embedding_dimensions");
    CHECK(code({.model = "text-embedding-3-small",
                .inputs = {"a"},
                .task = ullm::EmbeddingTask::clustering}) == "unsupported_option");
    CHECK(code({.model = "text-embedding-ada-002", .inputs = {"a"}, .dimensions = 64}) ==
          "unsupported_option");
    CHECK(code({.model = "mystery-embedder", .inputs = {"a"}}) == "unknown_model_route");
    CHECK(server.request_count() == 0);

    // No embeddings API: Anthropic, and an offline provider.
    const auto anthropic = client_with(std::make_shared<ullm::AnthropicProvider>(
        ullm::AnthropicOptions{.api_key = "sk-ant-test", .base_url = server.base_url()}));
    CHECK(error_code_of([&] {
              (void)anthropic.embed({.model = "claude-sonnet-4-5", .inputs = {"a"}});
          }) == "unsupported_option");
    const auto scripted = client_with(std::make_shared<ullm::ScriptedProvider>());
    CHECK(error_code_of([&] {
              (void)scripted.embed({.model = "scripted/any", .inputs = {"a"}});
          }) == "unsupported_option");
    CHECK(server.request_count() == 0);
}

TEST_CASE("budgets apply to embedding calls as to completions", "[embeddings][integration]") {
    TestServer server;
    server.set_handler(openai_answer);
    auto reports = std::make_shared<Reports>();
    const auto client = client_with(openai_at(server), reports);
    const ullm::EmbeddingRequest request{.model = "text-embedding-3-small",
                                         .inputs = {std::string(4000, 'x')}};
    // 1,000 estimated tokens at $0.02 per million: $0.00002.
    CHECK(error_code_of([&] { (void)client.embed(request, {}, {.usd = 0.00001}); }) ==
          "budget_exceeded");
    CHECK(server.request_count() == 0);

    const auto skipped =
        client.embed(request, {}, {.usd = 0.00001, .action = ullm::BudgetAction::skip});
    CHECK(skipped.budget_skipped);
    CHECK(skipped.vectors.empty());
    CHECK(skipped.requests == 0);
    CHECK(server.request_count() == 0);
    REQUIRE(reports->all().size() == 1);
    CHECK(reports->all()[0].budget_skipped);
    CHECK(reports->all()[0].embedding);

    int warned = 0;
    const auto sent = client.embed(request, {},
                                   {.usd = 0.00001,
                                    .action = ullm::BudgetAction::warn,
                                    .on_warning = [&](const ullm::BudgetWarning&) { ++warned; }});
    CHECK(warned == 1);
    CHECK(sent.vectors.size() == 1);
    CHECK(client.embed(request, {}, {.usd = 0.001}).vectors.size() == 1);
    CHECK(server.request_count() == 2);

    // A model without a price cannot be held to a budget.
    CHECK(error_code_of([&] {
              (void)client.embed({.model = "openai/custom-embedder", .inputs = {"a"}}, {},
                                 {.usd = 1.0});
          }) == "unknown_model_pricing");
}

TEST_CASE("Gemini: one input through embedContent, 250 through three batchEmbedContents",
          "[embeddings][integration][gemini]") {
    TestServer server;
    server.set_handler([](const RecordedRequest& request) {
        const json body = json::parse(request.body);
        const auto values = [](const json& entry) {
            return json{
                {"values", vector_of(entry["content"]["parts"][0]["text"].get<std::string>())}};
        };
        if (request.target.ends_with(":embedContent")) {
            return ScriptedResponse::json(200, json{{"embedding", values(body)}}.dump());
        }
        json embeddings = json::array();
        for (const auto& entry : body["requests"]) embeddings.push_back(values(entry));
        // A token per input, as current answers count them.
        return ScriptedResponse::json(
            200, json{{"embeddings", embeddings},
                      {"usageMetadata", {{"promptTokenCount", body["requests"].size()}}}}
                     .dump());
    });
    auto reports = std::make_shared<Reports>();
    const auto client =
        client_with(std::make_shared<ullm::GeminiProvider>(ullm::GeminiOptions{
                        .api_key = "AIza-test-key", .base_url = server.base_url() + "/v1beta"}),
                    reports);

    const auto one = client.embed({.model = "gemini-embedding-001",
                                   .inputs = {"Hello"},
                                   .dimensions = 3,
                                   .task = ullm::EmbeddingTask::retrieval_query});
    CHECK(one.vectors == std::vector<std::vector<float>>{vector_of("Hello")});
    auto sent = server.requests();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].target == "/v1beta/models/gemini-embedding-001:embedContent");
    CHECK(sent[0].header("x-goog-api-key") == "AIza-test-key");
    CHECK(json::parse(sent[0].body)["taskType"] == "RETRIEVAL_QUERY");
    // An answer without usageMetadata: zero usage, no cost.
    CHECK(one.usage.input_tokens == 0);
    CHECK_FALSE(one.usage.cost_usd);

    const auto inputs = numbered(250);
    const auto many = client.embed({.model = "gemini/gemini-embedding-001", .inputs = inputs});
    REQUIRE(many.vectors.size() == 250);
    for (std::size_t i = 0; i < inputs.size(); ++i) CHECK(many.vectors[i] == vector_of(inputs[i]));
    CHECK(many.requests == 3);
    CHECK(many.usage.input_tokens == 250);
    REQUIRE(many.usage.cost_usd);
    CHECK(*many.usage.cost_usd == Approx(250 * 0.15 / 1e6));
    sent = server.requests();
    REQUIRE(sent.size() == 4);
    CHECK(sent[1].target == "/v1beta/models/gemini-embedding-001:batchEmbedContents");
    CHECK(json::parse(sent[1].body)["requests"].size() == 100);
    CHECK(json::parse(sent[3].body)["requests"].size() == 50);
    CHECK(reports->all().size() == 4);
}

TEST_CASE("Gemini embedding errors are mapped and retried", "[embeddings][integration][gemini]") {
    TestServer server;
    server.enqueue(ScriptedResponse::json(
        503, R"({"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}})"));
    server.enqueue(ScriptedResponse::json(200, R"({"embedding":{"values":[0.5,0.25]}})"));
    server.enqueue(ScriptedResponse::json(
        400,
        R"({"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT",)"
        R"("details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}})"));
    const auto client = client_with(std::make_shared<ullm::GeminiProvider>(
        ullm::GeminiOptions{.api_key = "AIza-test-key", .base_url = server.base_url()}));
    CHECK(client.embed({.model = "gemini-embedding-001", .inputs = {"a"}}).vectors ==
          std::vector<std::vector<float>>{{0.5f, 0.25f}});
    CHECK(error_code_of([&] {
              (void)client.embed({.model = "gemini-embedding-001", .inputs = {"a"}});
          }) == "authentication_failed");
    CHECK(server.request_count() == 3);
}

TEST_CASE("Ollama's native /api/embed, chosen by an option of the compatible provider",
          "[embeddings][integration]") {
    TestServer server;
    server.set_handler([](const RecordedRequest& request) {
        const json body = json::parse(request.body);
        json embeddings = json::array();
        for (const auto& input : body["input"]) embeddings.push_back(vector_of(input));
        return ScriptedResponse::json(200, json{{"model", body["model"]},
                                                {"embeddings", embeddings},
                                                {"prompt_eval_count", 5 * body["input"].size()}}
                                               .dump());
    });
    const auto client = client_with(std::make_shared<ullm::OpenAiChatProvider>(
        ullm::OpenAiChatOptions{.base_url = server.base_url() + "/v1",
                                .provider_name = "ollama",
                                .embeddings_api = ullm::OpenAiEmbeddingsApi::ollama}));
    const auto response =
        client.embed({.model = "ollama/all-minilm", .inputs = {"sky", "grass"}, .dimensions = 3});
    CHECK(response.vectors ==
          std::vector<std::vector<float>>{vector_of("sky"), vector_of("grass")});
    CHECK(response.usage.input_tokens == 10);
    // Local models are free.
    REQUIRE(response.usage.cost_usd);
    CHECK(*response.usage.cost_usd == 0.0);
    const auto sent = server.requests();
    REQUIRE(sent.size() == 1);
    CHECK(sent[0].target == "/api/embed");
    CHECK(json::parse(sent[0].body) == json{{"model", "all-minilm"},
                                            {"input", {"sky", "grass"}},
                                            {"truncate", false},
                                            {"dimensions", 3}});
    CHECK_FALSE(sent[0].has_header("authorization"));
}

}  // namespace client_embed_test
