#pragma once

// Internal to the Anthropic adapter (anthropic.cpp): what its components share, one source file
// each in this folder.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "../response_builder.hpp"

namespace ullm::detail::anthropic {

inline bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// ---------------------------------------------------------------------------------------------
// Model generations (claude_model.cpp)

// What a Claude model id says about its generation: "claude-3-5-sonnet-20241022" is 3.5,
// "claude-sonnet-4-20250514" 4.0, "claude-opus-4-1-20250805" 4.1, "claude-sonnet-4-5" 4.5.
struct ClaudeModel {
    bool known = false;
    int major = 0;
    int minor = 0;
    std::string family;  // "opus", "sonnet", "haiku", …

    [[nodiscard]] int version() const noexcept { return major * 10 + minor; }
    // Opus 4.1 and every 4.5+ model: structured output, and temperature and top_p exclusive.
    [[nodiscard]] bool modern() const noexcept {
        return version() >= 45 || (family == "opus" && version() >= 41);
    }
};

ClaudeModel parse_claude_model(std::string_view model);

// ---------------------------------------------------------------------------------------------
// Encoding (content_encoder.cpp)

json text_block(std::string text);

// `schema` as Anthropic's structured output takes it (output_schema.cpp): every object gets
// `additionalProperties: false` where it has none, and the bounds Anthropic refuses are
// removed and said in the description instead (the reply is checked against them locally).
json output_schema(const json& schema);

// The tool that carries the answer of a structured-output request to a Claude model without
// native structured output (before Opus 4.1 and 4.5): the response format's name, or empty
// when the request has no format or the model takes `output_config`.
std::string result_tool_of(const ChatRequest& request);

// A cache_control object given by the caller, or nullopt when none was given.
std::optional<json> cache_control_value(const json& holder, std::string_view key,
                                        const std::string& where);

// Thinking blocks cannot carry cache_control: the breakpoint goes on the last block that can.
void set_cache_control(json& blocks, const json& cache_control);

json assistant_blocks(const Message& message, std::string_view provider, const std::string& model);

json user_blocks(const Message& message, std::string_view provider);

// Appends a turn, merging it into the previous one when the role repeats. Tool results stay
// at the front of a user turn, as the API requires.
void append_turn(json& messages, std::string_view role, json blocks);

// ---------------------------------------------------------------------------------------------
// Errors (error_mapping.cpp)

// `{"type":"error","error":{"type":…,"message":…},"request_id":…}`. For an error inside a 2xx
// body or stream, the status is the one the error type implies.
ProviderFailure failure_from_body(const json& body, int status);

// ---------------------------------------------------------------------------------------------
// Decoding (message_decoder.cpp, stream_decoder.cpp)

// Anthropic's usage counts as last reported; newer API versions repeat input and cache counts
// in message_delta, so every field present overrides the previous value.
struct RawUsage {
    std::int64_t input = 0;
    std::int64_t cache_read = 0;
    std::int64_t cache_write = 0;
    std::int64_t output = 0;
    std::int64_t thinking = 0;

    void update(const json& usage);

    [[nodiscard]] Usage canonical() const;
};

bool takes_input(const json& block);

// A tool_use block called from code execution rather than directly by the model.
bool is_programmatic(const json& block);

ToolCallPart tool_call_from_block(const json& block, std::size_t index, const ErrorOrigin& origin);

// What a content block array amounts to beyond the parts it adds to the builder.
struct Projection {
    bool needs_replay = false;
    bool answered_by_result_tool = false;  // the result tool's input is the reply text
    bool other_tool_calls = false;         // a tool the caller runs was called
    std::string answered_model;            // the `to` model of a fallback block
    json replay_blocks = json::array();
};

// Adds the visible parts of `content` to `builder`, in order. Shared by the body decoder, the
// stream decoder (on the blocks it assembled) and the replay check, so all three agree. A call
// of `result_tool` (see `result_tool_of`) is the reply: its input becomes the text, in place of
// any text blocks, and it is replayed as text.
Projection project_content(const json& content, std::string_view stop_reason,
                           const ErrorOrigin& origin, detail::ResponseBuilder& builder,
                           std::string_view result_tool = {});

struct MessageSummary {
    std::string stop_reason;
    json stop_details;
    RawUsage usage;
    std::string model;
    std::string request_id;
    std::string replay_model;
};

ChatResponse finish_response(detail::ResponseBuilder& builder, const Projection& projection,
                             const MessageSummary& summary, const std::string& provider);

/// What a text delta event says.
struct TextDelta {
    std::int64_t index = -1;
    std::string text;
};

/// Reads `data` when it is exactly a text delta event, {"type":"content_block_delta","index":N,
/// "delta":{"type":"text_delta","text":"…"}} with no other key and none twice, without building
/// a DOM (text_delta_reader.cpp). Returns false for anything else, invalid JSON included: the
/// general decoder then reads it (and reports its errors).
[[nodiscard]] bool read_text_delta(std::string_view data, TextDelta& out);

/// The decoder of a Messages stream (SSE); a call of `result_tool` streams as text.
std::unique_ptr<StreamDecoder> make_stream_decoder(std::string provider, std::string model,
                                                   std::string result_tool = {});

}  // namespace ullm::detail::anthropic
