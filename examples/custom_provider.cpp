// ullm custom provider: teach ullm a new HTTP API in one small class.
//
// A `Provider` translates between ullm's canonical request and response and one API's wire
// format: `encode` builds the HTTP request, `decode` reads the HTTP response. The client does
// the rest alike for every provider: routing, the libcurl transport, retries, prices, and
// conversations. "Tiny" is a made-up API, played by an in-process HTTP server on 127.0.0.1:
// POST /generate {"model", "system", "turns": [{"role", "text"}]} answers
// {"output", "tokens": {"in", "out"}}, or {"error"} with an error status.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <variant>

#include "support/test_server.hpp"

namespace {

using ullm::json;

// Immutable after construction, so thread-safe as the interface requires.
class TinyProvider final : public ullm::Provider {
public:
    explicit TinyProvider(std::string base_url) : base_url_(std::move(base_url)) {}

    // Models route here as "tiny/<model>".
    [[nodiscard]] std::string_view name() const noexcept override { return "tiny"; }

    // Text turns, nothing more. The client refuses what these rule out (`unsupported_option`)
    // before `encode` or `respond` is called.
    [[nodiscard]] ullm::ProviderCapabilities capabilities(std::string_view) const override {
        ullm::ProviderCapabilities text_only;
        text_only.streaming = text_only.tools = text_only.tool_choice_required = false;
        text_only.structured_output = text_only.images = text_only.temperature = false;
        text_only.top_p = text_only.stop_sequences = false;
        return text_only;
    }

    [[nodiscard]] ullm::HttpRequest encode(const ullm::ChatRequest& request,
                                           bool /*stream*/) const override {
        // What capabilities cannot say is refused here: never drop anything silently.
        json turns = json::array();
        for (const auto& message : request.messages) {
            for (const auto& part : message.parts) {
                if (!std::holds_alternative<ullm::TextPart>(part)) {
                    throw ullm::ProviderCapabilityError(ullm::ErrorCode::unsupported_option,
                                                        "tiny takes plain text turns only");
                }
            }
            turns.push_back({{"role", ullm::to_string(message.role)}, {"text", message.text()}});
        }
        const json body = {{"model", request.model}, {"system", request.system}, {"turns", turns}};
        return {.url = base_url_ + "/generate",
                .headers = {{"Content-Type", "application/json"}},
                .body = body.dump()};
    }

    [[nodiscard]] ullm::ChatResponse decode(const ullm::HttpResponse& http,
                                            const ullm::ChatRequest& request) const override {
        const ullm::ErrorOrigin origin{.provider = "tiny", .model = request.model};
        if (http.status < 200 || http.status > 299) {
            // The shared mapping: 429 is `rate_limited`, 5xx a retryable `provider_error`, ...
            // with the server's Retry-After, so the client's retries work as for any provider.
            const auto error = json::parse(http.body, nullptr, false);
            ullm::throw_provider_failure(
                {.status = http.status,
                 .message = error.is_object() ? error.value("error", "") : "",
                 .retry_after = ullm::retry_hint(http)},
                origin);
        }
        // Fail closed: a body that is not what the API documents is `invalid_provider_response`.
        const auto body = ullm::parse_provider_json(http.body, origin);
        if (!body.contains("output") || !body["output"].is_string()) {
            ullm::throw_invalid_response("\"output\" is missing or not a string", origin);
        }
        ullm::ChatResponse response;
        response.text = body["output"].get<std::string>();
        response.message = ullm::Message::assistant(response.text);
        const auto tokens = body.value("tokens", json::object());  // Usage is optional.
        response.usage.input_tokens = tokens.value("in", std::int64_t{0});
        response.usage.output_tokens = tokens.value("out", std::int64_t{0});
        response.model = request.model;
        response.provider = "tiny";
        return response;
    }

    [[nodiscard]] std::unique_ptr<ullm::StreamDecoder> stream_decoder(
        const ullm::ChatRequest&) const override {
        throw ullm::ProviderCapabilityError(ullm::ErrorCode::unsupported_option,
                                            "tiny does not stream");
    }

private:
    std::string base_url_;
};

}  // namespace

int main() try {
    ullm::test::TestServer server;
    // The first request finds the server busy; the client retries it after the Retry-After.
    server.enqueue(ullm::test::ScriptedResponse::json(503, R"({"error":"warming up"})",
                                                      {{"Retry-After", "0"}}));
    server.enqueue(ullm::test::ScriptedResponse::json(
        200, R"({"output":"Hello! I am tiny.","tokens":{"in":12,"out":5}})"));
    server.enqueue(ullm::test::ScriptedResponse::json(
        200, R"({"output":"You greeted me first.","tokens":{"in":25,"out":5}})"));

    // Register the provider on a client; a conversation names it in its model.
    ullm::Client client;
    client.add_provider(std::make_shared<TinyProvider>(server.base_url()));
    auto conversation = client.conversation({.system = "Be tiny.", .model = "tiny/tiny-1"});

    for (const char* text : {"Hello!", "What did I say first?"}) {
        fmt::print("user> {}\nassistant> {}\n", text, conversation.send(text).text);
    }
    const auto last = json::parse(server.requests().back().body);
    fmt::print("{} HTTP requests (one retried); the last carried {} turns: {}\n",
               server.request_count(), last["turns"].size(), last["turns"].dump());
    fmt::print("totals: {} rounds, {} tokens in, {} out\n", conversation.totals().rounds,
               conversation.totals().input_tokens, conversation.totals().output_tokens);

    // What the provider cannot do is refused with a clear error, and the turn leaves no trace.
    try {
        for (const auto& event : conversation.send_stream("Stream this, please.")) (void)event;
    } catch (const ullm::Error& error) {
        fmt::print("send_stream: {}; history still {} messages\n", error.what(),
                   conversation.history().size());
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "custom provider example failed: %s\n", error.what());
    return 1;
}
