#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <cstdlib>
#include <thread>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace client_test {

using namespace std::chrono_literals;
using ullm::json;

using ullm::test::error_code_of;

namespace {

ullm::ChatRequest ask(std::string model, std::string text = "Hello") {
    ullm::ChatRequest request;
    request.model = std::move(model);
    request.messages = {ullm::Message::user(std::move(text))};
    return request;
}

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
public:
    ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
        for (const auto& [name, value] : values) {
            const char* old = std::getenv(name);
            saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
            if (value) {
                ::setenv(name, value, 1);
            } else {
                ::unsetenv(name);
            }
        }
    }
    ~ScopedEnv() {
        for (const auto& [name, value] : saved_) {
            if (value) {
                ::setenv(name.c_str(), value->c_str(), 1);
            } else {
                ::unsetenv(name.c_str());
            }
        }
    }

private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("models route by explicit provider prefix or by name", "[client]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>("scripted");
    auto openai =
        std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{.api_key = "k"});
    const ullm::Client client(
        {.default_model = "scripted/default-model", .providers = {scripted, openai}});

    CHECK(client.route("scripted/my-model").provider == scripted);
    CHECK(client.route("scripted/my-model").model == "my-model");
    CHECK(client.route("openai/gpt-4o").model == "gpt-4o");
    for (const auto* model : {"gpt-4o", "o1-mini", "o3", "o4-mini", "chatgpt-4o-latest"}) {
        CHECK(client.route(model).provider == openai);
        CHECK(client.route(model).model == model);
    }
    CHECK(client.route("").model == "default-model");
    CHECK(error_code_of([&] { (void)client.route("claude-sonnet-4-5"); }) ==
          "provider_not_configured");
    CHECK(error_code_of([&] { (void)client.route("gemini-2.5-pro"); }) ==
          "provider_not_configured");
    CHECK(error_code_of([&] { (void)client.route("llama3"); }) == "unknown_model_route");
    CHECK(error_code_of([&] { (void)client.route("scripted/"); }) == "invalid_model");
    const ullm::Client bare({.providers = {scripted}});
    CHECK(error_code_of([&] { (void)bare.route(""); }) == "invalid_model");
}

TEST_CASE("the not-configured error names the variable to set", "[client]") {
    const ullm::Client client;
    try {
        (void)client.route("claude-opus-4");
        FAIL("routed");
    } catch (const ullm::ProviderCapabilityError& error) {
        CHECK(error.status() == 400);
        CHECK(error.message().find("ANTHROPIC_API_KEY") != std::string::npos);
    }
}

TEST_CASE("a null provider is refused, in the options and later", "[client]") {
    CHECK(error_code_of([] { (void)ullm::Client({.providers = {nullptr}}); }) ==
          "invalid_provider");
    ullm::Client client;
    CHECK(error_code_of([&] { client.add_provider(nullptr); }) == "invalid_provider");
    CHECK(client.providers().empty());
}

TEST_CASE("the scripted provider decodes only what its own transport answered",
          "[client][scripted]") {
    ullm::ScriptedProvider provider;
    provider.push_text("kept");
    ullm::HttpResponse foreign;
    foreign.status = 200;
    foreign.headers = {{"content-type", "application/json"}};
    foreign.body = R"({"text":"kept"})";
    CHECK(error_code_of([&] { (void)provider.decode(foreign, ask("scripted/m")); }) ==
          "invalid_provider_response");
    CHECK(provider.remaining() == 1);  // nothing was taken
    const auto encoded = provider.encode(ask("scripted/m"), false);
    CHECK(encoded.url == "scripted://scripted");
    REQUIRE(provider.transport() != nullptr);
    const auto answer = provider.transport()->send(encoded, {});
    CHECK(provider.decode(answer, ask("scripted/m")).text == "kept");
    provider.push_text("streamed");
    auto decoder = provider.stream_decoder(ask("scripted/m"));
    std::vector<ullm::StreamEvent> events;
    CHECK(error_code_of([&] { decoder->feed("x\n", events); }) == "invalid_provider_response");
}

