#pragma once

/// The OpenAI Chat Completions adapter (`POST /chat/completions`), which also serves
/// OpenAI-compatible servers through a base URL: Ollama, vLLM, llama.cpp server, OpenRouter,
/// Groq, DeepSeek, Mistral, xAI, Together and others.

#include <ullm/http/http_types.hpp>
#include <ullm/providers/provider.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace ullm {

/// Settings of an `OpenAiChatProvider`. A value type.
struct OpenAiChatOptions {
    /// Sent as `Authorization: Bearer …` when not empty (local servers often need none).
    std::string api_key;
    /// Everything before `/chat/completions`, e.g. `http://localhost:11434/v1` for Ollama.
    std::string base_url = "https://api.openai.com/v1";
    /// The provider name used in routing, errors and replay binding: "openai", "ollama", …
    std::string provider_name = "openai";
    std::string organization;   ///< `OpenAI-Organization` header, when set.
    std::string project;        ///< `OpenAI-Project` header, when set.
    HttpHeaders extra_headers;  ///< Sent with every request (e.g. OpenRouter's `HTTP-Referer`).
    /// Ask for a final usage chunk when streaming (`stream_options.include_usage`).
    bool stream_usage = true;
    /// Send the output limit as `max_completion_tokens` (OpenAI) rather than `max_tokens`
    /// (what most compatible servers understand). Defaults by provider name when unset.
    std::optional<bool> use_max_completion_tokens;
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
};

/// Chat Completions: encodes canonical requests, decodes bodies and streams. Immutable and
/// thread-safe.
class OpenAiChatProvider final : public Provider {
public:
    explicit OpenAiChatProvider(OpenAiChatOptions options = {});

    [[nodiscard]] std::string_view name() const noexcept override;
    [[nodiscard]] ProviderCapabilities capabilities(std::string_view model) const override;
    [[nodiscard]] HttpRequest encode(const ChatRequest& request, bool stream) const override;
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;

    /// The request body alone (what `encode` sends), for inspection and tests.
    [[nodiscard]] json encode_body(const ChatRequest& request, bool stream) const;

    [[nodiscard]] const OpenAiChatOptions& options() const noexcept { return options_; }

private:
    OpenAiChatOptions options_;
};

}  // namespace ullm
