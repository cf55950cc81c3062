#include "openai_responses_internal.hpp"

#include <utility>
#include <variant>

#include "../json_readers.hpp"
#include "../openai_common.hpp"
#include "../response_builder.hpp"

namespace ullm::detail::openai_responses {

namespace {

json encode_user_content(const Message& message) {
    json content = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            content.push_back({{"type", "input_text"}, {"text", text->text}});
        } else if (const auto* image = std::get_if<ImagePart>(&part)) {
            content.push_back(
                {{"type", "input_image"},
                 {"image_url",
                  image->url.empty() ? data_url(image->media_type, image->data) : image->url},
                 {"detail", "auto"}});
        } else if (const auto* document = std::get_if<DocumentPart>(&part)) {
            json file = {{"type", "input_file"}};
            if (document->data.empty()) {
                file["file_url"] = document->url;
                if (!document->name.empty()) file["filename"] = document->name;
            } else {
                // Inline files need a name; the API infers the type from it.
                file["filename"] =
                    document->name.empty() ? std::string("document") : document->name;
                file["file_data"] = data_url(document->media_type, document->data);
            }
            content.push_back(std::move(file));
        }
    }
    return content;
}

// Whether the replayed `items` still describe `message`: the same text and the same tool
// calls in the same order. A message edited since (by the caller or a context manager) is
// sent in canonical form, without its reasoning.
bool replay_matches(const json& items, const Message& message) {
    const std::vector<ToolCallPart> calls = message.tool_calls();
    std::size_t next_call = 0;
    std::string text;
    for (const auto& item : items) {
        if (!item.is_object()) return false;
        const std::string type = string_field(item, "type");
        if (type == "reasoning") {
            if (string_field(item, "id").empty() ||
                string_field(item, "encrypted_content").empty() ||
                array_field(item, "summary") == nullptr) {
                return false;
            }
        } else if (type == "message") {
            const json* content = array_field(item, "content");
            if (content == nullptr) return false;
            for (const auto& part : *content) {
                if (!part.is_object()) return false;
                if (string_field(part, "type") == "output_text") text += string_field(part, "text");
            }
        } else if (type == "function_call") {
            if (next_call >= calls.size()) return false;
            const auto arguments = item.find("arguments");
            if (arguments == item.end() || !arguments->is_string()) return false;
            const ToolCallPart& call = calls[next_call++];
            if (call.id != string_field(item, "call_id") ||
                call.name != string_field(item, "name") ||
                call.arguments != detail::parse_tool_arguments(arguments->get<std::string>())) {
                return false;
            }
        } else {
            return false;
        }
    }
    return next_call == calls.size() && text == message.text();
}

// The replayed output items of `message` when they are bound to this provider and model and
// still match the message; nullptr otherwise.
const json* usable_replay(const Message& message, std::string_view provider,
                          const std::string& model) {
    if (!message.replay || message.replay->provider != provider || message.replay->model != model)
        return nullptr;
    const json* items = array_field(message.replay->data, "items");
    if (items == nullptr || !replay_matches(*items, message)) return nullptr;
    return items;
}

void encode_assistant(const Message& message, std::string_view provider, const std::string& model,
                      json& input) {
    if (const json* items = usable_replay(message, provider, model)) {
        for (const auto& item : *items) input.push_back(item);
        return;
    }
    // Canonical form: text as an assistant message (string content, which the spec's
    // EasyInputMessage allows without an item id), tool calls as function_call items.
    // Visible reasoning is not sent: without its encrypted original it means nothing to the
    // API.
    std::string text;
    const auto flush = [&] {
        if (text.empty()) return;
        input.push_back({{"type", "message"}, {"role", "assistant"}, {"content", text}});
        text.clear();
    };
    for (const auto& part : message.parts) {
        if (const auto* piece = std::get_if<TextPart>(&part)) {
            text += piece->text;
        } else if (const auto* call = std::get_if<ToolCallPart>(&part)) {
            flush();
            input.push_back({{"type", "function_call"},
                             {"call_id", call->id},
                             {"name", call->name},
                             {"arguments", arguments_text(call->arguments)}});
        }
    }
    flush();
}

}  // namespace

std::string arguments_text(const json& arguments) {
    return arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
}

void encode_message(const Message& message, std::string_view provider, const std::string& model,
                    json& input) {
    switch (message.role) {
        case Role::system:
            input.push_back({{"type", "message"}, {"role", "system"}, {"content", message.text()}});
            return;
        case Role::user:
            input.push_back(
                {{"type", "message"}, {"role", "user"}, {"content", encode_user_content(message)}});
            return;
        case Role::assistant:
            encode_assistant(message, provider, model, input);
            return;
        case Role::tool:
            for (const auto& result : message.tool_results()) {
                input.push_back({{"type", "function_call_output"},
                                 {"call_id", result.tool_call_id},
                                 {"output", tool_result_text(result)}});
            }
            return;
    }
}

}  // namespace ullm::detail::openai_responses