TEST_CASE("from_env configures OpenAI and Ollama from the environment", "[client]") {
    {
        const ScopedEnv env({{"OPENAI_API_KEY", "sk-test-key"},
                             {"OPENAI_BASE_URL", "http://127.0.0.1:9/v1"},
                             {"OPENAI_ORG_ID", "org-1"},
                             {"OLLAMA_HOST", "gpu-box:11434"}});
        const auto client = ullm::Client::from_env();
        CHECK(client.providers() ==
              std::vector<std::string>{"ollama", "openai", "openai-responses"});
        CHECK(client.route("openai-responses/gpt-5").provider->encode(ask("gpt-5"), false).url ==
              "http://127.0.0.1:9/v1/responses");
        const auto openai = client.route("gpt-4o");
        const auto http = openai.provider->encode(ask("gpt-4o"), false);
        CHECK(http.url == "http://127.0.0.1:9/v1/chat/completions");
        CHECK(ullm::find_header(http.headers, "authorization") == "Bearer sk-test-key");
        CHECK(ullm::find_header(http.headers, "openai-organization") == "org-1");
        const auto ollama = client.route("ollama/llama3.2");
        CHECK(ollama.provider->encode(ask("llama3.2"), false).url ==
              "http://gpu-box:11434/v1/chat/completions");
    }
    {
        const ScopedEnv env(
            {{"ANTHROPIC_API_KEY", "sk-ant-test"}, {"ANTHROPIC_BASE_URL", "http://127.0.0.1:9"}});
        const auto client = ullm::Client::from_env();
        const auto http =
            client.route("claude-sonnet-4-5").provider->encode(ask("claude-sonnet-4-5"), false);
        CHECK(http.url == "http://127.0.0.1:9/v1/messages");
        CHECK(ullm::find_header(http.headers, "x-api-key") == "sk-ant-test");
    }
    {
        const ScopedEnv env({{"GEMINI_API_KEY", nullptr}, {"GOOGLE_API_KEY", "AIza-test-key"}});
        const auto client = ullm::Client::from_env();
        const auto http =
            client.route("gemini-2.5-flash").provider->encode(ask("gemini-2.5-flash"), false);
        CHECK(http.url.find(":generateContent") != std::string::npos);
        CHECK(http.url.find("AIza") == std::string::npos);
        CHECK(ullm::find_header(http.headers, "x-goog-api-key") == "AIza-test-key");
    }
    {
        const ScopedEnv env({{"OPENAI_API_KEY", nullptr},
                             {"OLLAMA_HOST", nullptr},
                             {"ANTHROPIC_API_KEY", nullptr},
                             {"GEMINI_API_KEY", nullptr},
                             {"GOOGLE_API_KEY", nullptr}});
        const auto client = ullm::Client::from_env();
        CHECK(client.providers() == std::vector<std::string>{"ollama"});
        CHECK(client.route("ollama/qwen3").provider->encode(ask("qwen3"), false).url ==
              "http://localhost:11434/v1/chat/completions");
        CHECK(error_code_of([&] { (void)client.route("gpt-4o"); }) == "provider_not_configured");
    }
}

TEST_CASE("the scripted provider answers complete() in order and records requests",
          "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>();
    scripted->push_text("first", {10, 2, 0, 0, 0, std::nullopt});
    scripted->push_tool_call("lookup_weather", {{"city", "Berlin"}});
    const ullm::Client client({.providers = {scripted}});

    const auto first = client.complete(ask("scripted/m1", "one"));
    CHECK(first.text == "first");
    CHECK(first.usage.input_tokens == 10);
    CHECK(first.model == "m1");
    const auto second = client.complete(ask("scripted/m1", "two"));
    CHECK(second.finish_reason == ullm::FinishReason::tool_call);
    REQUIRE(second.tool_calls.size() == 1);
    CHECK(second.tool_calls[0].arguments == json{{"city", "Berlin"}});
    CHECK(second.tool_calls[0].id == "call_scripted_1");

    const auto requests = scripted->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[1].messages[0].text() == "two");
    CHECK(error_code_of([&] { (void)client.complete(ask("scripted/m1")); }) ==
          "mock_queue_exhausted");
}

TEST_CASE("a scripted provider keeps only the most recent requests it is told to keep",
          "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>();
    scripted->answer_with([](const ullm::ChatRequest& request) {
        ullm::ChatResponse response;
        response.text = "re: " + request.messages.back().text();
        response.message = ullm::Message::assistant(response.text);
        return ullm::ScriptedTurn{std::move(response)};
    });
    const ullm::Client client({.providers = {scripted}});
    for (const char* said : {"one", "two", "three"}) (void)client.complete(ask("scripted/m", said));
    CHECK(scripted->requests().size() == 3);

    scripted->keep_requests(2);  // drops the oldest at once
    auto kept = scripted->requests();
    REQUIRE(kept.size() == 2);
    CHECK(kept[0].messages.back().text() == "two");
    CHECK(kept[1].messages.back().text() == "three");
    for (const char* said : {"four", "five", "six"}) (void)client.complete(ask("scripted/m", said));
    kept = scripted->requests();
    REQUIRE(kept.size() == 2);
    CHECK(kept[0].messages.back().text() == "five");
    CHECK(kept[1].messages.back().text() == "six");

    scripted->keep_requests(0);
    CHECK(scripted->requests().empty());
    CHECK(client.complete(ask("scripted/m", "seven")).text == "re: seven");
    CHECK(scripted->requests().empty());
    CHECK(scripted->request_count() == 7);

    // The exhausted queue's message counts every request, kept or not.
    scripted->answer_with(nullptr);
    try {
        (void)client.complete(ask("scripted/m", "eight"));
        FAIL("the empty queue answered");
    } catch (const ullm::Error& error) {
        CHECK(error.code() == "mock_queue_exhausted");
        CHECK(std::string(error.what()).find("request 8") != std::string::npos);
    }
    CHECK(scripted->request_count() == 8);
}

