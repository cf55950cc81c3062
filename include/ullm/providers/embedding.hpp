#pragma once

/// Embeddings: the request `Client::embed` takes, the vectors it returns, and the codec a
/// provider offers for them (`Provider::embeddings()`).

#include <ullm/core/usage.hpp>
#include <ullm/http/http_types.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// What the vectors will be used for, for providers that tune an embedding to its use (Gemini
/// `taskType`). A provider without the notion refuses a request that names one
/// (`unsupported_option`) rather than ignore it.
enum class EmbeddingTask {
    retrieval_query,     ///< A search query (`RETRIEVAL_QUERY`).
    retrieval_document,  ///< A document to be searched (`RETRIEVAL_DOCUMENT`).
    semantic_similarity,
    classification,
    clustering,
    question_answering,
    fact_verification,
    code_retrieval_query,
};

/// "retrieval_query", "retrieval_document", …
[[nodiscard]] std::string_view to_string(EmbeddingTask task) noexcept;

/// An embedding call: one vector per input. A value type; designated initialisers work.
struct EmbeddingRequest {
    /// The embedding model, routed as chat models are: `text-embedding-3-small` (OpenAI by its
    /// name), `gemini/gemini-embedding-001`, `ollama/nomic-embed-text`; empty means the client's
    /// default model.
    std::string model;
    /// The texts to embed, each non-empty valid UTF-8; at least one. A call of more inputs than
    /// the provider takes in one request is sent as several requests, in order.
    std::vector<std::string> inputs;
    /// The length of each vector, for models that can shorten theirs (OpenAI
    /// `text-embedding-3-*`, Gemini, Ollama); positive. The model's own length when unset.
    std::optional<std::int64_t> dimensions;
    /// What the vectors are for (Gemini only).
    std::optional<EmbeddingTask> task;
};

/// The vectors of an embedding call. A value type.
struct EmbeddingResponse {
    /// One vector per input, in the order of `EmbeddingRequest::inputs`, all of one length.
    std::vector<std::vector<float>> vectors;
    /// The model that answered, as the provider names it (the routed model id when it names
    /// none).
    std::string model;
    /// Summed over the call's requests: `input_tokens` as the provider counted them (0 when it
    /// reports none); `cost_usd` when the model has a price and tokens were counted.
    Usage usage;
    /// How many HTTP requests the call took.
    std::size_t requests = 0;
    /// A budget skipped the call (`BudgetAction::skip`): nothing was sent, `vectors` is empty.
    bool budget_skipped = false;

    /// The length of the vectors (0 when there are none).
    [[nodiscard]] std::size_t dimensions() const noexcept {
        return vectors.empty() ? 0 : vectors.front().size();
    }
};

/// The embedding requests of a provider: encodes one request's share of an `EmbeddingRequest`
/// and decodes its answer. Immutable and thread-safe, like the provider that offers it.
class EmbeddingCodec {
public:
    virtual ~EmbeddingCodec() = default;

    /// The most inputs one HTTP request may carry for `model` (OpenAI 2,048, Gemini 100).
    [[nodiscard]] virtual std::size_t max_inputs(std::string_view model) const = 0;

    /// Refuses, before any I/O, what this provider cannot do for `request` (whose inputs,
    /// dimensions and model `Client` has checked): `ProviderCapabilityError`
    /// `unsupported_option` (a task, or dimensions for a model that cannot shorten its
    /// vectors), `InvalidOptionError` `invalid_model` for a model id the API cannot have.
    virtual void check(const EmbeddingRequest& request) const = 0;

    /// The HTTP request that embeds all of `request.inputs` (at most `max_inputs`), which
    /// `check` has passed.
    [[nodiscard]] virtual HttpRequest encode(const EmbeddingRequest& request) const = 0;

    /// Decodes the answer to `encode(request)`: exactly one finite vector per input, in input
    /// order, all of one length (`request.dimensions` when set), and the usage of the request
    /// (unpriced). A non-2xx status or an error body throws the mapped `Error`; any other body
    /// throws `ProviderError` `invalid_provider_response` (nothing partly decoded is returned).
    [[nodiscard]] virtual EmbeddingResponse decode(const HttpResponse& response,
                                                   const EmbeddingRequest& request) const = 0;
};

}  // namespace ullm
