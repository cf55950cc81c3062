#pragma once

/// The canonical message model shared by every layer: roles, content parts and the provider
/// replay state kept beside an assistant message. Messages round-trip losslessly through JSON;
/// parsing is fail-closed and names the JSON path and the constraint that failed.

#include <ullm/core/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ullm {

/// Who wrote a message.
enum class Role { system, user, assistant, tool };

/// The wire name of a role: "system", "user", "assistant" or "tool".
[[nodiscard]] std::string_view to_string(Role role) noexcept;

/// Plain text.
struct TextPart {
    std::string text;
    friend bool operator==(const TextPart&, const TextPart&) = default;
};

/// An image, given either by URL or inline as base64 `data` with its media type.
struct ImagePart {
    std::string url;         ///< An http(s) or data: URL; empty when `data` is set.
    std::string data;        ///< Base64 bytes; empty when `url` is set.
    std::string media_type;  ///< e.g. "image/png"; required with `data`.
    friend bool operator==(const ImagePart&, const ImagePart&) = default;
};

/// A document (e.g. a PDF or plain text file), given by URL or inline as base64 `data`.
struct DocumentPart {
    std::string url;
    std::string data;
    std::string media_type;  ///< e.g. "application/pdf"; required with `data`.
    std::string name;        ///< Optional file name shown to the model.
    friend bool operator==(const DocumentPart&, const DocumentPart&) = default;
};

/// A tool call the model asked for. `arguments` is the parsed JSON object; when the model
/// produced text that is not a JSON object, it is kept verbatim as a JSON string so that the
/// tool loop can tell the model what was wrong.
struct ToolCallPart {
    std::string id;
    std::string name;
    json arguments = json::object();
    friend bool operator==(const ToolCallPart&, const ToolCallPart&) = default;
};

/// The result of one tool call, correlated with it by `tool_call_id` only.
struct ToolResultPart {
    std::string tool_call_id;
    std::string name;
    json result;  ///< Any JSON value; a string for plain-text results.
    bool is_error = false;
    friend bool operator==(const ToolResultPart&, const ToolResultPart&) = default;
};

/// Visible reasoning text ("thinking") the model chose to show.
struct ReasoningPart {
    std::string text;
    friend bool operator==(const ReasoningPart&, const ReasoningPart&) = default;
};

/// One content part of a message.
using Part =
    std::variant<TextPart, ImagePart, DocumentPart, ToolCallPart, ToolResultPart, ReasoningPart>;

/// Opaque provider state that must be replayed with the assistant message it came with
/// (Gemini thought signatures, Anthropic thinking blocks, Responses reasoning items). Bound to
/// the provider and exact model; never shown in history, markdown, events or tool arguments.
struct ReplayState {
    std::string provider;
    std::string model;
    json data;
    friend bool operator==(const ReplayState&, const ReplayState&) = default;
};

/// One message of a conversation. A value type: copy freely; not synchronised.
///
/// Which parts a role may hold: system — text; user — text, image, document; assistant —
/// text, reasoning, tool_call; tool — tool_result.
struct Message {
    Role role = Role::user;
    std::vector<Part> parts;
    json metadata = json::object();  ///< Caller or library annotations (e.g. a summary marker).
    std::optional<ReplayState> replay;

    friend bool operator==(const Message&, const Message&) = default;

    /// A system message holding `text`.
    [[nodiscard]] static Message system(std::string text);
    /// A user message holding `text`.
    [[nodiscard]] static Message user(std::string text);
    /// An assistant message holding `text`.
    [[nodiscard]] static Message assistant(std::string text);
    /// A tool message holding one round's results.
    [[nodiscard]] static Message tool_results(std::vector<ToolResultPart> results);

    /// The concatenation of every text part (reasoning excluded).
    [[nodiscard]] std::string text() const;
    /// The tool calls of this message, in order.
    [[nodiscard]] std::vector<ToolCallPart> tool_calls() const;
    /// The tool results of this message, in order.
    [[nodiscard]] std::vector<ToolResultPart> tool_results() const;
};

/// The canonical JSON form of a part: `{"type": "text", "text": …}` and so on.
[[nodiscard]] json part_to_json(const Part& part);

/// The canonical JSON form of a message. `include_replay` adds the replay sidecar (snapshots
/// only; public exports leave it out).
[[nodiscard]] json message_to_json(const Message& message, bool include_replay = true);

/// Parses a canonical message. Throws `InvalidMessageError` naming the JSON pointer under
/// `path` and the constraint that failed: unknown keys, wrong types, parts a role may not hold,
/// missing fields. Never accepts a partially valid message.
[[nodiscard]] Message parse_message(const json& value, const std::string& path = "");

/// Checks `message` in place by the rules `parse_message` applies to its JSON form (replay
/// state included), without building that form: parts its role may not hold, missing ids,
/// arguments that are neither an object nor text, non-finite numbers or over-deep values,
/// metadata that is not an object. Empty metadata becomes an empty object, as a round trip would
/// leave it. Throws `InvalidMessageError` naming the JSON pointer under `path`.
void validate_message(Message& message, const std::string& path = "");

/// Parses a canonical part under `path`; see `parse_message`.
[[nodiscard]] Part parse_part(const json& value, const std::string& path = "");

/// Parses a JSON array of messages; see `parse_message`.
[[nodiscard]] std::vector<Message> parse_messages(const json& value, const std::string& path = "");

/// nlohmann conversions, so `json(message)` and `value.get<Message>()` work.
void to_json(json& out, const Message& message);
void from_json(const json& in, Message& message);

}  // namespace ullm
