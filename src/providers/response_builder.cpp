#include "response_builder.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/tools/tool.hpp>

#include <cmath>

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

ChatResponse ResponseBuilder::build(std::string provider) const {
    ChatResponse response;
    response.message.role = Role::assistant;
    response.message.parts = parts_;
    response.message.replay = replay_;
    for (const auto& part : parts_) {
        if (const auto* text = std::get_if<TextPart>(&part)) response.text += text->text;
        if (const auto* reasoning = std::get_if<ReasoningPart>(&part)) {
            response.reasoning_text += reasoning->text;
        }
        if (const auto* call = std::get_if<ToolCallPart>(&part))
            response.tool_calls.push_back(*call);
    }
    response.finish_reason = finish_.value_or(FinishReason::stop);
    if (response.finish_reason == FinishReason::stop && !response.tool_calls.empty()) {
        response.finish_reason = FinishReason::tool_call;
    }
    response.raw_finish_reason = raw_finish_;
    response.usage = usage_;
    response.model = model_;
    response.provider = std::move(provider);
    response.request_id = request_id_;
    response.refusal = refusal_;
    return response;
}

StreamEvent delta_event(StreamEvent::Type type, std::string_view text) {
    StreamEvent event;
    event.type = type;
    event.delta = std::string(text);
    return event;
}

StreamEvent done_event(ChatResponse response) {
    StreamEvent event;
    event.type = StreamEvent::Type::done;
    event.usage = response.usage;
    event.response = std::move(response);
    return event;
}

std::int64_t count_field(const json& object, std::string_view key) {
    if (!object.is_object()) return 0;
    const auto it = object.find(key);
    if (it == object.end()) return 0;
    if (it->is_number_unsigned()) {
        const auto value = it->get<std::uint64_t>();
        return value > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX
                                                             : static_cast<std::int64_t>(value);
    }
    if (it->is_number_integer()) return std::max<std::int64_t>(0, it->get<std::int64_t>());
    if (it->is_number_float()) {
        const double value = it->get<double>();
        if (!std::isfinite(value) || value <= 0) return 0;
        return value >= 9.2e18 ? INT64_MAX : static_cast<std::int64_t>(value);
    }
    return 0;
}

std::string string_field(const json& object, std::string_view key) {
    if (!object.is_object()) return {};
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

namespace {

[[noreturn]] void unsupported(std::string_view provider, const std::string& model,
                              const std::string& what) {
    throw ProviderCapabilityError("unsupported_option", std::string(provider) + " model \"" +
                                                            model + "\" does not support " + what);
}

}  // namespace

void check_request(const ChatRequest& request, const ProviderCapabilities& capabilities,
                   std::string_view provider, bool stream) {
    if (request.model.empty()) {
        throw ProviderCapabilityError("invalid_model", "the request names no model");
    }
    if (stream && !capabilities.streaming) unsupported(provider, request.model, "streaming");
    if (!request.tools.empty() && !capabilities.tools)
        unsupported(provider, request.model, "tools");
    if (request.tool_choice && request.tool_choice->mode != ToolChoice::Mode::automatic &&
        request.tool_choice->mode != ToolChoice::Mode::none && !capabilities.tool_choice_required) {
        unsupported(provider, request.model, "forcing a tool call");
    }
    if (request.tool_choice && request.tool_choice->mode == ToolChoice::Mode::tool) {
        bool known = false;
        for (const auto& tool : request.tools)
            known = known || tool.name == request.tool_choice->name;
        if (!known) {
            throw ProviderCapabilityError("invalid_tool_choice",
                                          "tool_choice names \"" + request.tool_choice->name +
                                              "\", which is not among the request's tools");
        }
    }
    if (request.response_format && !capabilities.structured_output) {
        unsupported(provider, request.model, "structured output");
    }
    if (request.temperature && !capabilities.temperature) {
        unsupported(provider, request.model, "temperature");
    }
    if (request.top_p && !capabilities.top_p) unsupported(provider, request.model, "top_p");
    if (!request.stop.empty() && !capabilities.stop_sequences) {
        unsupported(provider, request.model, "stop sequences");
    }
    if (request.max_tokens && *request.max_tokens <= 0) {
        throw ProviderCapabilityError("invalid_max_tokens",
                                      "max_tokens must be a positive integer");
    }
    if (request.temperature && !std::isfinite(*request.temperature)) {
        throw ProviderCapabilityError("invalid_temperature", "temperature must be a finite number");
    }
    for (const auto& message : request.messages) {
        for (const auto& part : message.parts) {
            if (std::holds_alternative<ImagePart>(part) && !capabilities.images) {
                unsupported(provider, request.model, "image input");
            }
            if (std::holds_alternative<DocumentPart>(part) && !capabilities.documents) {
                unsupported(provider, request.model, "document input");
            }
        }
    }
    if (!request.provider_options.is_object()) {
        throw ProviderCapabilityError("invalid_provider_options",
                                      "provider_options must be a JSON object");
    }
    validate_declarations(request.tools);
}

}  // namespace ullm::detail
