#pragma once

/// The Anthropic Messages adapter (`POST /v1/messages`).
///
/// Encoding:
/// - The system prompt goes to the top-level `system` field; canonical system messages found
///   in the history are appended to it in order (the Messages API has no system role).
/// - Canonical `tool` messages become a `user` turn that starts with their `tool_result`
///   blocks; consecutive turns of the same role are merged (tool results always stay first).
/// - An assistant tool call whose arguments are not a JSON object (the model's malformed text,
///   kept verbatim as a string) is sent with `input: {}`: the API accepts only objects, and
///   the tool result that follows already tells the model what was wrong.
/// - Structured output is sent as `output_config.format` (`json_schema`) for the models that
///   support it (Opus 4.1 and Claude 4.5 or later); other models refuse it with
///   `ProviderCapabilityError` `unsupported_option`.
/// - `provider_options` are merged into the body top-level (e.g. `thinking`, `container`,
///   `metadata`, `top_k`), replacing what the adapter wrote, except two keys that the adapter
///   consumes and never sends: `system_cache_control` and `tools_cache_control`.
///
/// Prompt caching (`cache_control`):
/// - On a message: put `{"cache_control": {"type": "ephemeral"}}` (any cache_control object,
///   e.g. with `"ttl": "1h"`) in the canonical message's `metadata`; it is set on the last
///   content block that message produces.
/// - On the system prompt: `provider_options["system_cache_control"]`; the system prompt is
///   then sent as text blocks and the last one carries it.
/// - On the tools: `provider_options["tools_cache_control"]`, set on the last tool.
///
/// Replay state: an assistant reply that holds blocks the canonical parts cannot express
/// (`thinking` with its `signature`, `redacted_thinking`, server tool blocks such as
/// `server_tool_use` / `web_search_tool_result` / `code_execution_tool_result`, MCP blocks,
/// `compaction`, unknown block types) carries `Message::replay` = {provider name, the requested
/// model, data = `{"content": [every content block as received, in order, except `fallback`
/// markers], "stop_reason": …}`}. When that message is sent again to the same provider name
/// and exactly the same model, and its visible text and tool calls are still those of the
/// replay, the content is rebuilt from the replay, so thinking blocks go back unmodified and
/// in their original position. Otherwise the replay is ignored and only the canonical text and
/// tool calls are sent (reasoning parts are never sent as text).
///
/// Decoding:
/// - Visible parts: `text` → text, `thinking` → reasoning (redacted thinking shows nothing),
///   `tool_use` → tool call. Server-executed tools (`server_tool_use`, `*_tool_result`,
///   `mcp_tool_use`, …) never become tool calls: the server ran them. A `tool_use` called from
///   code execution (`caller.type` other than `direct`) is a pending tool call only when the
///   reply stopped with `tool_use`.
/// - `stop_reason`: `end_turn`, `stop_sequence`, `pause_turn` → stop; `max_tokens`,
///   `model_context_window_exceeded` → length; `tool_use` → tool_call; `refusal` →
///   content_filter, with `refusal` set to `stop_details.explanation` (or a generic sentence).
/// - Usage: input = `input_tokens` + `cache_read_input_tokens` +
///   `cache_creation_input_tokens`; cached read / write are the two cache counts; reasoning =
///   `output_tokens_details.thinking_tokens` when reported.
/// - The model is the one that answered: the `to` model of a `fallback` block, else `model`.
/// - Streams: a second `message_start` with the same id is ignored; one with another id while
///   the first message is open (an intermediary spliced a retried generation into the body)
///   throws `StreamTruncatedError`; everything after `message_stop` is ignored; an `error`
///   event throws the mapped error (`overloaded_error` → `provider_overloaded`).

#include <ullm/http/http_types.hpp>
#include <ullm/providers/provider.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// Settings of an `AnthropicProvider`. A value type.
struct AnthropicOptions {
    /// Sent as `x-api-key` when not empty (and listed as a secret of every request).
    std::string api_key;
    /// Everything before `/messages`.
    std::string base_url = "https://api.anthropic.com/v1";
    /// The provider name used in routing, errors and replay binding.
    std::string provider_name = "anthropic";
    /// The `anthropic-version` header.
    std::string anthropic_version = "2023-06-01";
    /// `anthropic-beta` values, sent comma-separated when not empty.
    std::vector<std::string> beta;
    /// Sent with every request.
    HttpHeaders extra_headers;
    /// `max_tokens` when the request sets none (the API requires one). 4096 fits every Claude
    /// model's output limit; when `provider_options.thinking.budget_tokens` is set, the
    /// default becomes budget + 4096 so that thinking leaves room for the answer.
    std::int64_t default_max_tokens = 4096;
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    /// Streams send `ping` events while the model thinks, so two minutes of silence is a
    /// dead connection.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
};

/// Anthropic Messages: encodes canonical requests, decodes bodies and streams. Immutable and
/// thread-safe.
class AnthropicProvider final : public Provider {
public:
    explicit AnthropicProvider(AnthropicOptions options = {});

    [[nodiscard]] std::string_view name() const noexcept override;
    /// Per model: images always; documents from Claude 3.5; reasoning from Claude 3.7;
    /// structured output from Opus 4.1 and Claude 4.5; no temperature or top_p from Opus 4.7
    /// and Claude 5. Model names that are not recognisable Claude ids get every capability
    /// (the server decides).
    [[nodiscard]] ProviderCapabilities capabilities(std::string_view model) const override;
    /// Throws `ProviderCapabilityError` (`unsupported_option`, `invalid_cache_control`,
    /// `invalid_document`, and those of the shared request checks) and `ToolDefinitionError`.
    [[nodiscard]] HttpRequest encode(const ChatRequest& request, bool stream) const override;
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;

    /// The request body alone (what `encode` sends), for inspection and tests.
    [[nodiscard]] json encode_body(const ChatRequest& request, bool stream) const;

    [[nodiscard]] const AnthropicOptions& options() const noexcept { return options_; }

private:
    AnthropicOptions options_;
};

}  // namespace ullm
