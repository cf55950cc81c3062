#include <ullm/core/message.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include <initializer_list>
#include <utility>

namespace ullm {

using detail::pointer_append;

std::string_view to_string(Role role) noexcept {
    switch (role) {
        case Role::system:
            return "system";
        case Role::user:
            return "user";
        case Role::assistant:
            return "assistant";
        case Role::tool:
            return "tool";
    }
    return "user";
}

Message Message::system(std::string text) {
    return Message{Role::system, {TextPart{std::move(text)}}, json::object(), std::nullopt};
}

Message Message::user(std::string text) {
    return Message{Role::user, {TextPart{std::move(text)}}, json::object(), std::nullopt};
}

Message Message::assistant(std::string text) {
    return Message{Role::assistant, {TextPart{std::move(text)}}, json::object(), std::nullopt};
}

Message Message::tool_results(std::vector<ToolResultPart> results) {
    Message message{Role::tool, {}, json::object(), std::nullopt};
    message.parts.reserve(results.size());
    for (auto& result : results) message.parts.emplace_back(std::move(result));
    return message;
}

std::string Message::text() const {
    std::string out;
    for (const auto& part : parts) {
        if (const auto* text_part = std::get_if<TextPart>(&part)) out += text_part->text;
    }
    return out;
}

std::vector<ToolCallPart> Message::tool_calls() const {
    std::vector<ToolCallPart> out;
    for (const auto& part : parts) {
        if (const auto* call = std::get_if<ToolCallPart>(&part)) out.push_back(*call);
    }
    return out;
}

std::vector<ToolResultPart> Message::tool_results() const {
    std::vector<ToolResultPart> out;
    for (const auto& part : parts) {
        if (const auto* result = std::get_if<ToolResultPart>(&part)) out.push_back(*result);
    }
    return out;
}

namespace {

void put_if_set(json& out, const char* key, const std::string& value) {
    if (!value.empty()) out[key] = value;
}

struct PartJson {
    json operator()(const TextPart& part) const { return {{"type", "text"}, {"text", part.text}}; }
    json operator()(const ImagePart& part) const {
        json out = {{"type", "image"}};
        put_if_set(out, "url", part.url);
        put_if_set(out, "data", part.data);
        put_if_set(out, "media_type", part.media_type);
        return out;
    }
    json operator()(const DocumentPart& part) const {
        json out = {{"type", "document"}};
        put_if_set(out, "url", part.url);
        put_if_set(out, "data", part.data);
        put_if_set(out, "media_type", part.media_type);
        put_if_set(out, "name", part.name);
        return out;
    }
    json operator()(const ToolCallPart& part) const {
        return {{"type", "tool_call"},
                {"id", part.id},
                {"name", part.name},
                {"arguments", part.arguments}};
    }
    json operator()(const ToolResultPart& part) const {
        return {{"type", "tool_result"},
                {"tool_call_id", part.tool_call_id},
                {"name", part.name},
                {"result", part.result},
                {"is_error", part.is_error}};
    }
    json operator()(const ReasoningPart& part) const {
        return {{"type", "reasoning"}, {"text", part.text}};
    }
};

// Fail-closed field access for one JSON object under a known path.
class Fields {
public:
    Fields(const json& value, std::string path, const char* what)
        : value_(value), path_(std::move(path)) {
        if (!value_.is_object()) {
            throw InvalidMessageError(path_, std::string(what) + " must be a JSON object");
        }
    }

    void only(std::initializer_list<std::string_view> allowed) const {
        for (auto it = value_.begin(); it != value_.end(); ++it) {
            bool known = false;
            for (const auto key : allowed) known = known || key == it.key();
            if (!known) throw InvalidMessageError(at(it.key()), "is not an allowed field here");
        }
    }

    [[nodiscard]] bool has(const char* key) const { return value_.contains(key); }

    [[nodiscard]] std::string string(const char* key, bool required, bool non_empty) const {
        const auto it = value_.find(key);
        if (it == value_.end()) {
            if (required) throw InvalidMessageError(at(key), "is required");
            return {};
        }
        if (!it->is_string()) throw InvalidMessageError(at(key), "must be a string");
        auto out = it->get<std::string>();
        if (non_empty && out.empty()) throw InvalidMessageError(at(key), "must not be empty");
        return out;
    }

    [[nodiscard]] json value(const char* key, bool required) const {
        const auto it = value_.find(key);
        if (it == value_.end()) {
            if (required) throw InvalidMessageError(at(key), "is required");
            return nullptr;
        }
        const auto violation = detail::check_json_safe(*it, at(key));
        if (!violation.constraint.empty()) {
            throw InvalidMessageError(violation.path, violation.constraint);
        }
        return *it;
    }

