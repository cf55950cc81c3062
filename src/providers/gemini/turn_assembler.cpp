#include "gemini_internal.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <variant>

#include "../json_readers.hpp"

namespace ullm::detail::gemini {

namespace {

constexpr std::string_view synthesised_id_prefix = "gemini_call_";
// The deepest `partialArgs` jsonPath accepted (the tool layer's argument depth limit).
constexpr std::size_t max_argument_path_depth = 64;

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

}  // namespace

CallIds::CallIds(const ChatRequest& request) {
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

std::string CallIds::assign(const std::string& provider_id, const std::string& response_id) {
    if (!provider_id.empty() && used_.insert(provider_id).second) return provider_id;
    const std::string stem = response_id.empty()
                                 ? std::string(synthesised_id_prefix)
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

void TurnAssembler::set_response_id(const std::string& id) {
    if (response_id_.empty()) response_id_ = id;
    if (origin_.request_id.empty()) origin_.request_id = id;
}

void TurnAssembler::add(const json& part, const EventSink& sink) {
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

void TurnAssembler::close_call(const EventSink& sink) {
    if (!pending_) return;
    auto& call = std::get<ToolCallPart>(parts_[pending_->part]);
    call.arguments = std::move(pending_->args);
    pending_.reset();
    StreamEvent delta =
        detail::delta_event(StreamEvent::Type::tool_call_delta,
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

std::optional<json> TurnAssembler::replay_data() const {
    const bool informative = std::any_of(layout_.begin(), layout_.end(), [](const auto& e) {
        return !e.part || !e.signature.empty() || !e.provider_id.empty();
    });
    if (!informative) return std::nullopt;
    return layout_to_json(layout_);
}

void TurnAssembler::add_text(bool thought, const std::string& text, const std::string& signature,
                             const EventSink& sink) {
    const auto type = thought ? StreamEvent::Type::reasoning_delta : StreamEvent::Type::text_delta;
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

void TurnAssembler::add_call(const json& call, const std::string& signature,
                             const EventSink& sink) {
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

bool TurnAssembler::continues(const json& call) {
    const auto it = call.find("willContinue");
    return it != call.end() && it->is_boolean() && it->get<bool>();
}

std::size_t TurnAssembler::layout_index_of(std::size_t part) const {
    for (std::size_t i = layout_.size(); i-- > 0;) {
        if (layout_[i].part == part) return i;
    }
    return layout_.size() - 1;
}

void TurnAssembler::apply_arguments(const json& call) {
    if (const auto args = call.find("args"); args != call.end() && !args->is_null()) {
        // Gemini's args are a Struct; anything else is kept verbatim, as with bad JSON text.
        pending_->args = args->is_object() ? *args : json(args->dump());
    }
    const auto partial = call.find("partialArgs");
    if (partial == call.end() || !partial->is_array()) return;
    for (const auto& argument : *partial) apply_partial_argument(argument);
}

void TurnAssembler::apply_partial_argument(const json& argument) {
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
                throw_invalid_response("a streamed function call argument index is out of range",
                                       origin_);
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
        is_string && more != argument.end() && more->is_boolean() && more->get<bool>() ? path : "";
}

}  // namespace ullm::detail::gemini
