#include "request_checks.hpp"

#include "response_schema.hpp"

#include <ullm/core/error.hpp>
#include <ullm/tools/tool.hpp>

#include <cmath>
#include <string>
#include <variant>

namespace ullm::detail {

[[noreturn]] void throw_unsupported(std::string_view provider, const std::string& model,
                                    const std::string& what) {
    throw ProviderCapabilityError(
        ErrorCode::unsupported_option,
        std::string(provider) + " model \"" + model + "\" does not support " + what);
}

void check_request(const ChatRequest& request, const ProviderCapabilities& capabilities,
                   std::string_view provider, bool stream, bool tools_checked) {
    if (request.model.empty()) {
        throw InvalidOptionError(ErrorCode::invalid_model, "the request names no model");
    }
    if (stream && !capabilities.streaming) throw_unsupported(provider, request.model, "streaming");
    if (!request.tools.empty() && !capabilities.tools)
        throw_unsupported(provider, request.model, "tools");
    if (request.tool_choice && request.tool_choice->mode != ToolChoice::Mode::automatic &&
        request.tool_choice->mode != ToolChoice::Mode::none && !capabilities.tool_choice_required) {
        throw_unsupported(provider, request.model, "forcing a tool call");
    }
    if (request.tool_choice && request.tool_choice->mode == ToolChoice::Mode::tool) {
        bool known = false;
        for (const auto& tool : request.tools)
            known = known || tool.name == request.tool_choice->name;
        if (!known) {
            throw InvalidOptionError(ErrorCode::invalid_tool_choice,
                                     "tool_choice names \"" + request.tool_choice->name +
                                         "\", which is not among the request's tools");
        }
    }
    if (request.response_format) {
        if (!capabilities.structured_output) {
            throw_unsupported(provider, request.model, "structured output");
        }
        check_response_schema(*request.response_format, capabilities.response_schema, provider);
    }
    if (request.temperature && !capabilities.temperature) {
        throw_unsupported(provider, request.model, "temperature");
    }
    if (request.top_p && !capabilities.top_p) throw_unsupported(provider, request.model, "top_p");
    if (!request.stop.empty() && !capabilities.stop_sequences) {
        throw_unsupported(provider, request.model, "stop sequences");
    }
    if (request.max_tokens && *request.max_tokens <= 0) {
        throw InvalidOptionError(ErrorCode::invalid_max_tokens,
                                 "max_tokens must be a positive integer");
    }
    if (request.temperature && !std::isfinite(*request.temperature)) {
        throw InvalidOptionError(ErrorCode::invalid_temperature,
                                 "temperature must be a finite number");
    }
    for (const auto& message : request.messages) {
        for (const auto& part : message.parts) {
            if (std::holds_alternative<ImagePart>(part) && !capabilities.images) {
                throw_unsupported(provider, request.model, "image input");
            }
            if (std::holds_alternative<DocumentPart>(part) && !capabilities.documents) {
                throw_unsupported(provider, request.model, "document input");
            }
        }
    }
    if (!request.provider_options.is_object()) {
        throw InvalidOptionError(ErrorCode::invalid_provider_options,
                                 "provider_options must be a JSON object");
    }
    if (!tools_checked) validate_declarations(request.tools);
}

}  // namespace ullm::detail

namespace ullm {

void check_request(const ChatRequest& request, const Provider& provider, bool stream) {
    detail::check_request(request, provider.capabilities(request.model), provider.name(), stream);
}

}  // namespace ullm