    [[nodiscard]] std::string at(std::string_view key) const { return pointer_append(path_, key); }

private:
    const json& value_;
    std::string path_;
};

void check_source(const Fields& fields, const std::string& url, const std::string& data,
                  const std::string& media_type, const char* kind) {
    if (url.empty() == data.empty()) {
        throw InvalidMessageError(fields.at("url"),
                                  std::string(kind) + " needs exactly one of url or data");
    }
    if (!data.empty() && media_type.empty()) {
        throw InvalidMessageError(fields.at("media_type"), "is required with inline data");
    }
}

bool role_allows(Role role, const Part& part) {
    switch (role) {
        case Role::system:
            return std::holds_alternative<TextPart>(part);
        case Role::user:
            return std::holds_alternative<TextPart>(part) ||
                   std::holds_alternative<ImagePart>(part) ||
                   std::holds_alternative<DocumentPart>(part);
        case Role::assistant:
            return std::holds_alternative<TextPart>(part) ||
                   std::holds_alternative<ReasoningPart>(part) ||
                   std::holds_alternative<ToolCallPart>(part);
        case Role::tool:
            return std::holds_alternative<ToolResultPart>(part);
    }
    return false;
}

Role parse_role(const Fields& fields) {
    const auto name = fields.string("role", true, false);
    if (name == "system") return Role::system;
    if (name == "user") return Role::user;
    if (name == "assistant") return Role::assistant;
    if (name == "tool") return Role::tool;
    throw InvalidMessageError(fields.at("role"), "must be one of system, user, assistant, tool");
}

}  // namespace

json part_to_json(const Part& part) {
    return std::visit(PartJson{}, part);
}

json message_to_json(const Message& message, bool include_replay) {
    json parts = json::array();
    for (const auto& part : message.parts) parts.push_back(part_to_json(part));
    json out = {{"role", to_string(message.role)}, {"parts", std::move(parts)}};
    if (!message.metadata.is_null() && !message.metadata.empty())
        out["metadata"] = message.metadata;
    if (include_replay && message.replay) {
        out["replay"] = {{"provider", message.replay->provider},
                         {"model", message.replay->model},
                         {"data", message.replay->data}};
    }
    return out;
}

Part parse_part(const json& value, const std::string& path) {
    const Fields fields(value, path, "a part");
    const auto type = fields.string("type", true, false);
    if (type == "text") {
        fields.only({"type", "text"});
        return TextPart{fields.string("text", true, false)};
    }
    if (type == "reasoning") {
        fields.only({"type", "text"});
        return ReasoningPart{fields.string("text", true, false)};
    }
    if (type == "image") {
        fields.only({"type", "url", "data", "media_type"});
        ImagePart part{fields.string("url", false, false), fields.string("data", false, false),
                       fields.string("media_type", false, false)};
        check_source(fields, part.url, part.data, part.media_type, "an image");
        return part;
    }
    if (type == "document") {
        fields.only({"type", "url", "data", "media_type", "name"});
        DocumentPart part{fields.string("url", false, false), fields.string("data", false, false),
                          fields.string("media_type", false, false),
                          fields.string("name", false, false)};
        check_source(fields, part.url, part.data, part.media_type, "a document");
        return part;
    }
    if (type == "tool_call") {
        fields.only({"type", "id", "name", "arguments"});
        ToolCallPart part{fields.string("id", true, true), fields.string("name", true, true),
                          fields.value("arguments", true)};
        if (!part.arguments.is_object() && !part.arguments.is_string()) {
            throw InvalidMessageError(fields.at("arguments"),
                                      "must be a JSON object (or the raw text of arguments that "
                                      "did not parse)");
        }
        return part;
    }
    if (type == "tool_result") {
        fields.only({"type", "tool_call_id", "name", "result", "is_error"});
        ToolResultPart part{fields.string("tool_call_id", true, true),
                            fields.string("name", false, false), fields.value("result", true),
                            false};
        if (fields.has("is_error")) {
            const auto& flag = value.at("is_error");
            if (!flag.is_boolean())
                throw InvalidMessageError(fields.at("is_error"), "must be a boolean");
            part.is_error = flag.get<bool>();
        }
        return part;
    }
    throw InvalidMessageError(
        fields.at("type"),
        "must be one of text, image, document, tool_call, tool_result, reasoning");
}

Message parse_message(const json& value, const std::string& path) {
    const Fields fields(value, path, "a message");
    fields.only({"role", "parts", "metadata", "replay"});
    Message message;
    message.role = parse_role(fields);

    const auto parts_it = value.find("parts");
    if (parts_it == value.end()) throw InvalidMessageError(fields.at("parts"), "is required");
    if (!parts_it->is_array()) throw InvalidMessageError(fields.at("parts"), "must be an array");
    const std::string parts_path = fields.at("parts");
    message.parts.reserve(parts_it->size());
    std::size_t index = 0;
    for (const auto& element : *parts_it) {
        const std::string part_path = pointer_append(parts_path, index++);
        Part part = parse_part(element, part_path);
        if (!role_allows(message.role, part)) {
            throw InvalidMessageError(part_path + "/type",
                                      "a " + std::string(to_string(message.role)) +
                                          " message may not hold a " +
                                          element.at("type").get<std::string>() + " part");
        }
        message.parts.push_back(std::move(part));
    }
    if (message.role == Role::tool && message.parts.empty()) {
        throw InvalidMessageError(parts_path, "a tool message needs at least one tool_result");
    }

    if (fields.has("metadata")) {
        message.metadata = fields.value("metadata", true);
        if (!message.metadata.is_object()) {
            throw InvalidMessageError(fields.at("metadata"), "must be a JSON object");
        }
    }
    if (fields.has("replay")) {
        const std::string replay_path = fields.at("replay");
        const Fields replay(value.at("replay"), replay_path, "replay state");
        replay.only({"provider", "model", "data"});
        message.replay =
            ReplayState{replay.string("provider", true, true), replay.string("model", true, true),
                        replay.value("data", true)};
        if (message.role != Role::assistant) {
            throw InvalidMessageError(replay_path,
                                      "only an assistant message carries replay state");
        }
    }
    return message;
}

namespace {

// A JSON value of a message checked in place as `Fields::value` checks a parsed one.
void check_value(const json& value, const std::string& path) {
    const auto violation = detail::check_json_safe(value, path);
    if (!violation.constraint.empty()) {
        throw InvalidMessageError(violation.path, violation.constraint);
    }
}

void check_non_empty(const std::string& text, const std::string& path) {
    if (text.empty()) throw InvalidMessageError(path, "must not be empty");
}

struct PartCheck {
    const std::string& path;

