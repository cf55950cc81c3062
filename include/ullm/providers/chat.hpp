#pragma once

/// The canonical request, response and stream events every provider adapter translates.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/tools/tool.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// Why the model stopped.
enum class FinishReason { stop, length, tool_call, content_filter, error };

/// "stop", "length", "tool_call", "content_filter" or "error".
[[nodiscard]] std::string_view to_string(FinishReason reason) noexcept;

/// Where a response stands. Only a response run in the background (OpenAI Responses
/// `background: true`) is ever anything but `finished`.
enum class ResponseStatus {
    /// The model is done: content, finish reason and usage are final (the API's `completed`
    /// or `incomplete`; `finish_reason` tells them apart).
    finished,
    /// Accepted and waiting to run: no content, zero usage. `response_id` names it.
    queued,
    /// Running: no content and zero usage yet (they come with the finished response).
    in_progress,
    /// Cancelled before it finished: the content it had by then, finish reason `error`.
    cancelled,
};

/// "finished", "queued", "in_progress" or "cancelled".
[[nodiscard]] inline std::string_view to_string(ResponseStatus status) noexcept {
    switch (status) {
        case ResponseStatus::finished:
            return "finished";
        case ResponseStatus::queued:
            return "queued";
        case ResponseStatus::in_progress:
            return "in_progress";
        case ResponseStatus::cancelled:
            return "cancelled";
    }
    return "finished";
}

/// A tool as a provider advertises it: name, description and JSON-schema parameters.
using ToolSpec = ToolDeclaration;

/// Whether and which tools the model may call.
struct ToolChoice {
    enum class Mode { automatic, none, required, tool };
    Mode mode = Mode::automatic;
    std::string name;  ///< The tool to call when `mode == tool`.

    static ToolChoice automatic() { return {}; }
    static ToolChoice none() { return {Mode::none, {}}; }
    static ToolChoice required() { return {Mode::required, {}}; }
    static ToolChoice tool(std::string name) { return {Mode::tool, std::move(name)}; }
    friend bool operator==(const ToolChoice&, const ToolChoice&) = default;
};

/// Structured output: the reply must be JSON matching `schema`.
struct ResponseFormat {
    std::string name = "response";
    json schema = json::object();
    bool strict = true;
    friend bool operator==(const ResponseFormat&, const ResponseFormat&) = default;
};

/// One model request in canonical form. A value type.
struct ChatRequest {
    std::string model;              ///< The provider's exact model id.
    std::string system;             ///< System prompt; empty for none.
    std::vector<Message> messages;  ///< History without the system prompt.
    std::vector<ToolSpec> tools;    ///< Tools the model may call.
    std::optional<ToolChoice> tool_choice;
    std::optional<std::int64_t> max_tokens;
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::vector<std::string> stop;  ///< Stop sequences.
    std::optional<ResponseFormat> response_format;
    /// Provider-specific body fields, merged into the request body as given (top-level keys
    /// replace what the adapter wrote). For what ullm does not model, e.g. `reasoning_effort`.
    json provider_options = json::object();
};

/// One model response in canonical form. A value type.
struct ChatResponse {
    Message message;             ///< The assistant message (parts in order, replay sidecar).
    std::string text;            ///< All text parts joined.
    std::string reasoning_text;  ///< All visible reasoning joined.
    std::vector<ToolCallPart> tool_calls;
    FinishReason finish_reason = FinishReason::stop;
    std::string raw_finish_reason;  ///< As the provider said it, e.g. "end_turn".
    Usage usage;
    std::string model;  ///< The model that answered, as the provider reports it.
    std::string provider;
    std::string request_id;
    std::optional<std::string> refusal;
    /// Whether the model is done. Anything but `finished` comes only from a background request
    /// (or from `Client::cancel_response`); the finish reason means nothing until then.
    ResponseStatus status = ResponseStatus::finished;
    /// The provider's id of the response (OpenAI Responses `resp_…`), which
    /// `Client::wait_response`, `Client::cancel_response` and `Client::resume_stream` take;
    /// empty when the provider gives none.
    std::string response_id;

    /// `status == ResponseStatus::finished`.
    [[nodiscard]] bool finished() const noexcept { return status == ResponseStatus::finished; }
};

/// One event of a streamed response. Exactly one `done` event ends a successful stream.
struct StreamEvent {
    enum class Type {
        text_delta,        ///< `delta` holds new text.
        reasoning_delta,   ///< `delta` holds new visible reasoning text.
        tool_call_start,   ///< `tool_call_id`, `tool_name` known.
        tool_call_delta,   ///< `delta` holds a fragment of the arguments' JSON text.
        tool_call_end,     ///< `tool_call` complete, arguments parsed.
        usage_update,      ///< `usage` so far.
        retry,             ///< Retried or resumed: `attempt`, `delay`, `error_code`, `resumed`.
        tool_call_result,  ///< A tool ran (conversation streams): `tool_result`.
        done,              ///< `response` holds the final response.
    };

    Type type = Type::text_delta;
    std::string delta;
    std::string tool_call_id;
    std::string tool_name;
    std::optional<ToolCallPart> tool_call;
    std::optional<ToolResultPart> tool_result;
    std::optional<Usage> usage;
    std::optional<ChatResponse> response;
    int attempt = 0;
    std::chrono::milliseconds delay{0};
    std::string error_code;
    /// On a `retry` event: the stream of a background response is picked up where it broke off
    /// rather than started again, so nothing delivered is repeated or to be discarded.
    bool resumed = false;
    /// The provider's sequence number of the event this one came from, when the provider
    /// numbers its events (OpenAI Responses streams); see `Client::resume_stream`.
    std::optional<std::int64_t> sequence_number;

    /// The text delta, or nullptr when this is another kind of event.
    [[nodiscard]] const std::string* text_delta() const {
        return type == Type::text_delta ? &delta : nullptr;
    }
};

/// Where the stream of a response that runs in the background can be picked up again
/// (`ChatStream::resume_position`, `Client::resume_stream`). A value type.
struct StreamPosition {
    std::string response_id;            ///< The provider's id of the response.
    std::int64_t sequence_number = -1;  ///< Of the last event received; -1 before any.
    friend bool operator==(const StreamPosition&, const StreamPosition&) = default;
};

/// "text-delta", "reasoning-delta", "tool-call-start", … as documented for stream events.
[[nodiscard]] std::string_view to_string(StreamEvent::Type type) noexcept;

}  // namespace ullm
