#pragma once

// Internal to the provider adapters: assembles a canonical ChatResponse from the pieces a
// provider sends (whole or streamed), so every adapter builds messages the same way.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/providers/chat.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::detail {

/// Parses the text of a tool call's arguments: an empty text is `{}`, a JSON object is kept
/// as parsed, anything else (invalid JSON, an array, a number) is kept verbatim as a JSON
/// string so the tool loop can tell the model its arguments were malformed.
json parse_tool_arguments(std::string_view text);

/// Collects parts in arrival order; consecutive text (or reasoning) pieces merge into one part.
class ResponseBuilder {
public:
    void add_text(std::string_view text);
    void add_reasoning(std::string_view text);
    void add_tool_call(ToolCallPart call);
    void add_refusal(std::string_view text);
    void set_finish(FinishReason reason, std::string raw);
    void set_model(std::string model) { model_ = std::move(model); }
    void set_request_id(std::string id) { request_id_ = std::move(id); }
    void set_replay(ReplayState replay) { replay_ = std::move(replay); }
    [[nodiscard]] bool has_finish() const noexcept { return finish_.has_value(); }
    [[nodiscard]] const std::string& model() const noexcept { return model_; }
    Usage& usage() noexcept { return usage_; }

    /// The response, built once at the end: what the builder holds is moved into it. A finish
    /// reason of `stop` becomes `tool_call` when the message holds tool calls (some providers
    /// say "stop" even then).
    [[nodiscard]] ChatResponse build(std::string provider) &&;

private:
    std::vector<Part> parts_;
    std::optional<std::string> refusal_;
    std::optional<FinishReason> finish_;
    std::string raw_finish_;
    std::string model_;
    std::string request_id_;
    std::optional<ReplayState> replay_;
    Usage usage_;
};

/// Keeps track of whether a decoder has produced anything the caller could see.
class VisibleEvents {
public:
    void push(std::vector<StreamEvent>& out, StreamEvent&& event) {
        if (event.type != StreamEvent::Type::usage_update) visible_ = true;
        out.push_back(std::move(event));
    }
    [[nodiscard]] bool any() const noexcept { return visible_; }

private:
    bool visible_ = false;
};

/// A text or reasoning delta event.
StreamEvent delta_event(StreamEvent::Type type, std::string_view text);
/// The same, taking the text over rather than copying it.
StreamEvent delta_event(StreamEvent::Type type, std::string&& text);

/// The `done` event carrying `response`.
StreamEvent done_event(ChatResponse response);

}  // namespace ullm::detail