    void source(const std::string& url, const std::string& data, const std::string& media_type,
                const char* kind) const {
        if (url.empty() == data.empty()) {
            throw InvalidMessageError(pointer_append(path, "url"),
                                      std::string(kind) + " needs exactly one of url or data");
        }
        if (!data.empty() && media_type.empty()) {
            throw InvalidMessageError(pointer_append(path, "media_type"),
                                      "is required with inline data");
        }
    }
    void operator()(const TextPart&) const {}
    void operator()(const ReasoningPart&) const {}
    void operator()(const ImagePart& part) const {
        source(part.url, part.data, part.media_type, "an image");
    }
    void operator()(const DocumentPart& part) const {
        source(part.url, part.data, part.media_type, "a document");
    }
    void operator()(const ToolCallPart& part) const {
        check_non_empty(part.id, pointer_append(path, "id"));
        check_non_empty(part.name, pointer_append(path, "name"));
        const std::string at = pointer_append(path, "arguments");
        check_value(part.arguments, at);
        if (!part.arguments.is_object() && !part.arguments.is_string()) {
            throw InvalidMessageError(at,
                                      "must be a JSON object (or the raw text of arguments that "
                                      "did not parse)");
        }
    }
    void operator()(const ToolResultPart& part) const {
        check_non_empty(part.tool_call_id, pointer_append(path, "tool_call_id"));
        check_value(part.result, pointer_append(path, "result"));
    }
};

}  // namespace

void validate_message(Message& message, const std::string& path) {
    const std::string parts_path = pointer_append(path, "parts");
    for (std::size_t index = 0; index < message.parts.size(); ++index) {
        const std::string part_path = pointer_append(parts_path, index);
        const Part& part = message.parts[index];
        if (!role_allows(message.role, part)) {
            throw InvalidMessageError(
                part_path + "/type",
                "a " + std::string(to_string(message.role)) + " message may not hold a " +
                    part_to_json(part).at("type").get<std::string>() + " part");
        }
        std::visit(PartCheck{part_path}, part);
    }
    if (message.role == Role::tool && message.parts.empty()) {
        throw InvalidMessageError(parts_path, "a tool message needs at least one tool_result");
    }
    // As a round trip through `message_to_json` would: an empty value is no metadata.
    if (message.metadata.is_null() || message.metadata.empty()) {
        message.metadata = json::object();
    } else {
        const std::string at = pointer_append(path, "metadata");
        check_value(message.metadata, at);
        if (!message.metadata.is_object()) throw InvalidMessageError(at, "must be a JSON object");
    }
    if (message.replay) {
        const std::string at = pointer_append(path, "replay");
        check_non_empty(message.replay->provider, pointer_append(at, "provider"));
        check_non_empty(message.replay->model, pointer_append(at, "model"));
        check_value(message.replay->data, pointer_append(at, "data"));
        if (message.role != Role::assistant) {
            throw InvalidMessageError(at, "only an assistant message carries replay state");
        }
    }
}

std::vector<Message> parse_messages(const json& value, const std::string& path) {
    if (!value.is_array()) throw InvalidMessageError(path, "messages must be an array");
    std::vector<Message> out;
    out.reserve(value.size());
    std::size_t index = 0;
    for (const auto& element : value) {
        out.push_back(parse_message(element, pointer_append(path, index++)));
    }
    return out;
}

void to_json(json& out, const Message& message) {
    out = message_to_json(message);
}
void from_json(const json& in, Message& message) {
    message = parse_message(in);
}

}  // namespace ullm
