#pragma once

/// The provider adapter interface: canonical request → HTTP request, HTTP response →
/// canonical response, body bytes → canonical stream events.

#include <ullm/http/http_types.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/embedding.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

class Transport;
struct RetryPolicy;

/// The JSON Schema a provider takes for structured output (`ChatRequest::response_format`).
enum class ResponseSchemaRules {
    /// Any schema ullm's validator takes (Gemini, compatible servers).
    any,
    /// OpenAI's strict mode, applied when `ResponseFormat::strict` is set: a root object; on
    /// every object `additionalProperties: false` and every property required; only the
    /// keywords OpenAI lists; at most 10 levels of nesting, 5,000 properties and 1,000 enum
    /// values.
    openai_strict,
    /// Anthropic's: a root object, and no `additionalProperties` other than false (it is added
    /// where missing). Bounds Anthropic refuses (`minimum`, `maxLength`, `maxItems`, …) are sent
    /// as words in the description instead, and the reply is still checked against them.
    anthropic,
};

/// What a provider supports for one model. An option a model lacks is refused with
/// `ProviderCapabilityError`, never silently dropped.
struct ProviderCapabilities {
    bool streaming = true;
    bool tools = true;
    bool tool_choice_required = true;  ///< `required` / a named tool.
    bool structured_output = true;
    bool images = true;
    bool documents = false;
    bool temperature = true;  ///< Some reasoning models refuse sampling options.
    bool top_p = true;
    bool stop_sequences = true;
    bool reasoning = false;  ///< The model can return reasoning or replay state.
    /// The schemas `structured_output` takes.
    ResponseSchemaRules response_schema = ResponseSchemaRules::any;
};

/// Turns a streamed body into canonical events. One per stream; not thread-safe.
class StreamDecoder {
public:
    virtual ~StreamDecoder() = default;

    /// Feeds the next bytes of the body (any split) and appends the events they complete.
    /// Throws the mapped `Error` when the stream carries an error event.
    virtual void feed(std::string_view bytes, std::vector<StreamEvent>& out) = 0;

    /// Ends the body: appends the single terminal `done` event. Throws `StreamTruncatedError`
    /// when the stream stopped before its terminal event.
    virtual void finish(std::vector<StreamEvent>& out) = 0;

    /// Whether any event visible to the caller has been produced (a stream is retried only
    /// before its first visible event).
    [[nodiscard]] virtual bool produced_visible_event() const = 0;

    /// Where this stream can be resumed after the events fed so far: a value once the response
    /// is known to run in the background and has told its id; nullopt (the default) for a
    /// stream that cannot be resumed, which is then never retried after its first visible event.
    [[nodiscard]] virtual std::optional<StreamPosition> resume_position() const {
        return std::nullopt;
    }

    /// Prepares to go on with the body of a resumed request (`BackgroundCodec::encode_resume` at
    /// `resume_position()`): drops a partly fed event and the end of the broken body, keeps
    /// everything decoded, and ignores events at or before the position. Returns false (the
    /// default) when this decoder cannot go on.
    virtual bool prepare_resume() { return false; }
};

/// The requests of a provider that can run a response in the background and keep it to be
/// polled, cancelled and streamed again by its id (OpenAI Responses `background: true`).
/// Immutable and thread-safe, like the provider that offers it.
class BackgroundCodec {
public:
    virtual ~BackgroundCodec() = default;

    /// Whether `request` asks for its response to run in the background, so that the provider
    /// keeps it going even if the connection is lost.
    [[nodiscard]] virtual bool runs_in_background(const ChatRequest& request) const = 0;

    /// The request that fetches response `response_id` as it stands; `request` names the model
    /// (and its tools, for decoding). Throws `ProviderCapabilityError` `invalid_response_id` for
    /// an id the API cannot have.
    [[nodiscard]] virtual HttpRequest encode_retrieve(const ChatRequest& request,
                                                      std::string_view response_id) const = 0;

    /// The request that cancels response `response_id`. Throws as `encode_retrieve`.
    [[nodiscard]] virtual HttpRequest encode_cancel(const ChatRequest& request,
                                                    std::string_view response_id) const = 0;