TEST_CASE("scripted streams yield word deltas, tool events and one done", "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>();
    scripted->push_tool_call("lookup_weather", {{"city", "Paris"}}, "Let me check that.");
    const ullm::Client client({.providers = {scripted}});
    auto stream = client.stream(ask("scripted/m"));
    std::vector<std::string> deltas;
    std::vector<ullm::StreamEvent::Type> types;
    for (const auto& event : stream) {
        types.push_back(event.type);
        if (const auto* delta = event.text_delta()) deltas.push_back(*delta);
    }
    CHECK(deltas == std::vector<std::string>{"Let ", "me ", "check ", "that."});
    CHECK(std::count(types.begin(), types.end(), ullm::StreamEvent::Type::done) == 1);
    CHECK(std::count(types.begin(), types.end(), ullm::StreamEvent::Type::tool_call_end) == 1);
    REQUIRE(stream.response().has_value());
    CHECK(stream.response()->text == "Let me check that.");
    CHECK(stream.response()->tool_calls.at(0).name == "lookup_weather");
}

TEST_CASE("queued errors are thrown by the request that takes them", "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>();
    scripted->push_error(std::make_exception_ptr(ullm::RateLimitError("slow down")));
    scripted->push_text("after");
    const ullm::Client client({.providers = {scripted}});
    CHECK(error_code_of([&] { (void)client.complete(ask("scripted/m")); }) == "rate_limited");
    CHECK(client.complete(ask("scripted/m")).text == "after");
}

TEST_CASE("a scripted provider given retries retries as a server's client would",
          "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>(
        "scripted", 0ms, ullm::RetryPolicy{.max_attempts = 2, .initial_backoff = 1ms});
    scripted->push_error(std::make_exception_ptr(ullm::RateLimitError("slow down")));
    scripted->push_text("after a retry");
    scripted->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "busy", 529, true)));
    scripted->push_text("streamed after a retry");
    scripted->push_error(std::make_exception_ptr(ullm::AuthenticationError("bad key", 401)));
    const ullm::Client client({.providers = {scripted}});
    CHECK(client.complete(ask("scripted/m")).text == "after a retry");
    CHECK(scripted->requests().size() == 2);  // each attempt took an answer

    std::vector<ullm::StreamEvent::Type> types;
    auto stream = client.stream(ask("scripted/m"));
    for (const auto& event : stream) types.push_back(event.type);
    REQUIRE_FALSE(types.empty());
    CHECK(types.front() == ullm::StreamEvent::Type::retry);
    REQUIRE(stream.response().has_value());
    CHECK(stream.response()->text == "streamed after a retry");

    // What the policy does not retry is the request's error at once.
    CHECK(error_code_of([&] { (void)client.complete(ask("scripted/m")); }) ==
          "authentication_failed");
    CHECK(scripted->remaining() == 0);
    CHECK(scripted->requests().size() == 5);
}

TEST_CASE("a scripted provider answers from its responder when the queue is empty",
          "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>();
    scripted->push_text("queued first");
    scripted->answer_with([](const ullm::ChatRequest& request) {
        const std::string said = request.messages.back().text();
        if (said == "fail") throw ullm::AuthenticationError("refused by the rules", 401);
        ullm::ChatResponse response;
        response.message = ullm::Message::assistant("you said " + said);
        response.text = "you said " + said;
        return ullm::ScriptedTurn{std::move(response)};
    });
    const ullm::Client client({.providers = {scripted}});
    CHECK(client.complete(ask("scripted/m", "one")).text == "queued first");
    const auto ruled = client.complete(ask("scripted/m", "two"));
    CHECK(ruled.text == "you said two");
    CHECK(ruled.model == "m");
    std::string streamed;
    auto stream = client.stream(ask("scripted/m", "three words here"));
    for (const auto& event : stream) {
        if (const auto* delta = event.text_delta()) streamed += *delta;
    }
    CHECK(streamed == "you said three words here");
    CHECK(error_code_of([&] { (void)client.complete(ask("scripted/m", "fail")); }) ==
          "authentication_failed");
    CHECK(scripted->requests().size() == 4);
    scripted->answer_with(nullptr);
    CHECK(error_code_of([&] { (void)client.complete(ask("scripted/m")); }) ==
          "mock_queue_exhausted");
}

