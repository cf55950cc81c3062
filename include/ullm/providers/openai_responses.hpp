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
class OpenAiResponsesProvider final : public Provider {
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
    /// without an `output` array throws `ProviderError` `invalid_provider_response`.
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;

    /// The decoder ends at `response.completed` or `response.incomplete` (one `done`, built from
    /// the terminal event's `response` when it holds output, else from the streamed items);
    /// `error` and `response.failed` events throw the mapped `Error` once; events it does not
    /// know are ignored.
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;

    /// The request body alone (what `encode` sends), for inspection and tests. Throws as
    /// `encode` does.
    [[nodiscard]] json encode_body(const ChatRequest& request, bool stream) const;

    /// The settings, with any trailing `/` removed from `base_url`.
    [[nodiscard]] const OpenAiResponsesOptions& options() const noexcept { return options_; }

private:
    OpenAiResponsesOptions options_;
};

}  // namespace ullm
