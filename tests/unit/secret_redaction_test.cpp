// API keys never reach an error text, whatever shape the key has and however a server echoes
// it: every provider, every error path that quotes a server's bytes, complete and stream.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/detail/redact.hpp>
#include <ullm/http/transport.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/catch.hpp"

namespace secret_redaction_test {

namespace {

// Answers every request with one canned response, whole or as a stream of one chunk.
class CannedTransport final : public ullm::Transport {
public:
    explicit CannedTransport(ullm::HttpResponse response) : response_(std::move(response)) {}

    ullm::HttpResponse send(const ullm::HttpRequest&, std::stop_token) override {
        return response_;
    }

    std::unique_ptr<ullm::HttpStream> open_stream(const ullm::HttpRequest&,
                                                  std::stop_token) override {
        return std::make_unique<Stream>(response_);
    }

private:
    class Stream final : public ullm::HttpStream {
    public:
        explicit Stream(ullm::HttpResponse response) : response_(std::move(response)) {}
        const ullm::HttpResponseHead& head() override { return response_; }
        bool read(std::string& out) override {
            if (sent_) return false;
            sent_ = true;
            out = response_.body;
            return true;
        }
        void cancel() noexcept override {}

    private:
        ullm::HttpResponse response_;
        bool sent_ = false;
    };

