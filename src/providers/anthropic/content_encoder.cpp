#include "anthropic_internal.hpp"

#include <ullm/core/error.hpp>

#include <cstdint>
#include <utility>
#include <variant>

#include "../json_readers.hpp"

namespace ullm::detail::anthropic {

namespace {

struct InlineData {
    std::string media_type;
    std::string data;
};

// A `data:` URL split into media type and base64 payload; nullopt for other URLs.
std::optional<InlineData> parse_data_url(std::string_view url, std::string_view provider) {
    if (!url.starts_with("data:")) return std::nullopt;
    const auto comma = url.find(',');
    const std::string_view header =
        url.substr(5, comma == std::string_view::npos ? std::string_view::npos : comma - 5);
    if (comma == std::string_view::npos || !ends_with(header, ";base64")) {
        throw ProviderCapabilityError(
            ErrorCode::unsupported_option,
            std::string(provider) + " accepts only base64 data: URLs for inline content");
    }
    return InlineData{std::string(header.substr(0, header.find(';'))),
                      std::string(url.substr(comma + 1))};
}

std::optional<std::string> decode_base64(std::string_view text) {
    std::string out;
    out.reserve(text.size() / 4 * 3);
    std::uint32_t buffer = 0;
    int bits = 0;
    bool padding = false;
    for (const char c : text) {
        int value = -1;
        if (c >= 'A' && c <= 'Z') value = c - 'A';
        if (c >= 'a' && c <= 'z') value = c - 'a' + 26;
        if (c >= '0' && c <= '9') value = c - '0' + 52;
        if (c == '+' || c == '-') value = 62;
        if (c == '/' || c == '_') value = 63;
        if (c == '=') {
            padding = true;
            continue;
        }
        if (c == '\r' || c == '\n' || c == ' ' || c == '\t') continue;
        if (value < 0 || padding) return std::nullopt;
        buffer = (buffer << 6) | static_cast<std::uint32_t>(value);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out.push_back(static_cast<char>((buffer >> bits) & 0xFFu));
        }
    }
    if (bits >= 6) return std::nullopt;  // a lone trailing character
    return out;
}

json image_block(const ImagePart& image, std::string_view provider) {
    json source;
    if (!image.data.empty()) {
        source = {{"type", "base64"}, {"media_type", image.media_type}, {"data", image.data}};
    } else if (auto inline_data = parse_data_url(image.url, provider)) {
        source = {{"type", "base64"},
                  {"media_type", std::move(inline_data->media_type)},
                  {"data", std::move(inline_data->data)}};
    } else {
        source = {{"type", "url"}, {"url", image.url}};
    }
    return {{"type", "image"}, {"source", std::move(source)}};
}

json document_block(const DocumentPart& document, std::string_view provider) {
    std::string media_type = document.media_type;
    std::string data = document.data;
    if (data.empty()) {
        if (auto inline_data = parse_data_url(document.url, provider)) {
            if (media_type.empty()) media_type = std::move(inline_data->media_type);
            data = std::move(inline_data->data);
        }
    }
    json block = {{"type", "document"}};
    if (data.empty()) {
        block["source"] = {{"type", "url"}, {"url", document.url}};
    } else if (media_type == "application/pdf") {
        block["source"] = {{"type", "base64"}, {"media_type", media_type}, {"data", data}};
    } else if (media_type.starts_with("text/")) {
        // Plain-text documents travel as text, not base64.
        auto text = decode_base64(data);
        if (!text) {
            throw InvalidOptionError(ErrorCode::invalid_document,
                                     "a " + media_type + " document's data is not valid base64");
        }
        block["source"] = {
            {"type", "text"}, {"media_type", "text/plain"}, {"data", std::move(*text)}};
    } else {
        throw ProviderCapabilityError(ErrorCode::unsupported_option,
                                      std::string(provider) +
                                          " accepts PDF and plain-text documents, not \"" +
                                          media_type + "\"");
    }
    if (!document.name.empty()) block["title"] = document.name;
    return block;
}

json tool_result_block(const ToolResultPart& result) {
    json block = {{"type", "tool_result"}, {"tool_use_id", result.tool_call_id}};
    const std::string content = result.result.is_string() ? result.result.get<std::string>()
                                : result.result.is_null() ? std::string()
                                                          : result.result.dump();
    if (!content.empty()) block["content"] = content;
    if (result.is_error) block["is_error"] = true;
    return block;
}

json tool_use_block(const ToolCallPart& call) {
    return {{"type", "tool_use"},
            {"id", call.id},
            {"name", call.name},
            {"input", call.arguments.is_object() ? call.arguments : json::object()}};
}

// The content blocks of a bound replay, when the message still is what the replay recorded
// (same visible text and tool calls); nullopt otherwise.
std::optional<json> replayed_content(const Message& message, std::string_view provider,
                                     const std::string& model) {
    if (!message.replay || message.replay->provider != provider || message.replay->model != model) {
        return std::nullopt;
    }
    const json& data = message.replay->data;
    if (!data.is_object()) return std::nullopt;
    const auto content = data.find("content");
    if (content == data.end() || !content->is_array()) return std::nullopt;
    detail::ResponseBuilder builder;
    try {
        (void)project_content(*content, string_field(data, "stop_reason"), {}, builder);
    } catch (const ProviderError&) {
        return std::nullopt;
    }
    const ChatResponse recorded = std::move(builder).build(std::string(provider));
    if (recorded.text != message.text() || recorded.tool_calls != message.tool_calls()) {
        return std::nullopt;
    }
    json blocks = *content;
    for (auto& block : blocks) {
        // Same rule as for canonical calls: the API takes only object inputs.
        if (takes_input(block) && !block.value("input", json()).is_object()) {
            block["input"] = json::object();
        }
    }
    return blocks;
}

}  // namespace

