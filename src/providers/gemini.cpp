#include <ullm/providers/gemini.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/http/line_splitter.hpp>
#include <ullm/http/retry_policy.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <variant>

#include "../core/arithmetic.hpp"
#include "json_readers.hpp"
#include "request_checks.hpp"
#include "response_builder.hpp"

namespace ullm {

namespace {

using detail::count_field;
using detail::string_field;

constexpr std::string_view synthesised_id_prefix = "gemini_call_";
// Gemini accepts at most this many stop sequences.
constexpr std::size_t max_stop_sequences = 5;
// The deepest `partialArgs` jsonPath accepted (the tool layer's argument depth limit).
constexpr std::size_t max_argument_path_depth = 64;

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The model id without the `models/` resource prefix: "models/gemini-2.5-flash" and
// "gemini-2.5-flash" name the same model.
std::string normalise_model(std::string_view model) {
    if (model.starts_with("models/")) model.remove_prefix(7);
    return std::string(model);
}

bool is_model_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '@';
}

// The resource path of `model` in the URL: `models/<id>` or `tunedModels/<id>`. Throws
// `ProviderCapabilityError` (`invalid_model`) for ids that do not belong in a path segment.
std::string model_path(std::string_view model) {
    std::string_view id = model;
    std::string_view collection = "models/";
    if (id.starts_with("models/")) {
        id.remove_prefix(7);
    } else if (id.starts_with("tunedModels/")) {
        id.remove_prefix(12);
        collection = "tunedModels/";
    }
    if (id.empty() || !std::all_of(id.begin(), id.end(), is_model_char)) {
        throw ProviderCapabilityError(
            "invalid_model", "\"" + sanitise_provider_message(model, 200) +
                                 "\" is not a Gemini model id (letters, digits, '-', '.', '_')");
    }
    return std::string(collection) + std::string(id);
}

// The major version of a Gemma model ("gemma-3-27b-it" → 3), or nullopt for other models.
std::optional<int> gemma_generation(std::string_view model) {
    if (!model.starts_with("gemma-") || model.size() < 7) return std::nullopt;
    const char digit = model[6];
    if (digit < '0' || digit > '9') return std::nullopt;
    return digit - '0';
}

// FNV-1a, 32 bits, as 8 hex digits: a short stable tag for synthesised ids.
std::string hash_tag(std::string_view text) {
    std::uint32_t hash = 2166136261u;
    for (const char c : text) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 16777619u;
    }
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(8, '0');
    for (int i = 7; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = digits[hash & 0xFu];
        hash >>= 4;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Schemas: ullm's JSON Schema subset → what Gemini's `parametersJsonSchema` /
// `responseJsonSchema` accept.

// Draft-07 `definitions` become `$defs` (Gemini knows only the latter) unless the root has both.
struct SchemaTranslation {
    bool rename_definitions = false;

    explicit SchemaTranslation(const json& root)
        : rename_definitions(root.is_object() && root.contains("definitions") &&
                             !root.contains("$defs")) {}

    json map(const json& schemas) const {
        if (!schemas.is_object()) return schemas;
        json out = json::object();
        for (const auto& [key, value] : schemas.items()) out[key] = node(value, false);
        return out;
    }

    json list(const json& schemas) const {
        if (!schemas.is_array()) return schemas;
        json out = json::array();
        for (const auto& value : schemas) out.push_back(node(value, false));
        return out;
    }

    std::string ref(const std::string& target) const {
        constexpr std::string_view old_prefix = "#/definitions/";
        if (rename_definitions && target.starts_with(old_prefix))
            return "#/$defs/" + target.substr(old_prefix.size());
        return target;
    }

    json node(const json& schema, bool root) const {
        if (!schema.is_object()) return schema;  // `true` / `false` schemas pass through
        json out = json::object();
        for (const auto& [key, value] : schema.items()) {
            if (key == "definitions" && root && rename_definitions) {
                out["$defs"] = map(value);
            } else if (key == "properties" || key == "$defs" || (key == "definitions" && root)) {
                out[key] = map(value);
            } else if (key == "items" || key == "additionalProperties") {
                out[key] = node(value, false);
            } else if (key == "anyOf" || key == "oneOf" || key == "allOf") {
                out[key] = list(value);
            } else if (key == "$ref" && value.is_string()) {
                out[key] = ref(value.get<std::string>());
            } else {
                out[key] = value;  // keywords and data (enum, default, …) as given
            }
        }
        // Gemini reads `enum` (strings and numbers) but not `const`.
        if (const auto constant = out.find("const");
            constant != out.end() && (constant->is_string() || constant->is_number()) &&
            !out.contains("enum")) {
            out["enum"] = json::array({*constant});
            out.erase("const");
        }
        // Gemini allows nothing but `$…` keywords beside a `$ref`; the validator applies
        // siblings alongside it (2019-09). A one-branch anyOf keeps both meanings.
        if (out.contains("$ref") && !out.contains("anyOf") && !out.contains("oneOf")) {
            json ref_branch = json::object();
            json rest = json::object();
            bool only_dollar_siblings = true;
            for (const auto& [key, value] : out.items()) {
                if (key == "$ref") {
                    ref_branch[key] = value;
                } else {
                    rest[key] = value;
                    only_dollar_siblings = only_dollar_siblings && key.front() == '$';
                }
            }
            if (!only_dollar_siblings) {
                rest["anyOf"] = json::array({std::move(ref_branch)});
                out = std::move(rest);
            }
        }
        return out;
    }
};

// `schema` in the form Gemini's `parametersJsonSchema` / `responseJsonSchema` accept.
json translate_schema(const json& schema) {
    return SchemaTranslation(schema).node(schema, true);
}

// Whether a tool's parameters declare no argument at all (then the declaration goes without a
// schema, the form Gemini documents for argument-less functions).
bool declares_no_arguments(const json& schema) {
    if (!schema.is_object()) return true;
    static const std::set<std::string> trivial = {
        "type",    "properties", "required", "additionalProperties", "description", "title",
        "$schema", "$id",        "$comment"};
    for (const auto& [key, value] : schema.items()) {
        if (trivial.count(key) == 0) return false;
        // `additionalProperties: true` or a schema accepts arguments by other names.
        if (key == "additionalProperties" && value != false) return false;
    }
    const auto properties = schema.find("properties");
    return properties == schema.end() || (properties->is_object() && properties->empty());
}

// ---------------------------------------------------------------------------------------------
// Encoding.

// A Gemini part for an image or document, by value or by reference.
json media_part(const std::string& url, const std::string& data, std::string media_type,
                std::string_view what) {
    if (!data.empty()) return {{"inlineData", {{"mimeType", media_type}, {"data", data}}}};
    if (url.starts_with("data:")) {
        const auto comma = url.find(',');
        const std::string_view header = std::string_view(url).substr(0, comma);
        if (comma == std::string::npos || !ends_with(header, ";base64")) {
            throw ProviderCapabilityError(
                "unsupported_option",
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

// One entry of a model turn's layout (see the header): a canonical part or a verbatim part.
struct LayoutEntry {
    std::optional<std::size_t> part;  // canonical part index
    json raw;                         // the Gemini part, when `part` is empty
    std::string signature;            // thoughtSignature that came on this part
    std::string provider_id;          // the functionCall id Gemini gave
};

json layout_to_json(const std::vector<LayoutEntry>& layout) {
    json parts = json::array();
    for (const auto& entry : layout) {
        json out = json::object();
        if (entry.part) {
            out["part"] = *entry.part;
        } else {
            out["raw"] = entry.raw;
        }
        if (!entry.signature.empty()) out["thoughtSignature"] = entry.signature;
        if (!entry.provider_id.empty()) out["id"] = entry.provider_id;
        parts.push_back(std::move(out));
    }
    return {{"parts", std::move(parts)}};
}

// The layout in `data` when it matches `message` exactly; nullopt otherwise (then the message
// goes out without replay state).
std::optional<std::vector<LayoutEntry>> layout_from_json(const json& data, const Message& message) {
    if (!data.is_object()) return std::nullopt;
    const auto parts = data.find("parts");
    if (parts == data.end() || !parts->is_array()) return std::nullopt;
    std::vector<LayoutEntry> layout;
    std::size_t next_part = 0;
    for (const auto& item : *parts) {
        if (!item.is_object()) return std::nullopt;
        LayoutEntry entry;
        const auto part = item.find("part");
        const auto raw = item.find("raw");
        if ((part == item.end()) == (raw == item.end())) return std::nullopt;
        if (part != item.end()) {
            if (!part->is_number_unsigned() || part->get<std::uint64_t>() != next_part ||
                next_part >= message.parts.size()) {
                return std::nullopt;
            }
            entry.part = next_part++;
        } else {
            if (!raw->is_object()) return std::nullopt;
            entry.raw = *raw;
        }
        for (const auto& [key, value] : item.items()) {
            if (key == "part" || key == "raw") continue;
            if (!value.is_string() || (key != "thoughtSignature" && key != "id")) {
                return std::nullopt;
            }
        }
        entry.signature = string_field(item, "thoughtSignature");
        entry.provider_id = string_field(item, "id");
        if (!entry.provider_id.empty() &&
            (!entry.part || !std::holds_alternative<ToolCallPart>(message.parts[*entry.part]))) {
            return std::nullopt;
        }
        layout.push_back(std::move(entry));
    }
    if (next_part != message.parts.size()) return std::nullopt;
    return layout;
}

// What the encoder knows about a call it sent, to answer it with a functionResponse.
struct SentCall {
    std::string name;
    std::string provider_id;  // empty: send no id
};

class ContentsEncoder {
public:
    ContentsEncoder(std::string_view provider, std::string model)
        : provider_(provider), model_(std::move(model)) {}

    void add(const Message& message) {
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

    void add_system(const std::string& system) {
        if (!system.empty()) system_parts_.push_back({{"text", system}});
    }

    json& contents() { return contents_; }
    json& system_parts() { return system_parts_; }

private:
    void append(const char* role, json parts) {
        if (parts.empty()) return;
        if (!contents_.empty() && contents_.back()["role"] == role) {
            for (auto& part : parts) contents_.back()["parts"].push_back(std::move(part));
            return;
        }
        contents_.push_back({{"role", role}, {"parts", std::move(parts)}});
    }

    json canonical_model_part(const Part& part, const LayoutEntry* entry) {
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
        if (entry != nullptr && !entry->signature.empty())
            out["thoughtSignature"] = entry->signature;
        return out;
    }

    json encode_model_parts(const Message& message) {
        turn_calls_.clear();
        std::optional<std::vector<LayoutEntry>> layout;
        if (message.replay && message.replay->provider == provider_ &&
            normalise_model(message.replay->model) == model_) {
            layout = layout_from_json(message.replay->data, message);
        }
        json parts = json::array();
        if (layout) {
            for (const auto& entry : *layout) {
                json part = entry.part ? canonical_model_part(message.parts[*entry.part], &entry)
                                       : entry.raw;
                if (!part.is_null()) parts.push_back(std::move(part));
            }
        } else {
            for (const auto& part : message.parts) {
                json out = canonical_model_part(part, nullptr);
                if (out.is_null()) continue;
                if (out.contains("text") && out["text"].get_ref<const std::string&>().empty())
                    continue;
                parts.push_back(std::move(out));
            }
        }
        return parts;
    }

    json encode_results(const Message& message) {
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
            function["name"] = sent != calls_.end() && !sent->second.name.empty()
                                   ? sent->second.name
                                   : result.name;
            if (sent != calls_.end() && !sent->second.provider_id.empty())
                function["id"] = sent->second.provider_id;
            function["response"] = std::move(response);
            parts.push_back({{"functionResponse", std::move(function)}});
        }
        return parts;
    }

    std::string_view provider_;
    std::string model_;
    json contents_ = json::array();
    json system_parts_ = json::array();
    std::map<std::string, SentCall> calls_;  // canonical call id → what was sent
    std::vector<std::string> turn_calls_;    // canonical ids of the last model turn's calls
};

// Merges `patch` into `target`: objects key by key, anything else replaced; null removes.
void deep_merge(json& target, const json& patch) {
    if (!target.is_object() || !patch.is_object()) {
        target = patch;
        return;
    }
    for (const auto& [key, value] : patch.items()) {
        if (value.is_null()) {
            target.erase(key);
        } else if (value.is_object() && target.contains(key) && target[key].is_object()) {
            deep_merge(target[key], value);
        } else {
            target[key] = value;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors.

int status_of_grpc(std::string_view status) {
    static const std::map<std::string_view, int> statuses = {
        {"INVALID_ARGUMENT", 400},   {"FAILED_PRECONDITION", 400},
        {"OUT_OF_RANGE", 400},       {"UNAUTHENTICATED", 401},
        {"PERMISSION_DENIED", 403},  {"NOT_FOUND", 404},
        {"ALREADY_EXISTS", 409},     {"ABORTED", 409},
        {"RESOURCE_EXHAUSTED", 429}, {"CANCELLED", 499},
        {"INTERNAL", 500},           {"UNKNOWN", 500},
        {"DATA_LOSS", 500},          {"UNIMPLEMENTED", 501},
        {"UNAVAILABLE", 503},        {"DEADLINE_EXCEEDED", 504},
    };
    const auto it = statuses.find(status);
    return it == statuses.end() ? 0 : it->second;
}

// What an `{"error": …}` value says. `http_status` is the response status (2xx inside a body or
// stream that arrived with 200).
ProviderFailure failure_from_error(const json& error, int http_status,
                                   const HttpResponseHead* head) {
    ProviderFailure failure;
    int status = http_status >= 400 ? http_status : 0;
    std::optional<std::chrono::milliseconds> retry_delay;
    if (error.is_string()) {
        failure.message = error.get<std::string>();
    } else if (error.is_object()) {
        failure.message = string_field(error, "message");
        failure.type = string_field(error, "status");
        if (status == 0) {
            const auto code = count_field(error, "code");
            if (code >= 400 && code <= 599) status = static_cast<int>(code);
        }
        if (status == 0) status = status_of_grpc(failure.type);
        if (const auto details = error.find("details");
            details != error.end() && details->is_array()) {
            for (const auto& detail : *details) {
                const std::string type = string_field(detail, "@type");
                if (ends_with(type, "google.rpc.RetryInfo")) {
                    retry_delay = RetryPolicy::parse_duration(string_field(detail, "retryDelay"));
                } else if (ends_with(type, "google.rpc.ErrorInfo") && failure.code.empty()) {
                    failure.code = string_field(detail, "reason");
                }
            }
        }
    }
    // Gemini answers an invalid API key with 400 INVALID_ARGUMENT; it is a credential failure.
    if (failure.code == "API_KEY_INVALID" && (status == 400 || status == 0)) status = 401;
    // With no status of its own, an error keeps the response's (a redirect is not a 500), and
    // one inside a 200 stream is a server failure.
    if (status == 0 && http_status > 0 && (http_status < 200 || http_status > 299)) {
        status = http_status;
    }
    failure.status = status == 0 ? 500 : status;
    if (head != nullptr) {
        if (const auto value = head->header("retry-after")) {
            failure.retry_after = RetryPolicy::parse_retry_after(*value);
        }
    }
    if (!failure.retry_after) failure.retry_after = retry_delay;
    return failure;
}

// The error value of a body: `{"error": …}`, or the first element's in the array form.
const json* error_of(const json& body) {
    const json* object = &body;
    if (body.is_array() && !body.empty()) object = &body.front();
    if (!object->is_object()) return nullptr;
    const auto error = object->find("error");
    return error == object->end() || error->is_null() ? nullptr : &*error;
}

// ---------------------------------------------------------------------------------------------
// Decoding.

FinishReason map_finish(std::string_view reason) {
    if (reason == "STOP") return FinishReason::stop;
    if (reason == "MAX_TOKENS") return FinishReason::length;
    static const std::set<std::string_view> filtered = {"SAFETY",
                                                        "RECITATION",
                                                        "BLOCKLIST",
                                                        "PROHIBITED_CONTENT",
                                                        "SPII",
                                                        "LANGUAGE",
                                                        "IMAGE_SAFETY",
                                                        "IMAGE_PROHIBITED_CONTENT",
                                                        "IMAGE_RECITATION"};
    if (filtered.count(reason) != 0) return FinishReason::content_filter;
    return FinishReason::error;  // MALFORMED_FUNCTION_CALL, OTHER, and reasons added later
}

bool has_token_counts(const json& usage) {
    static constexpr std::string_view keys[] = {"promptTokenCount", "candidatesTokenCount",
                                                "thoughtsTokenCount", "cachedContentTokenCount",
                                                "toolUsePromptTokenCount"};
    if (!usage.is_object()) return false;
    return std::any_of(std::begin(keys), std::end(keys), [&](std::string_view key) {
        const auto it = usage.find(key);
        return it != usage.end() && it->is_number();
    });
}

Usage decode_usage(const json& usage) {
    Usage out;
    out.input_tokens = detail::saturating_add(count_field(usage, "promptTokenCount"),
                                              count_field(usage, "toolUsePromptTokenCount"));
    out.cached_read_tokens = count_field(usage, "cachedContentTokenCount");
    out.reasoning_tokens = count_field(usage, "thoughtsTokenCount");
    out.output_tokens =
        detail::saturating_add(count_field(usage, "candidatesTokenCount"), out.reasoning_tokens);
    return out;
}

// Hands out canonical ids for the calls of one response.
class CallIds {
public:
    explicit CallIds(const ChatRequest& request) {
        for (const auto& message : request.messages) {
            for (const auto& part : message.parts) {
                if (const auto* call = std::get_if<ToolCallPart>(&part)) {
                    used_.insert(call->id);
                    ++prior_calls_;
                } else if (const auto* result = std::get_if<ToolResultPart>(&part)) {
                    used_.insert(result->tool_call_id);
                }
            }
        }
    }

    /// Gemini's own id when it gave one that is still free; otherwise a synthesised one.
    std::string assign(const std::string& provider_id, const std::string& response_id) {
        if (!provider_id.empty() && used_.insert(provider_id).second) return provider_id;
        const std::string stem =
            response_id.empty() ? std::string(synthesised_id_prefix)
                                : std::string(synthesised_id_prefix) + hash_tag(response_id) + "_";
        std::size_t n = response_id.empty() ? prior_calls_ : 0;
        n += synthesised_;
        std::string id;
        do {
            id = stem + std::to_string(n++);
        } while (!used_.insert(id).second);
        ++synthesised_;
        return id;
    }

private:
    std::set<std::string> used_;
    std::size_t prior_calls_ = 0;
    std::size_t synthesised_ = 0;
};

// Where streamed events go; `out == nullptr` for whole bodies.
struct EventSink {
    std::vector<StreamEvent>* out = nullptr;
    detail::VisibleEvents* visible = nullptr;

    void push(StreamEvent event) const {
        if (out != nullptr) visible->push(*out, std::move(event));
    }
};

// One segment of a `partialArgs` jsonPath: an object key or an array index.
using PathSegment = std::variant<std::string, std::size_t>;

std::optional<std::vector<PathSegment>> parse_json_path(std::string_view path) {
    if (path.empty() || path.front() != '$') return std::nullopt;
    std::vector<PathSegment> segments;
    std::size_t i = 1;
    while (i < path.size()) {
        if (path[i] == '.') {
            const std::size_t start = ++i;
            while (i < path.size() && path[i] != '.' && path[i] != '[') ++i;
            if (i == start) return std::nullopt;
            segments.emplace_back(std::string(path.substr(start, i - start)));
        } else if (path[i] == '[') {
            ++i;
            if (i < path.size() && (path[i] == '\'' || path[i] == '"')) {
                const char quote = path[i++];
                std::string key;
                while (i < path.size() && path[i] != quote) {
                    if (path[i] == '\\' && i + 1 < path.size()) ++i;
                    key.push_back(path[i++]);
                }
                if (i + 1 >= path.size() || path[i + 1] != ']') return std::nullopt;
                i += 2;
                segments.emplace_back(std::move(key));
            } else {
                std::size_t index = 0;
                const std::size_t start = i;
                while (i < path.size() && path[i] >= '0' && path[i] <= '9') {
                    if (index > 1'000'000) return std::nullopt;
                    index = index * 10 + static_cast<std::size_t>(path[i] - '0');
                    ++i;
                }
                if (i == start || i >= path.size() || path[i] != ']') return std::nullopt;
                ++i;
                segments.emplace_back(index);
            }
        } else {
            return std::nullopt;
        }
    }
    return segments;
}

// A call whose arguments are still streaming (`willContinue`).
struct PendingCall {
    std::size_t part = 0;
    json args = json::object();
    std::string open_string_path;  // a string value that continues in the next partial arg
};

// Turns Gemini parts into canonical parts plus the layout that replays them.
class TurnAssembler {
public:
    TurnAssembler(const ChatRequest& request, ErrorOrigin origin)
        : ids_(request), origin_(std::move(origin)) {}

    void set_response_id(const std::string& id) {
        if (response_id_.empty()) response_id_ = id;
        if (origin_.request_id.empty()) origin_.request_id = id;
    }

    void add(const json& part, const EventSink& sink) {
        if (!part.is_object()) return;
        const std::string signature = string_field(part, "thoughtSignature");
        if (const auto call = part.find("functionCall"); call != part.end()) {
            add_call(call->is_object() ? *call : json::object(), signature, sink);
            return;
        }
        close_call(sink);
        const auto text = part.find("text");
        bool other_payload = false;
        for (const auto& [key, value] : part.items()) {
            other_payload = other_payload || (key != "text" && key != "thought" &&
                                              key != "thoughtSignature" && key != "partMetadata");
        }
        if (text != part.end() && text->is_string() && !other_payload) {
            const auto thought = part.find("thought");
            add_text(thought != part.end() && thought->is_boolean() && thought->get<bool>(),
                     text->get_ref<const std::string&>(), signature, sink);
            return;
        }
        // executableCode, codeExecutionResult, inlineData, fileData, …: no canonical form.
        layout_.push_back(LayoutEntry{std::nullopt, part, {}, {}});
    }

    /// Completes a call whose arguments were streaming.
    void close_call(const EventSink& sink) {
        if (!pending_) return;
        auto& call = std::get<ToolCallPart>(parts_[pending_->part]);
        call.arguments = std::move(pending_->args);
        pending_.reset();
        StreamEvent delta = detail::delta_event(
            StreamEvent::Type::tool_call_delta,
            call.arguments.dump(-1, ' ', false, json::error_handler_t::replace));
        delta.tool_call_id = call.id;
        delta.tool_name = call.name;
        sink.push(std::move(delta));
        StreamEvent end;
        end.type = StreamEvent::Type::tool_call_end;
        end.tool_call_id = call.id;
        end.tool_name = call.name;
        end.tool_call = call;
        sink.push(std::move(end));
    }

    [[nodiscard]] const std::vector<Part>& parts() const noexcept { return parts_; }

    /// The replay data, or nullopt when the layout says nothing the parts do not.
    [[nodiscard]] std::optional<json> replay_data() const {
        const bool informative = std::any_of(layout_.begin(), layout_.end(), [](const auto& e) {
            return !e.part || !e.signature.empty() || !e.provider_id.empty();
        });
        if (!informative) return std::nullopt;
        return layout_to_json(layout_);
    }

private:
    template <class PartType>
    static PartType* as(std::vector<Part>& parts, const LayoutEntry& entry) {
        return entry.part ? std::get_if<PartType>(&parts[*entry.part]) : nullptr;
    }

    void add_text(bool thought, const std::string& text, const std::string& signature,
                  const EventSink& sink) {
        const auto type =
            thought ? StreamEvent::Type::reasoning_delta : StreamEvent::Type::text_delta;
        if (!layout_.empty()) {
            auto& last = layout_.back();
            std::string* previous = nullptr;
            if (thought) {
                if (auto* part = as<ReasoningPart>(parts_, last)) previous = &part->text;
            } else if (auto* part = as<TextPart>(parts_, last)) {
                previous = &part->text;
            }
            // Streamed pieces of one part merge; a second, different signature starts a part.
            if (previous != nullptr &&
                (signature.empty() || last.signature.empty() || last.signature == signature)) {
                *previous += text;
                if (!signature.empty()) last.signature = signature;
                if (!text.empty()) sink.push(detail::delta_event(type, text));
                return;
            }
        }
        if (text.empty()) {
            if (signature.empty()) return;
            // A signature with no text to ride on stays its own (empty) part.
            json raw = {{"text", ""}, {"thoughtSignature", signature}};
            if (thought) raw["thought"] = true;
            layout_.push_back(LayoutEntry{std::nullopt, std::move(raw), {}, {}});
            return;
        }
        if (thought) {
            parts_.emplace_back(ReasoningPart{text});
        } else {
            parts_.emplace_back(TextPart{text});
        }
        layout_.push_back(LayoutEntry{parts_.size() - 1, {}, signature, {}});
        sink.push(detail::delta_event(type, text));
    }

    void add_call(const json& call, const std::string& signature, const EventSink& sink) {
        const std::string name = string_field(call, "name");
        if (name.empty()) {
            // The continuation of a streamed call (`partialArgs`, or `{}` closing it).
            if (!pending_) return;
            if (!signature.empty()) {
                auto& entry = layout_[layout_index_of(pending_->part)];
                if (entry.signature.empty()) entry.signature = signature;
            }
            apply_arguments(call);
            if (!continues(call)) close_call(sink);
            return;
        }
        close_call(sink);
        const std::string provider_id = string_field(call, "id");
        ToolCallPart part{ids_.assign(provider_id, response_id_), name, json::object()};
        StreamEvent start;
        start.type = StreamEvent::Type::tool_call_start;
        start.tool_call_id = part.id;
        start.tool_name = part.name;
        parts_.emplace_back(std::move(part));
        layout_.push_back(LayoutEntry{parts_.size() - 1, {}, signature, provider_id});
        sink.push(std::move(start));
        pending_ = PendingCall{parts_.size() - 1, json::object(), {}};
        apply_arguments(call);
        if (!continues(call)) close_call(sink);
    }

    static bool continues(const json& call) {
        const auto it = call.find("willContinue");
        return it != call.end() && it->is_boolean() && it->get<bool>();
    }

    std::size_t layout_index_of(std::size_t part) const {
        for (std::size_t i = layout_.size(); i-- > 0;) {
            if (layout_[i].part == part) return i;
        }
        return layout_.size() - 1;
    }

    void apply_arguments(const json& call) {
        if (const auto args = call.find("args"); args != call.end() && !args->is_null()) {
            // Gemini's args are a Struct; anything else is kept verbatim, as with bad JSON text.
            pending_->args = args->is_object() ? *args : json(args->dump());
        }
        const auto partial = call.find("partialArgs");
        if (partial == call.end() || !partial->is_array()) return;
        for (const auto& argument : *partial) apply_partial_argument(argument);
    }

    void apply_partial_argument(const json& argument) {
        if (!argument.is_object()) return;
        const std::string path = string_field(argument, "jsonPath");
        json value;
        bool is_string = false;
        if (const auto it = argument.find("stringValue"); it != argument.end() && it->is_string()) {
            value = *it;
            is_string = true;
        } else if (const auto number = argument.find("numberValue"); number != argument.end()) {
            value = *number;
        } else if (const auto boolean = argument.find("boolValue"); boolean != argument.end()) {
            value = *boolean;
        } else if (argument.contains("nullValue")) {
            value = nullptr;
        } else {
            return;  // a marker without a value
        }
        const auto segments = parse_json_path(path);
        if (!segments || segments->empty() || segments->size() > max_argument_path_depth ||
            !pending_->args.is_object()) {
            throw_invalid_response("a streamed function call argument has an unusable jsonPath \"" +
                                       sanitise_provider_message(path, 200) + "\"",
                                   origin_);
        }
        json* target = &pending_->args;
        for (const auto& segment : *segments) {
            if (const auto* key = std::get_if<std::string>(&segment)) {
                if (!target->is_object()) *target = json::object();
                target = &(*target)[*key];
            } else {
                const std::size_t index = std::get<std::size_t>(segment);
                if (!target->is_array()) *target = json::array();
                // Elements arrive in order; a far-off index is not a real argument.
                if (index > target->size() + 1024) {
                    throw_invalid_response(
                        "a streamed function call argument index is out of range", origin_);
                }
                while (target->size() <= index) target->push_back(nullptr);
                target = &(*target)[index];
            }
        }
        const bool append = is_string && pending_->open_string_path == path && target->is_string();
        if (append) {
            target->get_ref<std::string&>() += value.get_ref<const std::string&>();
        } else {
            *target = std::move(value);
        }
        const auto more = argument.find("willContinue");
        pending_->open_string_path =
            is_string && more != argument.end() && more->is_boolean() && more->get<bool>() ? path
                                                                                           : "";
    }

    CallIds ids_;
    ErrorOrigin origin_;
    std::string response_id_;
    std::vector<Part> parts_;
    std::vector<LayoutEntry> layout_;
    std::optional<PendingCall> pending_;
};

// Reads GenerateContentResponse objects (a whole body, or the chunks of a stream) into one
// canonical response.
class ResponseReader {
public:
    ResponseReader(std::string provider, const ChatRequest& request, std::string request_id)
        : provider_(std::move(provider)),
          model_(normalise_model(request.model)),
          origin_{provider_, request.model, std::move(request_id)},
          assembler_(request, origin_) {}

    /// Reads one response object. `whole` is true for a generateContent body (which must
    /// carry candidates or a prompt block); `sink` gets the stream events.
    void read(const json& chunk, bool whole, const EventSink& sink) {
        if (!chunk.is_object()) {
            throw_invalid_response(whole ? "the response body is not a JSON object"
                                         : "a stream chunk is not a JSON object",
                                   origin());
        }
        if (const json* error = error_of(chunk)) {
            throw_provider_failure(failure_from_error(*error, 200, nullptr), origin());
        }
        const auto candidates = chunk.find("candidates");
        const auto feedback = chunk.find("promptFeedback");
        const auto usage = chunk.find("usageMetadata");
        const bool has_candidates = candidates != chunk.end() && candidates->is_array();
        const bool has_feedback = feedback != chunk.end() && feedback->is_object();
        const bool has_usage = usage != chunk.end() && usage->is_object();
        if (candidates != chunk.end() && !has_candidates && !candidates->is_null()) {
            throw_invalid_response("\"candidates\" is not an array", origin());
        }
        if (whole ? !((has_candidates && !candidates->empty()) || has_feedback)
                  : !(has_candidates || has_feedback || has_usage)) {
            throw_invalid_response(
                std::string(whole ? "the response body" : "a stream chunk") +
                    " is not a Gemini GenerateContentResponse (no candidates, promptFeedback or "
                    "usageMetadata)",
                origin());
        }
        if (const auto id = string_field(chunk, "responseId"); !id.empty()) {
            if (origin_.request_id.empty()) origin_.request_id = id;
            assembler_.set_response_id(id);
        }
        if (const auto version = string_field(chunk, "modelVersion"); !version.empty())
            builder_.set_model(version);

        if (has_feedback) {
            if (const auto reason = string_field(*feedback, "blockReason"); !reason.empty()) {
                builder_.set_finish(FinishReason::content_filter, reason);
            }
        }
        if (has_candidates) {
            for (const auto& candidate : *candidates) {
                if (!candidate.is_object() || count_field(candidate, "index") != 0) continue;
                read_candidate(candidate, sink);
                break;
            }
        }
        if (has_usage && has_token_counts(*usage)) {
            const Usage next = decode_usage(*usage);
            if (!(next == builder_.usage())) {
                builder_.usage() = next;
                StreamEvent update;
                update.type = StreamEvent::Type::usage_update;
                update.usage = next;
                sink.push(std::move(update));
            }
        }
    }

    [[nodiscard]] bool finished() const noexcept { return builder_.has_finish(); }
    [[nodiscard]] ErrorOrigin origin() const { return origin_; }

    /// Completes any call still streaming (pushing its events to `sink`).
    void close(const EventSink& sink) { assembler_.close_call(sink); }

    [[nodiscard]] ChatResponse build() {
        detail::ResponseBuilder builder = builder_;
        for (const auto& part : assembler_.parts()) {
            if (const auto* text = std::get_if<TextPart>(&part)) builder.add_text(text->text);
            if (const auto* reasoning = std::get_if<ReasoningPart>(&part))
                builder.add_reasoning(reasoning->text);
            if (const auto* call = std::get_if<ToolCallPart>(&part)) builder.add_tool_call(*call);
        }
        if (builder.model().empty()) builder.set_model(model_);
        builder.set_request_id(origin_.request_id);
        if (auto data = assembler_.replay_data()) {
            builder.set_replay(ReplayState{provider_, model_, std::move(*data)});
        }
        ChatResponse response = builder.build(provider_);
        // Text pieces separated by a part with no canonical form stay separate parts.
        response.message.parts = assembler_.parts();
        return response;
    }

private:
    void read_candidate(const json& candidate, const EventSink& sink) {
        if (const auto content = candidate.find("content");
            content != candidate.end() && content->is_object()) {
            if (const auto parts = content->find("parts");
                parts != content->end() && parts->is_array()) {
                for (const auto& part : *parts) assembler_.add(part, sink);
            }
        }
        if (const auto reason = string_field(candidate, "finishReason"); !reason.empty()) {
            assembler_.close_call(sink);
            builder_.set_finish(map_finish(reason), reason);
        }
    }

    std::string provider_;
    std::string model_;
    ErrorOrigin origin_;
    TurnAssembler assembler_;
    detail::ResponseBuilder builder_;
};

class GeminiStreamDecoder final : public StreamDecoder {
public:
    GeminiStreamDecoder(std::string provider, const ChatRequest& request)
        : reader_(std::move(provider), request, {}) {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        if (finished_) return;
        if (mode_ == Mode::undecided) {
            prefix_.append(bytes);
            if (!decide_mode()) return;
            const std::string pending = std::move(prefix_);
            prefix_.clear();
            dispatch(pending, out);
            return;
        }
        dispatch(bytes, out);
    }

    void finish(std::vector<StreamEvent>& out) override {
        if (finished_) return;
        bool clean = true;
        if (mode_ == Mode::sse) clean = parser_.finish().clean();
        if (mode_ == Mode::array) clean = splitter_.finish();
        if (!reader_.finished()) {
            finished_ = true;
            throw StreamTruncatedError(
                mode_ == Mode::undecided ? "the stream ended before any chunk"
                : clean                  ? "the stream ended before a chunk with a finishReason"
                                         : "the stream ended in the middle of a chunk",
                reader_.origin());
        }
        finished_ = true;
        const EventSink sink{&out, &visible_};
        reader_.close(sink);
        visible_.push(out, detail::done_event(reader_.build()));
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_.any(); }

private:
    enum class Mode { undecided, sse, array };

    // Chooses SSE or the JSON-array form from the first significant byte.
    bool decide_mode() {
        static constexpr std::string_view bom = "\xEF\xBB\xBF";
        const std::string_view text = prefix_;
        std::size_t i = 0;
        if (text.size() < bom.size() && bom.substr(0, text.size()) == text) return false;
        if (text.substr(0, bom.size()) == bom) i = bom.size();
        while (i < text.size() &&
               (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) {
            ++i;
        }
        if (i == text.size() && text.size() < (std::size_t{64} << 10)) return false;
        mode_ = i < text.size() && text[i] == '[' ? Mode::array : Mode::sse;
        return true;
    }

    void dispatch(std::string_view bytes, std::vector<StreamEvent>& out) {
        if (mode_ == Mode::sse) {
            parser_.feed(bytes, [&](SseEvent&& event) { on_payload(event.data, out); });
        } else {
            splitter_.feed(bytes, [&](std::string_view element) { on_payload(element, out); });
        }
    }

    void on_payload(std::string_view payload, std::vector<StreamEvent>& out) {
        // Gemini sends no terminator; some proxies add an OpenAI-style one.
        if (finished_ || payload == "[DONE]") return;
        const json chunk = parse_provider_json(payload, reader_.origin(), "a stream chunk");
        reader_.read(chunk, false, EventSink{&out, &visible_});
    }

    ResponseReader reader_;
    detail::VisibleEvents visible_;
    SseParser parser_;
    JsonArrayStreamSplitter splitter_;
    std::string prefix_;
    Mode mode_ = Mode::undecided;
    bool finished_ = false;
};

std::string request_id_header(const HttpResponseHead& head) {
    if (auto id = head.header("x-request-id")) return *id;
    if (auto id = head.header("x-goog-request-id")) return *id;
    return {};
}

}  // namespace

GeminiProvider::GeminiProvider(GeminiOptions options) : options_(std::move(options)) {
    while (!options_.base_url.empty() && options_.base_url.back() == '/')
        options_.base_url.pop_back();
}

std::string_view GeminiProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities GeminiProvider::capabilities(std::string_view model) const {
    const std::string id = normalise_model(model);
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = !(id.starts_with("gemini-1") || id.starts_with("gemini-2.0"));
    if (const auto generation = gemma_generation(id); generation && *generation <= 3) {
        // Gemma 1–3 on the Gemini API have no function calling and no JSON mode.
        capabilities.tools = false;
        capabilities.tool_choice_required = false;
        capabilities.structured_output = false;
        capabilities.reasoning = false;
    }
    return capabilities;
}

json GeminiProvider::encode_body(const ChatRequest& request, bool stream) const {
    detail::check_request(request, capabilities(request.model), name(), stream);
    (void)model_path(request.model);
    if (request.tool_choice && request.tools.empty() &&
        (request.tool_choice->mode == ToolChoice::Mode::required ||
         request.tool_choice->mode == ToolChoice::Mode::tool)) {
        throw ProviderCapabilityError(
            "invalid_tool_choice", "tool_choice forces a tool call but the request has no tools");
    }
    if (request.stop.size() > max_stop_sequences) {
        throw ProviderCapabilityError("unsupported_option",
                                      "gemini takes at most 5 stop sequences; the request has " +
                                          std::to_string(request.stop.size()));
    }
    for (const char* key : {"generationConfig", "toolConfig"}) {
        if (const auto it = request.provider_options.find(key);
            it != request.provider_options.end() && !it->is_object()) {
            throw ProviderCapabilityError(
                "invalid_provider_options",
                std::string("provider_options.") + key + " must be a JSON object");
        }
    }
    if (const auto it = request.provider_options.find("tools");
        it != request.provider_options.end() && !it->is_array()) {
        throw ProviderCapabilityError("invalid_provider_options",
                                      "provider_options.tools must be a JSON array");
    }

    ContentsEncoder encoder(name(), normalise_model(request.model));
    encoder.add_system(request.system);
    for (const auto& message : request.messages) encoder.add(message);

    json body = json::object();
    body["contents"] = std::move(encoder.contents());
    if (!encoder.system_parts().empty())
        body["systemInstruction"] = {{"parts", std::move(encoder.system_parts())}};

    if (!request.tools.empty()) {
        json declarations = json::array();
        for (const auto& tool : request.tools) {
            json declaration = {{"name", tool.name}, {"description", tool.description}};
            if (!declares_no_arguments(tool.parameters))
                declaration["parametersJsonSchema"] = translate_schema(tool.parameters);
            declarations.push_back(std::move(declaration));
        }
        body["tools"] = json::array({{{"functionDeclarations", std::move(declarations)}}});
    }
    if (request.tool_choice && !request.tools.empty()) {
        json config;
        switch (request.tool_choice->mode) {
            case ToolChoice::Mode::automatic:
                config = {{"mode", "AUTO"}};
                break;
            case ToolChoice::Mode::none:
                config = {{"mode", "NONE"}};
                break;
            case ToolChoice::Mode::required:
                config = {{"mode", "ANY"}};
                break;
            case ToolChoice::Mode::tool:
                config = {{"mode", "ANY"},
                          {"allowedFunctionNames", json::array({request.tool_choice->name})}};
                break;
        }
        body["toolConfig"] = {{"functionCallingConfig", std::move(config)}};
    }

    json generation = json::object();
    if (request.max_tokens) generation["maxOutputTokens"] = *request.max_tokens;
    if (request.temperature) generation["temperature"] = *request.temperature;
    if (request.top_p) generation["topP"] = *request.top_p;
    if (!request.stop.empty()) generation["stopSequences"] = request.stop;
    if (request.response_format) {
        generation["responseMimeType"] = "application/json";
        generation["responseJsonSchema"] = translate_schema(request.response_format->schema);
    }
    if (!generation.empty()) body["generationConfig"] = std::move(generation);

    for (const auto& [key, value] : request.provider_options.items()) {
        if (key == "generationConfig" || key == "toolConfig") {
            json& target = body[key];
            if (target.is_null()) target = json::object();
            deep_merge(target, value);
            if (target.empty()) body.erase(key);
        } else if (key == "tools") {
            json& tools = body["tools"];
            if (tools.is_null()) tools = json::array();
            for (const auto& tool : value) tools.push_back(tool);
            if (tools.empty()) body.erase(key);
        } else {
            body[key] = value;
        }
    }
    return body;
}

HttpRequest GeminiProvider::encode(const ChatRequest& request, bool stream) const {
    HttpRequest http;
    http.method = "POST";
    http.body = encode_body(request, stream).dump(-1, ' ', false, json::error_handler_t::replace);
    http.url = options_.base_url + "/" + model_path(request.model) +
               (stream ? ":streamGenerateContent?alt=sse" : ":generateContent");
    http.headers = {{"Content-Type", "application/json"}};
    if (stream) http.headers.emplace_back("Accept", "text/event-stream");
    if (!options_.api_key.empty()) {
        http.headers.emplace_back("x-goog-api-key", options_.api_key);
        http.secrets.push_back(options_.api_key);
    }
    for (const auto& header : options_.extra_headers) http.headers.push_back(header);
    http.connect_timeout = options_.connect_timeout;
    http.idle_timeout = options_.idle_timeout;
    return http;
}

ChatResponse GeminiProvider::decode(const HttpResponse& response,
                                    const ChatRequest& request) const {
    ResponseReader reader(std::string(name()), request, request_id_header(response));
    if (response.status < 200 || response.status > 299) {
        const json body = detail::parse_json_exact(response.body);
        const json* error = body.is_discarded() ? nullptr : error_of(body);
        ProviderFailure failure =
            error != nullptr ? failure_from_error(*error, response.status, &response)
                             : failure_from_error(json(response.body), response.status, &response);
        throw_provider_failure(failure, reader.origin());
    }
    const json body = parse_provider_json(response.body, reader.origin());
    if (const json* error = error_of(body)) {
        throw_provider_failure(failure_from_error(*error, response.status, &response),
                               reader.origin());
    }
    if (body.is_array()) {
        // streamGenerateContent without alt=sse: the body is the array of chunks.
        for (const auto& chunk : body) reader.read(chunk, false, EventSink{});
        if (!reader.finished()) {
            throw_invalid_response("the streamed response body has no chunk with a finishReason",
                                   reader.origin());
        }
    } else {
        reader.read(body, true, EventSink{});
    }
    reader.close(EventSink{});
    return reader.build();
}

std::unique_ptr<StreamDecoder> GeminiProvider::stream_decoder(const ChatRequest& request) const {
    return std::make_unique<GeminiStreamDecoder>(std::string(name()), request);
}

}  // namespace ullm
