#pragma once

// Internal to the two OpenAI adapters (Chat Completions and Responses): what both APIs share.

#include <ullm/core/json.hpp>
#include <ullm/core/message.hpp>
#include <ullm/http/http_types.hpp>
#include <ullm/providers/chat.hpp>

#include "provider_request.hpp"

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

namespace ullm::detail {

/// Whether `model` is one of OpenAI's reasoning models (o1, o3, o4, gpt-5 but not
/// gpt-5-chat): they refuse sampling options and can return encrypted reasoning.
bool is_openai_reasoning_model(std::string_view model);

/// `data:<media_type>;base64,<data>`, the inline form of an image or a file.
std::string data_url(const std::string& media_type, const std::string& data);

/// A request to an OpenAI API (or a compatible server) under `options` (any options struct
/// with the organisation and project fields): bearer authentication when a key is set, and
/// the organisation and project headers when set.
template <class Options>
[[nodiscard]] HttpRequest openai_request(const Options& options, ProviderCall call) {
    call.key = {"Authorization", "Bearer "};
    if (!options.organization.empty())
        call.own.emplace_back("OpenAI-Organization", options.organization);
    if (!options.project.empty()) call.own.emplace_back("OpenAI-Project", options.project);
    return provider_request(options, std::move(call));
}

/// The `tool_choice` both OpenAI APIs take; `named` is how the API spells a named function
/// (`{"type":"function","function":{"name":…}}` for Chat, `{"type":"function","name":…}` for
/// Responses).
json openai_tool_choice(const ToolChoice& choice, const json& named);

/// A tool result as both APIs send it back: a string result as it is, anything else as JSON
/// text.
std::string tool_result_text(const ToolResultPart& result);

}  // namespace ullm::detail