    ullm::HttpResponse response_;
};

ullm::HttpResponse respond(int status, std::string body, std::string content_type) {
    ullm::HttpResponse response;
    response.status = status;
    response.headers = {{"content-type", std::move(content_type)}};
    response.body = std::move(body);
    return response;
}

// The provider under test, configured with `key`, and the model to ask it for.
struct Target {
    std::string label;
    std::shared_ptr<const ullm::Provider> provider;
    std::string model;
};

std::vector<Target> targets(const std::string& key) {
    ullm::OpenAiChatOptions compatible;
    compatible.api_key = key;
    compatible.provider_name = "xai";
    compatible.base_url = "http://127.0.0.1:9/v1";
    ullm::OpenAiChatOptions openai;
    openai.api_key = key;
    openai.base_url = "http://127.0.0.1:9/v1";
    ullm::OpenAiResponsesOptions responses;
    responses.api_key = key;
    responses.base_url = "http://127.0.0.1:9/v1";
    ullm::AnthropicOptions anthropic;
    anthropic.api_key = key;
    anthropic.base_url = "http://127.0.0.1:9/v1";
    ullm::GeminiOptions gemini;
    gemini.api_key = key;
    gemini.base_url = "http://127.0.0.1:9/v1beta";
    return {
        {"openai-compatible", std::make_shared<ullm::OpenAiChatProvider>(compatible), "xai/grok-4"},
        {"openai", std::make_shared<ullm::OpenAiChatProvider>(openai), "openai/gpt-4o"},
        {"responses", std::make_shared<ullm::OpenAiResponsesProvider>(responses),
         "openai-responses/gpt-4o"},
        {"anthropic", std::make_shared<ullm::AnthropicProvider>(anthropic),
         "anthropic/claude-sonnet-4-5"},
        {"gemini", std::make_shared<ullm::GeminiProvider>(gemini), "gemini/gemini-2.5-flash"},
    };
}

// A server's answer that quotes the key, by the path it takes through the adapters.
struct Echo {
    std::string label;
    ullm::HttpResponse response;
    bool stream_only = false;
};

std::vector<Echo> echoes(const std::string& key) {
    const std::string json_message =
        "{\"error\":{\"message\":\"Incorrect API key provided: " + key +
        "\",\"type\":\"invalid_request_error\",\"code\":" +
        "\"invalid_api_key\",\"status\":\"UNAUTHENTICATED\"}," + "\"type\":\"error\"}";
    const std::string in_stream =
        "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":"
        "\"upstream said " +
        key + "\",\"code\":500},\"message\":\"upstream said " + key + "\"}\n\n";
    return {
        {"a 401 JSON message", respond(401, json_message, "application/json")},
        {"a 400 JSON message", respond(400, json_message, "application/json")},
        {"an HTML error page",
         respond(502, "<html><body><h1>Bad gateway</h1><p>key " + key + "</p></body></html>",
                 "text/html")},
        {"an invalid-JSON body", respond(200, "{\"oops\": " + key, "application/json")},
        {"a key at the 120-character cut",
         respond(200, std::string(110, 'x') + key + " trailing", "application/json")},
        {"a key at the 1,000-character cut",
         respond(400, std::string(990, 'y') + key + " trailing", "text/plain")},
        {"an in-stream error event", respond(200, in_stream, "text/event-stream"), true},
        {"non-JSON SSE data",
         respond(200, "data: " + key + " is not JSON\n\n", "text/event-stream"), true},
        {"an invalid-JSON SSE event at the cut",
         respond(200, "data: {" + std::string(110, 'z') + key + "\n\n", "text/event-stream"), true},
    };
}

// The error `f` throws (its what() and message()), or "" when it throws nothing.
template <class F>
std::string error_text(F&& f) {
    try {
        f();
    } catch (const ullm::Error& error) {
        return std::string(error.what()) + "\n" + error.message();
    }
    return "";
}

}  // namespace

TEST_CASE("no key of any shape appears in any provider's error text", "[redact][client]") {
    const std::vector<std::string> keys = {
        "sk-proj-Q3n9x7Lk2Vb8Zt4Wm1Hc6Rf0Jd5Ys",   "xai-4fKq9TzR2mWb7Vn1Lc8Hx3Jd6Ys0Pg5Ua2Ei9Ok",
        "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6",        "sk-ant-api03-Zx8_Yw7-Vu6Ts5Rq4Po3Nm2Lk1Ji0Hg",
        "AIzaSyD4-k9QeW_7uNtV3bXo1LmPr8sYcZ2aHgJ", "ab_cd-ef_gh-ij_kl-mn_op-qr_st",
    };
    int checks = 0;
    for (const auto& key : keys) {
        for (const auto& echo : echoes(key)) {
            for (const auto& target : targets(key)) {
                const ullm::Client client(
                    {.transport = std::make_shared<CannedTransport>(echo.response),
                     .retry = {.max_attempts = 1},
                     .providers = {target.provider}});
                ullm::ChatRequest request;
                request.model = target.model;
                request.messages = {ullm::Message::user("Hello")};
                std::vector<std::string> texts;
                if (!echo.stream_only) {
                    texts.push_back(error_text([&] { (void)client.complete(request); }));
                }
                texts.push_back(error_text([&] {
                    auto stream = client.stream(request);
                    while (stream.next()) {
                    }
                }));
                for (const auto& text : texts) {
                    INFO(target.label << " with " << echo.label << " and key " << key);
                    INFO(text);
                    CHECK_FALSE(text.empty());  // every echo is an error
                    CHECK(text.find(key) == std::string::npos);
                    CHECK(text.find(key.substr(0, ullm::detail::redact_prefix_chars)) ==
                          std::string::npos);
                    CHECK(ullm::detail::is_valid_utf8(text));
                    ++checks;
                }
            }
        }
    }
    CHECK(checks == 6 * 5 * (6 * 2 + 3));
}

TEST_CASE("a request's credential query parameters are secrets", "[redact]") {
    ullm::HttpRequest request;
    request.url = "https://x.test/v1/models?alt=sse&key=AIzaQueryKey123&access_token=tok-98765";
    const auto secrets = ullm::detail::request_secrets(request);
    CHECK(std::find(secrets.begin(), secrets.end(), "AIzaQueryKey123") != secrets.end());
    CHECK(std::find(secrets.begin(), secrets.end(), "tok-98765") != secrets.end());
    CHECK(std::find(secrets.begin(), secrets.end(), "sse") == secrets.end());
    CHECK(ullm::detail::redact("echo tok-98765", secrets) == "echo [redacted]");
}

TEST_CASE("a secret cut short by a length limit is still redacted", "[redact]") {
    const std::vector<std::string> secrets = {"A1b2C3d4E5f6G7h8I9j0"};
    CHECK(ullm::detail::redact("starts with \"xxA1b2C3d4E5f…\"", secrets) ==
          "starts with \"xx[redacted]…\"");
    CHECK(ullm::detail::redact("A1b2C3d4", secrets) == "[redacted]");
    // Fewer leading characters than the prefix rule needs are not taken for the secret.
    CHECK(ullm::detail::redact("A1b2C3d", secrets) == "A1b2C3d");
    // A header value with its scheme is matched whole only; its token is a secret of its own.
    ullm::HttpRequest request;
    request.headers = {{"Authorization", "Bearer A1b2C3d4E5f6G7h8I9j0"}};
    const auto from_header = ullm::detail::request_secrets(request);
    CHECK(ullm::detail::redact("Bearer says hi; A1b2C3d4E5f6…", from_header) ==
          "Bearer says hi; [redacted]…");
}

TEST_CASE("an error message is valid UTF-8 whatever bytes it quotes", "[error]") {
    const ullm::Error error(ullm::ErrorCode::provider_error,
                            std::string("bad \xC3\x28 and \xFF and \xE2\x82"));
    CHECK(ullm::detail::is_valid_utf8(error.what()));
    CHECK(ullm::detail::is_valid_utf8(error.message()));
    CHECK(error.message() == "bad \xEF\xBF\xBD( and \xEF\xBF\xBD and \xEF\xBF\xBD\xEF\xBF\xBD");
    const ullm::Error clean(ullm::ErrorCode::provider_error, "caf\xC3\xA9 \xF0\x9F\x98\x80");
    CHECK(clean.message() == "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

}  // namespace secret_redaction_test