    /// The request that streams response `from.response_id` again, from the event after
    /// `from.sequence_number` (from its start when that is negative). Throws as
    /// `encode_retrieve`.
    [[nodiscard]] virtual HttpRequest encode_resume(const ChatRequest& request,
                                                    const StreamPosition& from) const = 0;

    /// Decodes the answer to a retrieve or a cancel: the response with the `status` it has
    /// reached (`queued` and `in_progress` without content or usage). An error status or a
    /// failed response throws the mapped `Error`; a body that is not a response throws
    /// `ProviderError` `invalid_provider_response`.
    [[nodiscard]] virtual ChatResponse decode_retrieved(const HttpResponse& response,
                                                        const ChatRequest& request) const = 0;

    /// A decoder for the body `encode_resume(request, from)` asks for, when no decoder saw the
    /// events before `from`: its events are those that follow, and its `done` carries the whole
    /// response.
    [[nodiscard]] virtual std::unique_ptr<StreamDecoder> resumed_stream_decoder(
        const ChatRequest& request, const StreamPosition& from) const = 0;
};

/// An adapter for one provider API. Implementations are thread-safe, and their codec does not
/// change after construction (the scripted provider's queue of answers is not its codec).
///
/// A provider is a codec: `encode` makes the HTTP request, `decode` and `stream_decoder` read
/// the answer. The `Client` sends what it encodes through a transport, with retries: the
/// client's, unless the provider brings its own (`transport()`, `retry_policy()`), as the
/// scripted provider does to answer in-process.
class Provider {
public:
    virtual ~Provider() = default;

    /// The provider's name as used in routing and errors: "openai", "anthropic", "gemini", …
    [[nodiscard]] virtual std::string_view name() const noexcept = 0;

    /// What `model` supports through this provider.
    [[nodiscard]] virtual ProviderCapabilities capabilities(std::string_view model) const = 0;

    /// Builds the HTTP request for `request` (streamed or not), which `check_request` has
    /// checked (`Client` checks every request once, before it routes it here; code that calls
    /// a provider directly calls `check_request` first). Throws `ProviderCapabilityError` or
    /// `InvalidOptionError` for what only the encoder can tell (option combinations of this
    /// API, provider option values).
    [[nodiscard]] virtual HttpRequest encode(const ChatRequest& request, bool stream) const = 0;

    /// Decodes a complete response. A non-2xx status or an error body throws the mapped
    /// `Error`; a body that is not what the API documents throws `ProviderError` with code
    /// `invalid_provider_response`.
    [[nodiscard]] virtual ChatResponse decode(const HttpResponse& response,
                                              const ChatRequest& request) const = 0;

    /// A decoder for a streamed 2xx body.
    [[nodiscard]] virtual std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const = 0;

    /// The codec of background responses (polling, cancelling and resuming streams), owned by
    /// the provider; null (the default) when the provider cannot run responses in the
    /// background.
    [[nodiscard]] virtual const BackgroundCodec* background() const noexcept { return nullptr; }

    /// The codec of embedding requests (`Client::embed`), owned by the provider; null (the
    /// default) when the provider has no embeddings API.
    [[nodiscard]] virtual const EmbeddingCodec* embeddings() const noexcept { return nullptr; }

    /// A transport of the provider's own, owned by it, that its requests take instead of the
    /// client's (an in-process answerer, as the scripted provider's); null (the default) for
    /// the client's.
    [[nodiscard]] virtual Transport* transport() const noexcept { return nullptr; }

    /// The retry policy of this provider's requests, owned by it, instead of the client's; null
    /// (the default) for the client's.
    [[nodiscard]] virtual const RetryPolicy* retry_policy() const noexcept { return nullptr; }
};

/// What `Client` checks of every request before it is encoded, once: the options
/// `provider.capabilities(request.model)` rules out (`ProviderCapabilityError`
/// `unsupported_option`), option values (`InvalidOptionError`: `invalid_model`,
/// `invalid_max_tokens`, `invalid_temperature`, `invalid_tool_choice`,
/// `invalid_provider_options`) and the tools, as `define_tool` checks them
/// (`ToolDefinitionError`). Providers trust a checked request.
void check_request(const ChatRequest& request, const Provider& provider, bool stream = false);

}  // namespace ullm
