#include <ullm/providers/anthropic.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "../core/arithmetic.hpp"
#include "json_readers.hpp"
#include "request_checks.hpp"
#include "response_builder.hpp"

namespace ullm {

namespace {

using detail::count_field;
using detail::string_field;

// provider_options keys the adapter consumes instead of sending.
constexpr std::string_view system_cache_key = "system_cache_control";
constexpr std::string_view tools_cache_key = "tools_cache_control";

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// ---------------------------------------------------------------------------------------------
// Model generations

// What a Claude model id says about its generation: "claude-3-5-sonnet-20241022" is 3.5,
// "claude-sonnet-4-20250514" 4.0, "claude-opus-4-1-20250805" 4.1, "claude-sonnet-4-5" 4.5.
struct ClaudeModel {
    bool known = false;
    int major = 0;
    int minor = 0;
    std::string family;  // "opus", "sonnet", "haiku", …

    [[nodiscard]] int version() const noexcept { return major * 10 + minor; }
    // Opus 4.1 and every 4.5+ model: structured output, and temperature and top_p exclusive.
    [[nodiscard]] bool modern() const noexcept {
        return version() >= 45 || (family == "opus" && version() >= 41);
    }
};

bool small_number(std::string_view token) {
    return !token.empty() && token.size() <= 2 &&
           std::all_of(token.begin(), token.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

ClaudeModel parse_claude_model(std::string_view model) {
    ClaudeModel out;
    const auto at = model.find("claude-");
    if (at == std::string_view::npos) return out;
    const std::string_view rest = model.substr(at + 7);
    bool after_major = false;
    std::size_t pos = 0;
    while (pos <= rest.size()) {
        std::size_t end = rest.find_first_of("-@:", pos);
        if (end == std::string_view::npos) end = rest.size();
        const std::string_view token = rest.substr(pos, end - pos);
        const auto dot = token.find('.');
        if (small_number(token)) {
            const int value = std::stoi(std::string(token));
            if (!out.known) {
                out.known = true;
                out.major = value;
                after_major = true;
            } else {
                if (after_major) out.minor = std::min(value, 9);
                after_major = false;
            }
        } else if (!out.known && dot != std::string_view::npos &&
                   small_number(token.substr(0, dot)) && small_number(token.substr(dot + 1))) {
            // Legacy ids such as "claude-2.1".
            out.known = true;
            out.major = std::stoi(std::string(token.substr(0, dot)));
            out.minor = std::min(std::stoi(std::string(token.substr(dot + 1))), 9);
            after_major = false;
        } else {
            if (out.family.empty() && !token.empty() &&
                std::isalpha(static_cast<unsigned char>(token.front())) != 0) {
                out.family = std::string(token);
            }
            after_major = false;
        }
        // Bedrock ("…-v2:0") and Vertex ("…@20241022") suffixes end the id proper.
        if (end == rest.size() || rest[end] != '-') break;
        pos = end + 1;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Encoding

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
        throw ProviderCapabilityError("invalid_cache_control", where +
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
            "unsupported_option",
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
            throw ProviderCapabilityError(
                "invalid_document", "a " + media_type + " document's data is not valid base64");
        }
        block["source"] = {
            {"type", "text"}, {"media_type", "text/plain"}, {"data", std::move(*text)}};
    } else {
        throw ProviderCapabilityError(
            "unsupported_option", std::string(provider) +
                                      " accepts PDF and plain-text documents, not \"" + media_type +
                                      "\"");
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

bool takes_input(const json& block) {
    return block.contains("input") || ends_with(string_field(block, "type"), "tool_use");
}

// A tool_use block called from code execution rather than directly by the model.
bool is_programmatic(const json& block) {
    const auto caller = block.find("caller");
    if (caller == block.end() || !caller->is_object()) return false;
    const std::string type = string_field(*caller, "type");
    return !type.empty() && type != "direct";
}

// ---------------------------------------------------------------------------------------------
// Decoding

FinishReason map_stop_reason(std::string_view reason) {
    if (reason == "max_tokens" || reason == "model_context_window_exceeded") {
        return FinishReason::length;
    }
    if (reason == "tool_use") return FinishReason::tool_call;
    if (reason == "refusal") return FinishReason::content_filter;
    return FinishReason::stop;  // end_turn, stop_sequence, pause_turn, unknown
}

// Anthropic's usage counts as last reported; newer API versions repeat input and cache counts
// in message_delta, so every field present overrides the previous value.
struct RawUsage {
    std::int64_t input = 0;
    std::int64_t cache_read = 0;
    std::int64_t cache_write = 0;
    std::int64_t output = 0;
    std::int64_t thinking = 0;

    void update(const json& usage) {
        if (!usage.is_object()) return;
        if (usage.contains("input_tokens")) input = count_field(usage, "input_tokens");
        if (usage.contains("cache_read_input_tokens")) {
            cache_read = count_field(usage, "cache_read_input_tokens");
        }
        if (usage.contains("cache_creation_input_tokens")) {
            cache_write = count_field(usage, "cache_creation_input_tokens");
        }
        if (usage.contains("output_tokens")) output = count_field(usage, "output_tokens");
        if (const auto details = usage.find("output_tokens_details");
            details != usage.end() && details->is_object() &&
            details->contains("thinking_tokens")) {
            thinking = count_field(*details, "thinking_tokens");
        }
    }

    [[nodiscard]] Usage canonical() const {
        Usage out;
        out.input_tokens =
            detail::saturating_add(detail::saturating_add(input, cache_read), cache_write);
        out.output_tokens = output;
        out.cached_read_tokens = cache_read;
        out.cached_write_tokens = cache_write;
        out.reasoning_tokens = std::min(thinking, output);
        return out;
    }
};

int status_for_error_type(std::string_view type) {
    if (type == "invalid_request_error") return 400;
    if (type == "authentication_error") return 401;
    if (type == "billing_error") return 402;
    if (type == "permission_error") return 403;
    if (type == "not_found_error") return 404;
    if (type == "request_too_large") return 413;
    if (type == "rate_limit_error") return 429;
    if (type == "timeout_error") return 504;
    if (type == "overloaded_error") return 529;
    return 500;  // api_error and types we do not know
}

// `{"type":"error","error":{"type":…,"message":…},"request_id":…}`. For an error inside a 2xx
// body or stream, the status is the one the error type implies.
ProviderFailure failure_from_body(const json& body, int status) {
    ProviderFailure failure;
    failure.status = status;
    const json* error = &body;
    if (const auto it = body.find("error"); it != body.end()) {
        if (it->is_object()) {
            error = &*it;
        } else if (it->is_string()) {
            failure.message = it->get<std::string>();
            error = nullptr;
        }
    }
    if (error != nullptr) {
        failure.type = string_field(*error, "type");
        failure.message = string_field(*error, "message");
        if (failure.type == "error") failure.type.clear();
    }
    if (status < 400) failure.status = status_for_error_type(failure.type);
    return failure;
}

std::string refusal_text(const json& stop_details) {
    std::string explanation = string_field(stop_details, "explanation");
    if (!explanation.empty()) return explanation;
    return "The model declined to respond (stop_reason \"refusal\").";
}

ToolCallPart tool_call_from_block(const json& block, std::size_t index, const ErrorOrigin& origin) {
    ToolCallPart call;
    call.id = string_field(block, "id");
    call.name = string_field(block, "name");
    if (call.id.empty() || call.name.empty()) {
        throw_invalid_response("tool_use block " + std::to_string(index) + " has no id or name",
                               origin);
    }
    const auto input = block.find("input");
    if (input == block.end() || input->is_null()) {
        call.arguments = json::object();
    } else if (input->is_object()) {
        call.arguments = *input;
    } else if (input->is_string()) {
        call.arguments = detail::parse_tool_arguments(input->get<std::string>());
    } else {
        call.arguments = json(input->dump());
    }
    return call;
}

// What a content block array amounts to beyond the parts it adds to the builder.
struct Projection {
    bool needs_replay = false;
    std::string answered_model;  // the `to` model of a fallback block
    json replay_blocks = json::array();
};

// Adds the visible parts of `content` to `builder`, in order. Shared by the body decoder, the
// stream decoder (on the blocks it assembled) and the replay check, so all three agree.
Projection project_content(const json& content, std::string_view stop_reason,
                           const ErrorOrigin& origin, detail::ResponseBuilder& builder) {
    Projection projection;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const json& block = content[i];
        if (!block.is_object()) {
            throw_invalid_response("content block " + std::to_string(i) + " is not an object",
                                   origin);
        }
        const std::string type = string_field(block, "type");
        if (type.empty()) {
            throw_invalid_response("content block " + std::to_string(i) + " has no type", origin);
        }
        if (type == "fallback") {
            // Which model answered; not conversation content, so not replayed.
            const auto to = block.find("to");
            if (to != block.end()) {
                const std::string model = string_field(*to, "model");
                if (!model.empty()) projection.answered_model = model;
            }
            continue;
        }
        projection.replay_blocks.push_back(block);
        if (type == "text") {
            builder.add_text(string_field(block, "text"));
        } else if (type == "thinking") {
            builder.add_reasoning(string_field(block, "thinking"));
            projection.needs_replay = true;
        } else if (type == "tool_use") {
            if (is_programmatic(block) && stop_reason != "tool_use") {
                // Called from code execution and already answered there.
                projection.needs_replay = true;
                continue;
            }
            builder.add_tool_call(tool_call_from_block(block, i, origin));
        } else {
            // redacted_thinking, server tools and their results, MCP, compaction, unknown.
            projection.needs_replay = true;
        }
    }
    return projection;
}

struct MessageSummary {
    std::string stop_reason;
    json stop_details;
    RawUsage usage;
    std::string model;
    std::string request_id;
    std::string replay_model;
};

ChatResponse finish_response(detail::ResponseBuilder& builder, const Projection& projection,
                             const MessageSummary& summary, const std::string& provider) {
    builder.set_finish(map_stop_reason(summary.stop_reason), summary.stop_reason);
    if (summary.stop_reason == "refusal") builder.add_refusal(refusal_text(summary.stop_details));
    builder.usage() = summary.usage.canonical();
    builder.set_model(projection.answered_model.empty() ? summary.model
                                                        : projection.answered_model);
    builder.set_request_id(summary.request_id);
    if (projection.needs_replay) {
        builder.set_replay(ReplayState{
            provider, summary.replay_model,
            json{{"content", projection.replay_blocks}, {"stop_reason", summary.stop_reason}}});
    }
    return builder.build(provider);
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
    const ChatResponse recorded = builder.build(std::string(provider));
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

[[noreturn]] void unsupported(std::string_view provider, const std::string& model,
                              const std::string& what) {
    throw ProviderCapabilityError("unsupported_option", std::string(provider) + " model \"" +
                                                            model + "\" does not support " + what);
}

// ---------------------------------------------------------------------------------------------
// Streaming

class AnthropicStreamDecoder final : public StreamDecoder {
public:
    AnthropicStreamDecoder(std::string provider, std::string model)
        : provider_(std::move(provider)), requested_model_(std::move(model)) {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        if (finished_) return;  // anything after message_stop is not part of this message
        parser_.feed(bytes, [&](SseEvent&& event) { on_event(event, out); });
    }

    void finish(std::vector<StreamEvent>& out) override {
        (void)out;
        if (finished_) return;
        const auto end = parser_.finish();
        throw StreamTruncatedError(end.clean() ? "the stream ended before message_stop"
                                               : "the stream ended in the middle of an event",
                                   origin());
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_.any(); }

private:
    struct OpenBlock {
        json block;
        std::string partial_json;
        bool stopped = false;
        bool client_tool = false;  // a tool_use the caller must run
        bool deferred = false;     // called from code execution: surfaced at message_stop
    };

    [[nodiscard]] ErrorOrigin origin(const std::string& request_id = {}) const {
        return {provider_, requested_model_, request_id.empty() ? message_id_ : request_id};
    }

    [[noreturn]] void invalid(const std::string& message) const {
        throw_invalid_response(message, origin());
    }

    void on_event(const SseEvent& event, std::vector<StreamEvent>& out) {
        if (finished_) return;
        const json payload = parse_provider_json(event.data, origin(), "a stream event");
        if (!payload.is_object()) invalid("a stream event is not a JSON object");
        std::string type = string_field(payload, "type");
        if (type.empty()) type = event.event;
        if (type == "message_start") {
            on_message_start(payload, out);
        } else if (type == "content_block_start") {
            const auto block = payload.find("content_block");
            if (block == payload.end() || !block->is_object()) {
                invalid("content_block_start carries no content block");
            }
            start_block(index_of(payload), *block, out);
        } else if (type == "content_block_delta") {
            on_delta(payload, out);
        } else if (type == "content_block_stop") {
            const auto index = index_of(payload);
            if (blocks_.find(index) == blocks_.end()) {
                invalid("content block " + std::to_string(index) + " stopped without a start");
            }
            stop_block(index, out);
        } else if (type == "message_delta") {
            if (const auto delta = payload.find("delta");
                delta != payload.end() && delta->is_object()) {
                if (const auto reason = delta->find("stop_reason");
                    reason != delta->end() && reason->is_string()) {
                    stop_reason_ = reason->get<std::string>();
                }
                if (const auto details = delta->find("stop_details"); details != delta->end()) {
                    stop_details_ = *details;
                }
            }
            update_usage(payload, out);
        } else if (type == "message_stop") {
            complete(out);
        } else if (type == "error") {
            throw_provider_failure(failure_from_body(payload, 200),
                                   origin(string_field(payload, "request_id")));
        }
        // ping and event types this version does not know are ignored.
    }

    void on_message_start(const json& payload, std::vector<StreamEvent>& out) {
        const auto message = payload.find("message");
        if (message == payload.end() || !message->is_object()) {
            invalid("message_start carries no message");
        }
        const std::string id = string_field(*message, "id");
        if (started_) {
            // Some gateways repeat the frame of the same message: harmless.
            if (id == message_id_) return;
            // An intermediary retried upstream and spliced a second generation into this
            // body: the first message was cut off, and its signed thinking must not be mixed
            // with the second's.
            throw StreamTruncatedError("message \"" + message_id_ +
                                           "\" was cut off by the start of another message (\"" +
                                           id + "\") in the same stream",
                                       origin());
        }
        started_ = true;
        message_id_ = id;
        model_ = string_field(*message, "model");
        if (const auto reason = message->find("stop_reason");
            reason != message->end() && reason->is_string()) {
            stop_reason_ = reason->get<std::string>();
        }
        if (const auto content = message->find("content");
            content != message->end() && content->is_array()) {
            // Some servers send blocks already complete inside message_start.
            for (std::size_t i = 0; i < content->size(); ++i) {
                const auto index = static_cast<std::int64_t>(i);
                if (!(*content)[i].is_object()) {
                    invalid("message_start content block " + std::to_string(i) +
                            " is not an object");
                }
                start_block(index, (*content)[i], out);
                stop_block(index, out);
            }
        }
        update_usage(*message, out);
    }

    void update_usage(const json& holder, std::vector<StreamEvent>& out) {
        const auto usage = holder.find("usage");
        if (usage == holder.end() || !usage->is_object()) return;
        usage_.update(*usage);
        StreamEvent update;
        update.type = StreamEvent::Type::usage_update;
        update.usage = usage_.canonical();
        visible_.push(out, std::move(update));
    }

    std::int64_t index_of(const json& payload) const {
        const auto index = payload.find("index");
        if (index != payload.end()) {
            if (index->is_number_unsigned() &&
                index->get<std::uint64_t>() <=
                    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                return static_cast<std::int64_t>(index->get<std::uint64_t>());
            }
            if (index->is_number_integer() && index->get<std::int64_t>() >= 0) {
                return index->get<std::int64_t>();
            }
        }
        invalid("a content block event has no valid index");
    }

    void start_block(std::int64_t index, const json& block, std::vector<StreamEvent>& out) {
        if (const auto it = blocks_.find(index); it != blocks_.end()) {
            // Recorded from the API (code execution with skills): after a server tool result,
            // a start can repeat the index of the block that just stopped while its deltas
            // and stop use the next index. A finished block never restarts, so the start
            // opens the next index.
            if (!it->second.stopped) {
                invalid("content block " + std::to_string(index) + " started twice");
            }
            if (blocks_.rbegin()->first == std::numeric_limits<std::int64_t>::max()) {
                invalid("content block indexes overflow");
            }
            index = blocks_.rbegin()->first + 1;
        }
        OpenBlock open;
        open.block = block;
        const std::string type = string_field(block, "type");
        if (type.empty()) invalid("content block " + std::to_string(index) + " has no type");
        if (type == "text") {
            if (!open.block["text"].is_string()) open.block["text"] = "";
            const auto& text = open.block["text"].get_ref<const std::string&>();
            if (!text.empty()) {
                visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, text));
            }
        } else if (type == "thinking") {
            if (!open.block["thinking"].is_string()) open.block["thinking"] = "";
            const auto& thinking = open.block["thinking"].get_ref<const std::string&>();
            if (!thinking.empty()) {
                visible_.push(out,
                              detail::delta_event(StreamEvent::Type::reasoning_delta, thinking));
            }
        } else if (type == "tool_use") {
            open.client_tool = true;
            open.deferred = is_programmatic(open.block);
            const std::string id = string_field(open.block, "id");
            const std::string name = string_field(open.block, "name");
            if (id.empty() || name.empty()) {
                invalid("tool_use block " + std::to_string(index) + " has no id or name");
            }
            // A second call under one id could be neither answered nor restored.
            if (!tool_call_ids_.insert(id).second) {
                invalid("tool_use block " + std::to_string(index) + " repeats the call id \"" + id +
                        "\"");
            }
            if (!open.deferred) {
                StreamEvent start;
                start.type = StreamEvent::Type::tool_call_start;
                start.tool_call_id = id;
                start.tool_name = name;
                visible_.push(out, std::move(start));
            }
        }
        blocks_.emplace(index, std::move(open));
    }

    void on_delta(const json& payload, std::vector<StreamEvent>& out) {
        const auto index = index_of(payload);
        const auto it = blocks_.find(index);
        if (it == blocks_.end()) {
            invalid("a delta for content block " + std::to_string(index) +
                    ", which was never started");
        }
        OpenBlock& open = it->second;
        if (open.stopped) {
            invalid("a delta for content block " + std::to_string(index) + " after its stop");
        }
        const auto delta = payload.find("delta");
        if (delta == payload.end() || !delta->is_object()) {
            invalid("content_block_delta carries no delta");
        }
        const std::string type = string_field(*delta, "type");
        const std::string block_type = string_field(open.block, "type");
        const auto expect = [&](bool fits) {
            if (!fits) {
                invalid("a " + type + " for a " + block_type + " block (content block " +
                        std::to_string(index) + ")");
            }
        };
        if (type == "text_delta") {
            expect(block_type == "text");
            const std::string text = string_field(*delta, "text");
            open.block["text"].get_ref<std::string&>() += text;
            if (!text.empty()) {
                visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, text));
            }
        } else if (type == "thinking_delta") {
            expect(block_type == "thinking");
            const std::string thinking = string_field(*delta, "thinking");
            open.block["thinking"].get_ref<std::string&>() += thinking;
            if (!thinking.empty()) {
                visible_.push(out,
                              detail::delta_event(StreamEvent::Type::reasoning_delta, thinking));
            }
        } else if (type == "signature_delta") {
            // Kept for replay only: a signature never shows in an event.
            expect(block_type == "thinking");
            json& signature = open.block["signature"];
            if (!signature.is_string()) signature = "";
            signature.get_ref<std::string&>() += string_field(*delta, "signature");
        } else if (type == "input_json_delta") {
            expect(takes_input(open.block));
            const std::string fragment = string_field(*delta, "partial_json");
            open.partial_json += fragment;
            if (open.client_tool && !open.deferred && !fragment.empty()) {
                StreamEvent event =
                    detail::delta_event(StreamEvent::Type::tool_call_delta, fragment);
                event.tool_call_id = string_field(open.block, "id");
                event.tool_name = string_field(open.block, "name");
                visible_.push(out, std::move(event));
            }
        } else if (type == "citations_delta") {
            expect(block_type == "text");
            if (const auto citation = delta->find("citation"); citation != delta->end()) {
                json& citations = open.block["citations"];
                if (!citations.is_array()) citations = json::array();
                citations.push_back(*citation);
            }
        } else if (type == "compaction_delta") {
            expect(block_type == "compaction");
            json& content = open.block["content"];
            if (!content.is_string()) content = "";
            content.get_ref<std::string&>() += string_field(*delta, "content");
        }
        // Delta types this version does not know are ignored.
    }

    // The arguments text a tool call's events carry when no fragments were streamed.
    static std::string whole_arguments_text(const json& input) {
        if (input.is_string()) return input.get<std::string>();
        if (input.is_object() && !input.empty()) return input.dump();
        return {};
    }

    void emit_tool_call(const OpenBlock& open, std::int64_t index, bool with_start,
                        bool with_arguments, std::vector<StreamEvent>& out) {
        ToolCallPart call =
            tool_call_from_block(open.block, static_cast<std::size_t>(index), origin());
        if (with_start) {
            StreamEvent start;
            start.type = StreamEvent::Type::tool_call_start;
            start.tool_call_id = call.id;
            start.tool_name = call.name;
            visible_.push(out, std::move(start));
        }
        if (with_arguments) {
            const std::string text = whole_arguments_text(open.block.value("input", json()));
            if (!text.empty()) {
                StreamEvent delta = detail::delta_event(StreamEvent::Type::tool_call_delta, text);
                delta.tool_call_id = call.id;
                delta.tool_name = call.name;
                visible_.push(out, std::move(delta));
            }
        }
        StreamEvent end;
        end.type = StreamEvent::Type::tool_call_end;
        end.tool_call_id = call.id;
        end.tool_name = call.name;
        end.tool_call = std::move(call);
        visible_.push(out, std::move(end));
    }

    void stop_block(std::int64_t index, std::vector<StreamEvent>& out) {
        OpenBlock& open = blocks_.at(index);
        if (open.stopped) return;
        open.stopped = true;
        const bool streamed = open.partial_json.find_first_not_of(" \t\r\n") != std::string::npos;
        if (streamed) {
            json input = detail::parse_json_exact(open.partial_json);
            // Text that is not a JSON object is kept verbatim (see parse_tool_arguments).
            open.block["input"] = !input.is_discarded() && input.is_object()
                                      ? std::move(input)
                                      : json(open.partial_json);
        }
        if (open.client_tool && !open.deferred) emit_tool_call(open, index, false, !streamed, out);
    }

    void complete(std::vector<StreamEvent>& out) {
        finished_ = true;
        for (auto& [index, open] : blocks_) {
            if (!open.stopped) stop_block(index, out);
        }
        json content = json::array();
        for (const auto& [index, open] : blocks_) content.push_back(open.block);
        detail::ResponseBuilder builder;
        const Projection projection = project_content(content, stop_reason_, origin(), builder);
        if (stop_reason_ == "tool_use") {
            for (const auto& [index, open] : blocks_) {
                if (open.deferred) emit_tool_call(open, index, true, true, out);
            }
        }
        MessageSummary summary{stop_reason_, stop_details_,
                               usage_,       model_,
                               message_id_,  requested_model_.empty() ? model_ : requested_model_};
        visible_.push(out,
                      detail::done_event(finish_response(builder, projection, summary, provider_)));
    }

    std::string provider_;
    std::string requested_model_;
    SseParser parser_;
    detail::VisibleEvents visible_;
    std::map<std::int64_t, OpenBlock> blocks_;
    std::set<std::string, std::less<>> tool_call_ids_;  // of every tool_use block so far
    RawUsage usage_;
    std::string message_id_;
    std::string model_;
    std::string stop_reason_;
    json stop_details_;
    bool started_ = false;
    bool finished_ = false;
};

}  // namespace

AnthropicProvider::AnthropicProvider(AnthropicOptions options) : options_(std::move(options)) {
    while (!options_.base_url.empty() && options_.base_url.back() == '/')
        options_.base_url.pop_back();
}

std::string_view AnthropicProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities AnthropicProvider::capabilities(std::string_view model) const {
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = true;
    const ClaudeModel claude = parse_claude_model(model);
    if (!claude.known) return capabilities;
    const int version = claude.version();
    capabilities.images = version >= 30;
    capabilities.documents = version >= 35;
    capabilities.reasoning = version >= 37;
    capabilities.structured_output = claude.modern();
    // Opus 4.7 and later reject sampling parameters outright.
    capabilities.temperature = version < 47;
    capabilities.top_p = version < 47;
    return capabilities;
}

json AnthropicProvider::encode_body(const ChatRequest& request, bool stream) const {
    const ProviderCapabilities capabilities = this->capabilities(request.model);
    detail::check_request(request, capabilities, name(), stream);
    const json& provider_options = request.provider_options;

    // Extended thinking is a provider option; check what it cannot be combined with.
    const auto thinking = provider_options.find("thinking");
    const bool thinking_given = thinking != provider_options.end() && !thinking->is_null();
    const std::string thinking_type = thinking_given ? string_field(*thinking, "type") : "";
    if (thinking_given && thinking_type != "disabled" && !capabilities.reasoning) {
        unsupported(name(), request.model, "extended thinking");
    }
    if ((thinking_type == "enabled" || thinking_type == "adaptive") && request.tool_choice &&
        (request.tool_choice->mode == ToolChoice::Mode::required ||
         request.tool_choice->mode == ToolChoice::Mode::tool)) {
        unsupported(name(), request.model, "forcing a tool call while extended thinking is on");
    }
    if (request.temperature && request.top_p && parse_claude_model(request.model).modern()) {
        unsupported(name(), request.model, "temperature together with top_p");
    }

    json body = {{"model", request.model}};
    std::int64_t max_tokens = options_.default_max_tokens;
    if (thinking_given && thinking->is_object()) {
        max_tokens = detail::saturating_add(max_tokens, count_field(*thinking, "budget_tokens"));
    }
    body["max_tokens"] = request.max_tokens.value_or(max_tokens);

    json system = json::array();
    if (!request.system.empty()) system.push_back(text_block(request.system));
    json messages = json::array();
    for (std::size_t i = 0; i < request.messages.size(); ++i) {
        const Message& message = request.messages[i];
        json blocks = json::array();
        switch (message.role) {
            case Role::system:
                if (!message.text().empty()) blocks.push_back(text_block(message.text()));
                break;
            case Role::user:
            case Role::tool:
                blocks = user_blocks(message, name());
                break;
            case Role::assistant:
                blocks = assistant_blocks(message, name(), request.model);
                break;
        }
        if (blocks.empty()) continue;
        if (auto cache_control =
                cache_control_value(message.metadata, "cache_control",
                                    "metadata.cache_control of message " + std::to_string(i))) {
            set_cache_control(blocks, *cache_control);
        }
        if (message.role == Role::system) {
            for (auto& block : blocks) system.push_back(std::move(block));
        } else {
            append_turn(messages, message.role == Role::assistant ? "assistant" : "user",
                        std::move(blocks));
        }
    }
    if (auto cache_control = cache_control_value(provider_options, system_cache_key,
                                                 "provider_options.system_cache_control")) {
        set_cache_control(system, *cache_control);
    }
    if (!system.empty()) {
        const bool plain = std::none_of(system.begin(), system.end(), [](const json& block) {
            return block.contains("cache_control");
        });
        if (plain) {
            std::string text;
            for (const auto& block : system) {
                if (!text.empty()) text += "\n\n";
                text += block["text"].get<std::string>();
            }
            body["system"] = std::move(text);
        } else {
            body["system"] = std::move(system);
        }
    }
    body["messages"] = std::move(messages);

    if (!request.tools.empty()) {
        json tools = json::array();
        for (const auto& tool : request.tools) {
            json entry = {{"name", tool.name}, {"input_schema", tool.parameters}};
            if (!tool.description.empty()) entry["description"] = tool.description;
            tools.push_back(std::move(entry));
        }
        if (auto cache_control = cache_control_value(provider_options, tools_cache_key,
                                                     "provider_options.tools_cache_control")) {
            tools.back()["cache_control"] = *cache_control;
        }
        body["tools"] = std::move(tools);
        if (request.tool_choice) {
            switch (request.tool_choice->mode) {
                case ToolChoice::Mode::automatic:
                    body["tool_choice"] = {{"type", "auto"}};
                    break;
                case ToolChoice::Mode::none:
                    body["tool_choice"] = {{"type", "none"}};
                    break;
                case ToolChoice::Mode::required:
                    body["tool_choice"] = {{"type", "any"}};
                    break;
                case ToolChoice::Mode::tool:
                    body["tool_choice"] = {{"type", "tool"}, {"name", request.tool_choice->name}};
                    break;
            }
        }
    }
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (!request.stop.empty()) body["stop_sequences"] = request.stop;
    if (request.response_format) {
        body["output_config"] = {
            {"format", {{"type", "json_schema"}, {"schema", request.response_format->schema}}}};
    }
    if (stream) body["stream"] = true;
    for (const auto& [key, value] : provider_options.items()) {
        if (key == system_cache_key || key == tools_cache_key) continue;
        body[key] = value;
    }
    return body;
}

HttpRequest AnthropicProvider::encode(const ChatRequest& request, bool stream) const {
    HttpRequest http;
    http.method = "POST";
    http.url = options_.base_url + "/messages";
    http.body = encode_body(request, stream).dump(-1, ' ', false, json::error_handler_t::replace);
    http.headers = {{"content-type", "application/json"},
                    {"anthropic-version", options_.anthropic_version}};
    if (stream) http.headers.emplace_back("accept", "text/event-stream");
    if (!options_.api_key.empty()) {
        http.headers.emplace_back("x-api-key", options_.api_key);
        http.secrets.push_back(options_.api_key);
    }
    if (!options_.beta.empty()) {
        std::string beta;
        for (const auto& flag : options_.beta) {
            if (flag.empty()) continue;
            if (!beta.empty()) beta += ",";
            beta += flag;
        }
        if (!beta.empty()) http.headers.emplace_back("anthropic-beta", std::move(beta));
    }
    for (const auto& header : options_.extra_headers) http.headers.push_back(header);
    http.connect_timeout = options_.connect_timeout;
    http.idle_timeout = options_.idle_timeout;
    return http;
}

ChatResponse AnthropicProvider::decode(const HttpResponse& response,
                                       const ChatRequest& request) const {
    ErrorOrigin origin{std::string(name()), request.model,
                       response.header("request-id").value_or("")};
    if (response.status < 200 || response.status > 299) {
        const json body = detail::parse_json_exact(response.body);
        ProviderFailure failure = body.is_object() ? failure_from_body(body, response.status)
                                                   : ProviderFailure{response.status, "", "",
                                                                     response.body, std::nullopt};
        failure.status = response.status;
        failure.retry_after = retry_hint(response);
        if (origin.request_id.empty()) origin.request_id = string_field(body, "request_id");
        throw_provider_failure(failure, origin);
    }
    const json body = parse_provider_json(response.body, origin);
    if (!body.is_object()) throw_invalid_response("the response body is not a JSON object", origin);
    const std::string type = string_field(body, "type");
    if (type == "error") {
        if (origin.request_id.empty()) origin.request_id = string_field(body, "request_id");
        throw_provider_failure(failure_from_body(body, response.status), origin);
    }
    if (!type.empty() && type != "message") {
        throw_invalid_response("the response body is a \"" + type + "\" object, not a message",
                               origin);
    }
    const auto content = body.find("content");
    if (content == body.end() || !content->is_array()) {
        throw_invalid_response("the response body has no content array", origin);
    }
    detail::ResponseBuilder builder;
    MessageSummary summary;
    summary.stop_reason = string_field(body, "stop_reason");
    summary.stop_details = body.value("stop_details", json());
    summary.usage.update(body.value("usage", json()));
    summary.model = string_field(body, "model");
    summary.request_id = origin.request_id.empty() ? string_field(body, "id") : origin.request_id;
    summary.replay_model = request.model.empty() ? summary.model : request.model;
    const Projection projection = project_content(*content, summary.stop_reason, origin, builder);
    return finish_response(builder, projection, summary, std::string(name()));
}

std::unique_ptr<StreamDecoder> AnthropicProvider::stream_decoder(const ChatRequest& request) const {
    return std::make_unique<AnthropicStreamDecoder>(std::string(name()), request.model);
}

}  // namespace ullm
