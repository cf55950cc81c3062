#include "gemini_internal.hpp"

#include <ullm/core/error.hpp>

#include <algorithm>
#include <utility>
#include <variant>

namespace ullm::detail::gemini {

namespace {

// A Gemini part for an image or document, by value or by reference.
json media_part(const std::string& url, const std::string& data, std::string media_type,
                std::string_view what) {
    if (!data.empty()) return {{"inlineData", {{"mimeType", media_type}, {"data", data}}}};
    if (url.starts_with("data:")) {
        const auto comma = url.find(',');
        const std::string_view header = std::string_view(url).substr(0, comma);
        if (comma == std::string::npos || !ends_with(header, ";base64")) {
            throw ProviderCapabilityError(
                ErrorCode::unsupported_option,
                "gemini takes " + std::string(what) + " data: URLs only in base64 form");
        }
        const std::string_view type = header.substr(5, header.size() - 5 - 7);
        if (!type.empty()) media_type = std::string(type);
        return {{"inlineData", {{"mimeType", media_type}, {"data", url.substr(comma + 1)}}}};
    }
    json file = {{"fileUri", url}};
    if (media_type.empty()) {
        // Gemini needs a MIME type for URIs outside its Files API; guess the common ones.
        static const std::vector<std::pair<std::string_view, std::string_view>> by_extension = {
            {".png", "image/png"},       {".jpg", "image/jpeg"},  {".jpeg", "image/jpeg"},
            {".gif", "image/gif"},       {".webp", "image/webp"}, {".heic", "image/heic"},
            {".pdf", "application/pdf"}, {".txt", "text/plain"},  {".html", "text/html"},
            {".csv", "text/csv"},        {".md", "text/markdown"}};
        std::string lower;
        const std::string_view path = std::string_view(url).substr(0, url.find_first_of("?#"));
        for (const char c : path)
            lower.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
        for (const auto& [extension, type] : by_extension) {
            if (ends_with(lower, extension)) media_type = std::string(type);
        }
    }
    if (!media_type.empty()) file["mimeType"] = media_type;
    return {{"fileData", std::move(file)}};
}

json encode_user_parts(const Message& message) {
    json parts = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            if (!text->text.empty()) parts.push_back({{"text", text->text}});
        } else if (const auto* image = std::get_if<ImagePart>(&part)) {
            parts.push_back(media_part(image->url, image->data, image->media_type, "image"));
        } else if (const auto* document = std::get_if<DocumentPart>(&part)) {
            parts.push_back(
                media_part(document->url, document->data, document->media_type, "document"));
        }
    }
    return parts;
}

// Gemini's `args` must be an object; arguments the model got wrong (kept as a string) go back
// wrapped so that the model sees what it sent.
json call_args(const json& arguments) {
    if (arguments.is_object()) return arguments;
    if (arguments.is_null()) return json::object();
    return {{"arguments", arguments}};
}

}  // namespace

void ContentsEncoder::add(const Message& message) {
    switch (message.role) {
        case Role::system:
            if (const std::string text = message.text(); !text.empty())
                system_parts_.push_back({{"text", text}});
            return;
        case Role::user:
            append("user", encode_user_parts(message));
            return;
        case Role::assistant:
            append("model", encode_model_parts(message));
            return;
        case Role::tool:
            append("user", encode_results(message));
            return;
    }
}

void ContentsEncoder::add_system(const std::string& system) {
    if (!system.empty()) system_parts_.push_back({{"text", system}});
}

void ContentsEncoder::append(const char* role, json parts) {
    if (parts.empty()) return;
    if (!contents_.empty() && contents_.back()["role"] == role) {
        for (auto& part : parts) contents_.back()["parts"].push_back(std::move(part));
        return;
    }
    contents_.push_back({{"role", role}, {"parts", std::move(parts)}});
}

json ContentsEncoder::canonical_model_part(const Part& part, const LayoutEntry* entry) {
    json out;
    if (const auto* text = std::get_if<TextPart>(&part)) {
        out = {{"text", text->text}};
    } else if (const auto* reasoning = std::get_if<ReasoningPart>(&part)) {
        // Thought summaries go back only with their replay state (same model).
        if (entry == nullptr) return nullptr;
        out = {{"text", reasoning->text}, {"thought", true}};
    } else if (const auto* call = std::get_if<ToolCallPart>(&part)) {
        json function = {{"name", call->name}, {"args", call_args(call->arguments)}};
        SentCall sent{call->name, {}};
        if (entry != nullptr && !entry->provider_id.empty()) {
            function["id"] = entry->provider_id;
            sent.provider_id = entry->provider_id;
        }
        calls_[call->id] = sent;
        turn_calls_.push_back(call->id);
        out = {{"functionCall", std::move(function)}};
    } else {
        return nullptr;  // not an assistant part
    }
    if (entry != nullptr && !entry->signature.empty()) out["thoughtSignature"] = entry->signature;
    return out;
}

json ContentsEncoder::encode_model_parts(const Message& message) {
    turn_calls_.clear();
    std::optional<std::vector<LayoutEntry>> layout;
    if (message.replay && message.replay->provider == provider_ &&
        normalise_model(message.replay->model) == model_) {
        layout = layout_from_json(message.replay->data, message);
    }
    json parts = json::array();
    if (layout) {
        for (const auto& entry : *layout) {
            json part =
                entry.part ? canonical_model_part(message.parts[*entry.part], &entry) : entry.raw;
            if (!part.is_null()) parts.push_back(std::move(part));
        }
    } else {
        for (const auto& part : message.parts) {
            json out = canonical_model_part(part, nullptr);
            if (out.is_null()) continue;
            if (out.contains("text") && out["text"].get_ref<const std::string&>().empty()) continue;
            parts.push_back(std::move(out));
        }
    }
    return parts;
}

json ContentsEncoder::encode_results(const Message& message) {
    std::vector<ToolResultPart> results = message.tool_results();
    // Gemini pairs responses with the calls of the model turn by order: follow the calls'
    // order, whatever order the results came in.
    const auto position = [&](const ToolResultPart& result) {
        const auto it = std::find(turn_calls_.begin(), turn_calls_.end(), result.tool_call_id);
        return static_cast<std::size_t>(it - turn_calls_.begin());
    };
    std::stable_sort(results.begin(), results.end(),
                     [&](const auto& a, const auto& b) { return position(a) < position(b); });
    json parts = json::array();
    for (const auto& result : results) {
        json response;
        if (result.is_error) {
            response = {{"error", result.result}};
        } else if (result.result.is_object()) {
            response = result.result;
        } else {
            response = {{"output", result.result}};
        }
        json function = json::object();
        const auto sent = calls_.find(result.tool_call_id);
        function["name"] =
            sent != calls_.end() && !sent->second.name.empty() ? sent->second.name : result.name;
        if (sent != calls_.end() && !sent->second.provider_id.empty())
            function["id"] = sent->second.provider_id;
        function["response"] = std::move(response);
        parts.push_back({{"functionResponse", std::move(function)}});
    }
    return parts;
}

}  // namespace ullm::detail::gemini
