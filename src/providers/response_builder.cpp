#include "response_builder.hpp"

#include <ullm/detail/json_checks.hpp>

#include <utility>
#include <variant>

namespace ullm::detail {

json parse_tool_arguments(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return json::object();
    json value = detail::parse_json_exact(text);
    if (value.is_discarded() || !value.is_object()) return json(std::string(text));
    return value;
}

void ResponseBuilder::add_text(std::string_view text) {
    if (text.empty()) return;
    if (!parts_.empty()) {
        if (auto* last = std::get_if<TextPart>(&parts_.back())) {
            last->text += text;
            return;
        }
    }
    parts_.emplace_back(TextPart{std::string(text)});
}

void ResponseBuilder::add_reasoning(std::string_view text) {
    if (text.empty()) return;
    if (!parts_.empty()) {
        if (auto* last = std::get_if<ReasoningPart>(&parts_.back())) {
            last->text += text;
            return;
        }
    }
    parts_.emplace_back(ReasoningPart{std::string(text)});
}

void ResponseBuilder::add_tool_call(ToolCallPart call) {
    parts_.emplace_back(std::move(call));
}

void ResponseBuilder::add_refusal(std::string_view text) {
    if (text.empty()) return;
    if (!refusal_) refusal_.emplace();
    *refusal_ += text;
}

void ResponseBuilder::set_finish(FinishReason reason, std::string raw) {
    finish_ = reason;
    raw_finish_ = std::move(raw);
}

ChatResponse ResponseBuilder::build(std::string provider) && {
    ChatResponse response;
    response.message.role = Role::assistant;
    for (const auto& part : parts_) {
        if (const auto* text = std::get_if<TextPart>(&part)) response.text += text->text;
        if (const auto* reasoning = std::get_if<ReasoningPart>(&part)) {
            response.reasoning_text += reasoning->text;
        }
        if (const auto* call = std::get_if<ToolCallPart>(&part))
            response.tool_calls.push_back(*call);
    }
    response.message.parts = std::move(parts_);
    response.message.replay = std::move(replay_);
    response.finish_reason = finish_.value_or(FinishReason::stop);
    if (response.finish_reason == FinishReason::stop && !response.tool_calls.empty()) {
        response.finish_reason = FinishReason::tool_call;
    }
    response.raw_finish_reason = std::move(raw_finish_);
    response.usage = usage_;
    response.model = std::move(model_);
    response.provider = std::move(provider);
    response.request_id = std::move(request_id_);
    response.refusal = std::move(refusal_);
    return response;
}

StreamEvent delta_event(StreamEvent::Type type, std::string_view text) {
    return delta_event(type, std::string(text));
}

StreamEvent delta_event(StreamEvent::Type type, std::string&& text) {
    StreamEvent event;
    event.type = type;
    event.delta = std::move(text);
    return event;
}

StreamEvent done_event(ChatResponse response) {
    StreamEvent event;
    event.type = StreamEvent::Type::done;
    event.usage = response.usage;
    event.response = std::move(response);
    return event;
}

}  // namespace ullm::detail