json text_block(std::string text) {
    return {{"type", "text"}, {"text", std::move(text)}};
}

// A cache_control object given by the caller, or nullopt when none was given.
std::optional<json> cache_control_value(const json& holder, std::string_view key,
                                        const std::string& where) {
    if (!holder.is_object()) return std::nullopt;
    const auto it = holder.find(key);
    if (it == holder.end() || it->is_null()) return std::nullopt;
    if (!it->is_object()) {
        throw InvalidOptionError(ErrorCode::invalid_cache_control,
                                 where +
                                     " must be a JSON object such as "
                                     "{\"type\": \"ephemeral\"}");
    }
    return *it;
}

// Thinking blocks cannot carry cache_control: the breakpoint goes on the last block that can.
void set_cache_control(json& blocks, const json& cache_control) {
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
        const std::string type = string_field(*it, "type");
        if (type == "thinking" || type == "redacted_thinking") continue;
        (*it)["cache_control"] = cache_control;
        return;
    }
}

json assistant_blocks(const Message& message, std::string_view provider, const std::string& model) {
    if (auto replay = replayed_content(message, provider, model)) return std::move(*replay);
    json blocks = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            if (!text->text.empty()) blocks.push_back(text_block(text->text));
        } else if (const auto* call = std::get_if<ToolCallPart>(&part)) {
            blocks.push_back(tool_use_block(*call));
        }
        // Reasoning parts are never sent as text; they only travel inside a bound replay.
    }
    return blocks;
}

json user_blocks(const Message& message, std::string_view provider) {
    json blocks = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            if (!text->text.empty()) blocks.push_back(text_block(text->text));
        } else if (const auto* image = std::get_if<ImagePart>(&part)) {
            blocks.push_back(image_block(*image, provider));
        } else if (const auto* document = std::get_if<DocumentPart>(&part)) {
            blocks.push_back(document_block(*document, provider));
        } else if (const auto* result = std::get_if<ToolResultPart>(&part)) {
            blocks.push_back(tool_result_block(*result));
        }
    }
    return blocks;
}

// Appends a turn, merging it into the previous one when the role repeats. Tool results stay
// at the front of a user turn, as the API requires.
void append_turn(json& messages, std::string_view role, json blocks) {
    if (blocks.empty()) return;
    if (messages.empty() || messages.back()["role"] != std::string(role)) {
        messages.push_back({{"role", role}, {"content", std::move(blocks)}});
        return;
    }
    json& content = messages.back()["content"];
    std::size_t results = 0;
    while (results < content.size() && content[results].value("type", "") == "tool_result") {
        ++results;
    }
    for (auto& block : blocks) {
        if (block.value("type", "") == "tool_result") {
            content.insert(content.begin() + static_cast<json::difference_type>(results),
                           std::move(block));
            ++results;
        } else {
            content.push_back(std::move(block));
        }
    }
}

}  // namespace ullm::detail::anthropic
