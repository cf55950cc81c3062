#pragma once

// Internal to the OpenAI adapters (Chat Completions and Responses) and the compatible servers
// they serve: the one embedding codec they share, `POST /embeddings` or Ollama's native
// `POST /api/embed`.

#include <ullm/http/http_types.hpp>
#include <ullm/providers/embedding.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace ullm::detail {

/// What the codec sends and how.
struct OpenAiEmbeddingSettings {
    std::string provider_name;
    std::string base_url;  ///< Trimmed; everything before `/embeddings`.
    std::string api_key;
    std::string organization;
    std::string project;
    HttpHeaders extra_headers;
    std::chrono::milliseconds connect_timeout{};
    std::chrono::milliseconds idle_timeout{};
    bool base64 = false;         ///< Ask for `encoding_format: "base64"`.
    bool ollama_native = false;  ///< Ollama's `/api/embed` instead of `/embeddings`.
    std::size_t max_inputs = 2048;
};

/// The settings both OpenAI adapters' options give: where to send and with which headers
/// (JSON numbers, `/embeddings`, 2,048 inputs until the caller says otherwise).
template <class Options>
[[nodiscard]] OpenAiEmbeddingSettings embedding_settings(const Options& options) {
    return {.provider_name = options.provider_name,
            .base_url = options.base_url,
            .api_key = options.api_key,
            .organization = options.organization,
            .project = options.project,
            .extra_headers = options.extra_headers,
            .connect_timeout = options.connect_timeout,
            .idle_timeout = options.idle_timeout};
}

/// The codec of `settings`.
[[nodiscard]] std::shared_ptr<const EmbeddingCodec> make_openai_embedding_codec(
    OpenAiEmbeddingSettings settings);

}  // namespace ullm::detail
