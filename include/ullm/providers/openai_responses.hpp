#pragma once

/// The OpenAI Responses adapter (`POST /responses`), also for the Azure OpenAI, LM Studio and
/// DeepSeek implementations of that API. Requests are stateless: `store: false` and the full
/// history every turn, with the model's encrypted reasoning replayed from the messages'
/// replay sidecar.

#include <ullm/core/json.hpp>
#include <ullm/http/http_types.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ullm {

/// Settings of an `OpenAiResponsesProvider`. A value type.
struct OpenAiResponsesOptions {
    /// Sent as `Authorization: Bearer …` when not empty.
    std::string api_key;
    /// Everything before `/responses`.
    std::string base_url = "https://api.openai.com/v1";
    /// The provider name used in routing, errors and replay binding: "openai", "azure", …
    std::string provider_name = "openai";
    std::string organization;   ///< `OpenAI-Organization` header, when set.
    std::string project;        ///< `OpenAI-Project` header, when set.
    HttpHeaders extra_headers;  ///< Sent with every request (e.g. Azure's `api-key`).
    /// Ask for `include: ["reasoning.encrypted_content"]`, which stateless replay of reasoning
    /// needs. Unset: asked for OpenAI reasoning models (`o1*`, `o3*`, `o4*`, `gpt-5*` except
    /// `gpt-5-chat*`) only, since other models refuse the option.
    std::optional<bool> include_encrypted_reasoning;
    /// The `strict` flag sent with every function tool. Strict mode makes OpenAI constrain
    /// arguments to the schema but refuses schemas outside its subset (every property
    /// required, `additionalProperties: false`), so it is off unless asked for; ullm validates
    /// arguments itself either way.
    bool strict_tools = false;
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
};

/// The Responses API: encodes canonical requests, decodes bodies and streams. Immutable and
/// thread-safe.
///
/// Replay: an assistant message decoded from this provider keeps, in `Message::replay`
/// (`{provider: name(), model: the request's model, data: {"items": […]}}`), its output items
/// in their original order: reasoning items that carry `encrypted_content` (byte for byte),
/// messages (with `phase`) and function calls. It is attached when the turn holds encrypted
/// reasoning or message phases. When a later request to the same provider name and exact model
/// holds that message unchanged (same text, same tool calls), the items are sent back as they
/// came; otherwise only the canonical items are sent and reasoning is dropped. Visible
/// reasoning (summaries, `reasoning_text`) becomes `ReasoningPart` text; encrypted content
/// never appears in parts, events or tool arguments.
///
/// Canonical assistant text is sent as an assistant message with string content (the form the
/// OpenAPI spec's `EasyInputMessage` allows without an item id). A call of an undeclared
/// `parallel` / `multi_tool_use.parallel` function that wraps several calls
/// (`{"tool_uses":[{"recipient_name":"functions.NAME","parameters":{…}}]}`) is decoded as those
/// calls, with ids `<call_id>_<n>`.
///
/// Background mode (`provider_options` `{"background": true}`): `decode` returns a `queued` or
/// `in_progress` response with its `response_id`, and the `BackgroundCodec` this provider also
/// is polls (`GET /responses/{id}`), cancels (`POST /responses/{id}/cancel`) and resumes streams
/// (`GET /responses/{id}?stream=true&starting_after=N`); see `Client::wait_response`.
class OpenAiResponsesProvider final : public Provider, public BackgroundCodec {
public:
    explicit OpenAiResponsesProvider(OpenAiResponsesOptions options = {});

    /// `options().provider_name`; replay state is bound to it.
    [[nodiscard]] std::string_view name() const noexcept override;

    /// Everything but stop sequences, which the Responses API does not have; no temperature or
    /// top_p for OpenAI reasoning models.
    [[nodiscard]] ProviderCapabilities capabilities(std::string_view model) const override;

    /// Also throws `ProviderCapabilityError` `invalid_max_tokens` below 16, the API's minimum.
    [[nodiscard]] HttpRequest encode(const ChatRequest& request, bool stream) const override;

