#include "anthropic_internal.hpp"

#include <string>

#include "../response_schema.hpp"

namespace ullm::detail::anthropic {

namespace {

json translate(const json& schema) {
    if (!schema.is_object()) return schema;
    json out = json::object();
    json moved = json::object();
    for (const auto& [key, value] : schema.items()) {
        if (anthropic_unsupported_keyword(key, value)) {
            moved[key] = value;
        } else if (key == "properties" || key == "$defs" || key == "definitions") {
            json children = json::object();
            if (value.is_object()) {
                for (const auto& [name, child] : value.items()) children[name] = translate(child);
            }
            out[key] = std::move(children);
        } else if (key == "items") {
            out[key] = translate(value);
        } else if ((key == "anyOf" || key == "oneOf" || key == "allOf") && value.is_array()) {
            json alternatives = json::array();
            for (const auto& alternative : value) alternatives.push_back(translate(alternative));
            out[key] = std::move(alternatives);
        } else {
            out[key] = value;
        }
    }
    const bool object = describes_object(out);
    if (object && !out.contains("additionalProperties")) out["additionalProperties"] = false;
    say_in_description(out, moved);
    return out;
}

}  // namespace

json output_schema(const json& schema) {
    return translate(schema);
}

std::string result_tool_of(const ChatRequest& request) {
    if (!request.response_format) return {};
    const ClaudeModel claude = parse_claude_model(request.model);
    // A model id this version does not know is taken to be a current one.
    if (!claude.known || claude.modern()) return {};
    return request.response_format->name;
}

}  // namespace ullm::detail::anthropic
