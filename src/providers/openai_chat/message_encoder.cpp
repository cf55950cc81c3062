#include "openai_chat_internal.hpp"

#include <utility>
#include <variant>

#include "../openai_common.hpp"

namespace ullm::detail::openai_chat {

namespace {

json encode_user_content(const Message& message) {
    bool text_only = true;
    for (const auto& part : message.parts)
        text_only = text_only && std::holds_alternative<TextPart>(part);
    if (text_only) return message.text();
    json content = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            content.push_back({{"type", "text"}, {"text", text->text}});
        } else if (const auto* image = std::get_if<ImagePart>(&part)) {
            content.push_back(
                {{"type", "image_url"},
                 {"image_url",
                  {{"url",
                    image->url.empty() ? data_url(image->media_type, image->data) : image->url}}}});
        } else if (const auto* document = std::get_if<DocumentPart>(&part)) {
            json file = json::object();
            if (!document->name.empty()) file["filename"] = document->name;
            if (document->data.empty()) {
                file["file_url"] = document->url;
            } else {
                file["file_data"] = data_url(document->media_type, document->data);
            }
            content.push_back({{"type", "file"}, {"file", file}});
        }
    }
    return content;
}

}  // namespace

void encode_message(const Message& message, json& out) {
    switch (message.role) {
        case Role::system:
            out.push_back({{"role", "system"}, {"content", message.text()}});
            return;
        case Role::user:
            out.push_back({{"role", "user"}, {"content", encode_user_content(message)}});
            return;
        case Role::assistant: {
            json entry = {{"role", "assistant"}};
            const std::string text = message.text();
            entry["content"] = text.empty() ? json(nullptr) : json(text);
            json calls = json::array();
            for (const auto& call : message.tool_calls()) {
                calls.push_back(
                    {{"id", call.id},
                     {"type", "function"},
                     {"function",
                      {{"name", call.name},
                       {"arguments", call.arguments.is_string() ? call.arguments.get<std::string>()
                                                                : call.arguments.dump()}}}});
            }
            if (!calls.empty()) entry["tool_calls"] = std::move(calls);
            out.push_back(std::move(entry));
            return;
        }
        case Role::tool:
            for (const auto& result : message.tool_results()) {
                out.push_back({{"role", "tool"},
                               {"tool_call_id", result.tool_call_id},
                               {"content", tool_result_text(result)}});
            }
            return;
    }
}

}  // namespace ullm::detail::openai_chat