    /// A body whose `status` is `failed`, or an error body, throws the mapped `Error`; a body
    /// without an `output` array throws `ProviderError` `invalid_provider_response`. A
    /// background response that is `queued` or `in_progress` is returned with that `status`,
    /// its `response_id`, no content and zero usage (its output may be absent); a `cancelled`
    /// one with that status and the content it had.
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;

    /// The decoder ends at `response.completed` or `response.incomplete` (one `done`, built from
    /// the terminal event's `response` when it holds output, else from the streamed items);
    /// `error` and `response.failed` events throw the mapped `Error` once; events it does not
    /// know are ignored. Every event's `sequence_number` is copied to the canonical events it
    /// yields. A background stream (`background: true` in the request's `provider_options` or
    /// in the streamed response) can be resumed: its decoder has a `resume_position()` once
    /// the response told its id, and after `prepare_resume()` it ignores the events it has
    /// already seen. A `response.cancelled` event throws `ProviderError` `response_cancelled`.
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;

    /// This provider itself.
    [[nodiscard]] const BackgroundCodec* background() const noexcept override { return this; }

    /// `provider_options` holds `background: true`.
    [[nodiscard]] bool runs_in_background(const ChatRequest& request) const override;

    /// `GET {base_url}/responses/{id}`, with `include[]=reasoning.encrypted_content` when
    /// `encode` would ask for it. Throws `ProviderCapabilityError` `invalid_response_id` for an
    /// id that is empty, longer than 256 characters or holds anything but ASCII letters, digits,
    /// `_` and `-`.
    [[nodiscard]] HttpRequest encode_retrieve(const ChatRequest& request,
                                              std::string_view response_id) const override;

    /// `POST {base_url}/responses/{id}/cancel`, without a body. Throws as `encode_retrieve`.
    [[nodiscard]] HttpRequest encode_cancel(const ChatRequest& request,
                                            std::string_view response_id) const override;

    /// `GET {base_url}/responses/{id}?stream=true&starting_after=N` (no `starting_after` when
    /// `from.sequence_number` is negative), asking for an event stream. Throws as
    /// `encode_retrieve`.
    [[nodiscard]] HttpRequest encode_resume(const ChatRequest& request,
                                            const StreamPosition& from) const override;

    /// As `decode`.
    [[nodiscard]] ChatResponse decode_retrieved(const HttpResponse& response,
                                                const ChatRequest& request) const override;

    /// A decoder that joins a background stream after event `from.sequence_number`: text goes
    /// on from there (a part begun before is never caught up from its `.done` event), a call
    /// whose start came before is streamed whole when its item is done, the calls that ended
    /// before are started and ended again before `done`, and `done` carries the whole
    /// response from the terminal event.
    [[nodiscard]] std::unique_ptr<StreamDecoder> resumed_stream_decoder(
        const ChatRequest& request, const StreamPosition& from) const override;

    /// Embeddings through `POST {base_url}/embeddings`, the codec `OpenAiChatProvider` uses
    /// (base64 vectors for provider names "openai" and "openai-responses", at most 2,048 inputs
    /// a request).
    [[nodiscard]] const EmbeddingCodec* embeddings() const noexcept override;

    /// The request body alone (what `encode` sends), for inspection and tests. Throws as
    /// `encode` does.
    [[nodiscard]] json encode_body(const ChatRequest& request, bool stream) const;

    /// The settings, with any trailing `/` removed from `base_url`.
    [[nodiscard]] const OpenAiResponsesOptions& options() const noexcept { return options_; }

private:
    // The GET (or, with a `suffix`, POST) of one stored response.
    [[nodiscard]] HttpRequest background_request(const ChatRequest& request,
                                                 std::string_view response_id,
                                                 std::string_view suffix, bool stream,
                                                 std::int64_t starting_after) const;

    OpenAiResponsesOptions options_;
    std::shared_ptr<const EmbeddingCodec> embeddings_;
};

}  // namespace ullm