TEST_CASE("a scripted stream decodes the same events however its bytes are split",
          "[client][scripted]") {
    ullm::ScriptedProvider provider;
    ullm::ChatResponse response;
    response.message = ullm::Message::assistant("one two three");
    response.text = "one two three";
    response.model = "m";
    const auto expected = ullm::ScriptedProvider::events_of(response);
    const std::string bytes = "42\n" + std::string(expected.size(), '\n');
    for (std::size_t split = 0; split <= bytes.size(); ++split) {
        provider.push(response);
        auto decoder = provider.stream_decoder(ask("scripted/m"));
        std::vector<ullm::StreamEvent> events;
        decoder->feed(std::string_view(bytes).substr(0, split), events);
        decoder->feed(std::string_view(bytes).substr(split), events);
        decoder->finish(events);
        INFO("split at " << split);
        REQUIRE(events.size() == expected.size());
        for (std::size_t i = 0; i < events.size(); ++i) {
            CHECK(events[i].type == expected[i].type);
            CHECK(events[i].delta == expected[i].delta);
        }
    }
    // A body that stops before its last event is truncated.
    provider.push(response);
    auto decoder = provider.stream_decoder(ask("scripted/m"));
    std::vector<ullm::StreamEvent> events;
    decoder->feed("7\n\n", events);
    CHECK(error_code_of([&] { decoder->finish(events); }) == "stream_truncated");
}

TEST_CASE("a scripted stream can be cancelled between events", "[client][scripted]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>("scripted", 200ms);
    scripted->push_text("one two three four five six");
    const ullm::Client client({.providers = {scripted}});
    auto stream = client.stream(ask("scripted/m"));
    REQUIRE(stream.next().has_value());
    std::thread canceller([&] {
        std::this_thread::sleep_for(20ms);
        stream.cancel();
    });
    CHECK(error_code_of([&] {
              while (stream.next()) {
              }
          }) == "cancelled");
    canceller.join();
    CHECK_FALSE(stream.response().has_value());
}

TEST_CASE("invalid options fail before anything is sent", "[client]") {
    auto scripted = std::make_shared<ullm::ScriptedProvider>();
    auto openai =
        std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{.api_key = "k"});
    const ullm::Client client({.providers = {scripted, openai}});
    auto request = ask("o3-mini");
    request.temperature = 0.2;
    CHECK(error_code_of([&] { (void)client.stream(request); }) == "unsupported_option");
    CHECK(error_code_of([&] { (void)client.complete(request); }) == "unsupported_option");
    auto bad_tool = ask("scripted/m");
    bad_tool.tools = {{"bad name!", "d", {{"type", "object"}}}};
    CHECK(error_code_of([&] { (void)client.complete(bad_tool); }) == "invalid_tool_name");
    auto twice = ask("scripted/m");
    twice.tools = {{"lookup", "d", {{"type", "object"}}}, {"lookup", "e", {{"type", "object"}}}};
    CHECK(error_code_of([&] { (void)client.complete(twice); }) == "duplicate_tool_name");
    CHECK(error_code_of([&] { (void)client.stream(twice); }) == "duplicate_tool_name");
    CHECK(scripted->requests().empty());
}

TEST_CASE("JSON that is not UTF-8 is an invalid message before anything is sent", "[client]") {
    ullm::Client client(
        {.providers = {std::make_shared<ullm::OpenAiChatProvider>(
             ullm::OpenAiChatOptions{.api_key = "k", .base_url = "http://127.0.0.1:9/v1"})}});
    ullm::ChatRequest request;
    request.model = "openai/gpt-4o-mini";
    // Plain text is repaired on the wire; a tool result that the adapter serialises into a
    // string cannot be, and is refused.
    ullm::Message call = ullm::Message::assistant("");
    call.parts = {ullm::ToolCallPart{"c1", "lookup", json::object()}};
    request.messages = {
        ullm::Message::user("look"), call,
        ullm::Message::tool_results({{"c1", "lookup", {{"k", "bad \xff"}}, false}})};
    CHECK(error_code_of([&] { (void)client.complete(request); }) == "invalid_message");
    CHECK(error_code_of([&] { (void)client.stream(request); }) == "invalid_message");
}

}  // namespace client_test
