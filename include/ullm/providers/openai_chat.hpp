#pragma once

/// The OpenAI Chat Completions adapter (`POST /chat/completions`), which also serves
/// OpenAI-compatible servers through a base URL: Ollama, vLLM, llama.cpp server, OpenRouter,
/// Groq, DeepSeek, Mistral, xAI, Together and others.

#include <ullm/http/http_types.hpp>
#include <ullm/providers/provider.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace ullm {

/// Which API `Client::embed` uses on an OpenAI-compatible server.
enum class OpenAiEmbeddingsApi {
    /// `POST {base_url}/embeddings` (OpenAI, and what compatible servers serve: Ollama's `/v1`,
    /// vLLM, llama.cpp server).
    openai,
    /// Ollama's native `POST /api/embed`, on the server root (`base_url` without a trailing
    /// `/v1`), sent with `truncate: false` so that an input longer than the model's context
    /// fails rather than being cut short; usage is its `prompt_eval_count`.
    ollama,
};

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
    /// How structured output (`ChatRequest::response_format`) is asked for: true (the default)
    /// sends `response_format: {type: "json_schema", …}`; false, for servers that only have
    /// JSON mode (DeepSeek, older vLLM and Groq models), sends `{type: "json_object"}` and the
    /// schema in the system prompt. Either way the reply is checked against the schema by
    /// `Client::complete_object`.
    bool json_schema_output = true;
    /// The embeddings API (`Client::embed`).
    OpenAiEmbeddingsApi embeddings_api = OpenAiEmbeddingsApi::openai;
    /// Ask `/embeddings` for base64 vectors (`encoding_format: "base64"`, little-endian
    /// float32: a third of the bytes of JSON numbers, decoded bit for bit) rather than JSON
    /// numbers. Defaults by provider name when unset: on for "openai", off for others, since
    /// not every compatible server takes the option. Either answer form is decoded.
    std::optional<bool> embeddings_base64;
    /// The most inputs one embedding request carries; longer calls are split (OpenAI takes
    /// 2,048; Gemini's OpenAI-compatible endpoint 100).
    std::size_t embeddings_max_inputs = 2048;
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
    /// Embeddings through `/embeddings` (or Ollama's `/api/embed`, by `embeddings_api`), at most
    /// `embeddings_max_inputs` inputs a request. Its `check` refuses a task
    /// (`unsupported_option`: OpenAI has none) and, for provider "openai", `dimensions` with
    /// `text-embedding-ada-*`.
    [[nodiscard]] const EmbeddingCodec* embeddings() const noexcept override;

    /// The request body alone (what `encode` sends), for inspection and tests.
    [[nodiscard]] json encode_body(const ChatRequest& request, bool stream) const;

    [[nodiscard]] const OpenAiChatOptions& options() const noexcept { return options_; }

private:
    OpenAiChatOptions options_;
    std::shared_ptr<const EmbeddingCodec> embeddings_;
};

}  // namespace ullm
