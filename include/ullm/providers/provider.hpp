#pragma once

/// The provider adapter interface: canonical request → HTTP request, HTTP response →
/// canonical response, body bytes → canonical stream events.

#include <ullm/http/http_types.hpp>
#include <ullm/providers/chat.hpp>

#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

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
};

/// Canonical stream events produced without HTTP (by an offline provider). One per stream;
/// not thread-safe.
class EventSource {
public:
    virtual ~EventSource() = default;
    /// Waits for the next event; false once the stream has ended. Throws what the stream
    /// fails with (`CancelledError` once `stop` is requested).
    virtual bool next(StreamEvent& event) = 0;
};

/// An adapter for one provider API. Implementations are immutable after construction and
/// thread-safe.
///
/// HTTP providers implement `encode`, `decode` and `stream_decoder`; the `Client` sends what
/// they encode through its transport, with retries. An offline provider (the scripted one)
/// returns true from `offline()` and answers through `respond` and `respond_stream` instead.
class Provider {
public:
    virtual ~Provider() = default;

    /// The provider's name as used in routing and errors: "openai", "anthropic", "gemini", …
    [[nodiscard]] virtual std::string_view name() const noexcept = 0;

    /// What `model` supports through this provider.
    [[nodiscard]] virtual ProviderCapabilities capabilities(std::string_view model) const = 0;

    /// Builds the HTTP request for `request` (streamed or not). Throws
    /// `ProviderCapabilityError` for options the model does not support and
    /// `ToolDefinitionError` for invalid tools.
    [[nodiscard]] virtual HttpRequest encode(const ChatRequest& request, bool stream) const = 0;

    /// Decodes a complete response. A non-2xx status or an error body throws the mapped
    /// `Error`; a body that is not what the API documents throws `ProviderError` with code
    /// `invalid_provider_response`.
    [[nodiscard]] virtual ChatResponse decode(const HttpResponse& response,
                                              const ChatRequest& request) const = 0;

    /// A decoder for a streamed 2xx body.
    [[nodiscard]] virtual std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const = 0;

    /// Whether this provider answers without HTTP.
    [[nodiscard]] virtual bool offline() const noexcept { return false; }

    /// An offline provider's answer to `request`. HTTP providers throw
    /// `ProviderCapabilityError` (`not_offline`).
    [[nodiscard]] virtual ChatResponse respond(const ChatRequest& request,
                                               std::stop_token stop) const;

    /// An offline provider's streamed answer to `request`. HTTP providers throw
    /// `ProviderCapabilityError` (`not_offline`).
    [[nodiscard]] virtual std::unique_ptr<EventSource> respond_stream(const ChatRequest& request,
                                                                      std::stop_token stop) const;
};

}  // namespace ullm
