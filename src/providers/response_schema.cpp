#include "response_schema.hpp"

#include <ullm/core/error.hpp>
#include <ullm/tools/validator.hpp>

#include <array>
#include <cstddef>
#include <string>

namespace ullm::detail {

namespace {

// The keywords OpenAI's strict mode documents.
constexpr std::array<std::string_view, 25> openai_strict_keywords = {
    "type",        "properties",
    "required",    "additionalProperties",
    "items",       "enum",
    "const",       "anyOf",
    "$ref",        "$defs",
    "definitions", "description",
    "title",       "pattern",
    "format",      "multipleOf",
    "maximum",     "exclusiveMaximum",
    "minimum",     "exclusiveMinimum",
    "minItems",    "maxItems",
    "$schema",     "$id",
    "$comment"};

constexpr std::size_t openai_max_depth = 10;
constexpr std::size_t openai_max_properties = 5000;
constexpr std::size_t openai_max_enum_values = 1000;

struct OpenAiStrict {
    std::string_view provider;
    std::size_t properties = 0;

    void node(const json& schema, const std::string& path, std::size_t depth) {
        if (!schema.is_object()) return;
        if (depth > openai_max_depth) {
            refuse_response_schema(
                provider, "nesting", path,
                "goes deeper than " + std::to_string(openai_max_depth) + " levels");
        }
        for (const auto& [key, value] : schema.items()) {
            bool known = false;
            for (const auto keyword : openai_strict_keywords) known = known || key == keyword;
            if (!known) {
                refuse_response_schema(provider, "`" + key + "`", path,
                                       "is not supported in strict mode (leave it out, or set "
                                       "StructuredOutputOptions::strict = false)");
            }
        }
        if (const auto values = schema.find("enum"); values != schema.end() && values->is_array() &&
                                                     values->size() > openai_max_enum_values) {
            refuse_response_schema(
                provider, "`enum`", path,
                "has more than " + std::to_string(openai_max_enum_values) + " values");
        }
        if (describes_object(schema)) {
            const auto extra = schema.find("additionalProperties");
            if (extra == schema.end() || *extra != false) {
                refuse_response_schema(provider, "`additionalProperties`", path,
                                       "must be false on every object in strict mode");
            }
            const json properties_of = schema.value("properties", json::object());
            const json required = schema.value("required", json::array());
            for (const auto& [name, property] : properties_of.items()) {
                bool listed = false;
                for (const auto& entry : required) listed = listed || entry == name;
                if (!listed) {
                    refuse_response_schema(
                        provider, "`required`", path,
                        "must list every property in strict mode; \"" + name +
                            "\" is missing (make it nullable instead: anyOf with null)");
                }
                properties += 1;
                if (properties > openai_max_properties) {
                    refuse_response_schema(provider, "`properties`", path,
                                           "the schema has more than " +
                                               std::to_string(openai_max_properties) +
                                               " properties in all");
                }
                node(property, path + "/properties/" + schema_pointer_token(name), depth + 1);
            }
        }
        if (const auto items = schema.find("items"); items != schema.end()) {
            node(*items, path + "/items", depth + 1);
        }
        if (const auto alternatives = schema.find("anyOf");
            alternatives != schema.end() && alternatives->is_array()) {
            for (std::size_t i = 0; i < alternatives->size(); ++i) {
                node((*alternatives)[i], path + "/anyOf/" + std::to_string(i), depth);
            }
        }
        for (const char* defs : {"$defs", "definitions"}) {
            if (const auto found = schema.find(defs); found != schema.end() && found->is_object()) {
                for (const auto& [name, definition] : found->items()) {
                    node(definition, path + "/" + defs + "/" + schema_pointer_token(name), 0);
                }
            }
        }
    }
};

void check_anthropic(const json& schema, const std::string& path, std::string_view provider) {
    if (!schema.is_object()) return;
    if (describes_object(schema)) {
        const auto extra = schema.find("additionalProperties");
        if (extra != schema.end() && *extra != false) {
            refuse_response_schema(provider, "`additionalProperties`", path,
                                   "must be false (or left out) on every object");
        }
    }
    for (const auto& [key, value] : schema.items()) {
        if (key == "properties" || key == "$defs" || key == "definitions") {
            if (!value.is_object()) continue;
            for (const auto& [name, child] : value.items()) {
                check_anthropic(child, path + "/" + key + "/" + schema_pointer_token(name),
                                provider);
            }
        } else if (key == "items") {
            check_anthropic(value, path + "/items", provider);
        } else if ((key == "anyOf" || key == "oneOf" || key == "allOf") && value.is_array()) {
            for (std::size_t i = 0; i < value.size(); ++i) {
                check_anthropic(value[i], path + "/" + key + "/" + std::to_string(i), provider);
            }
        }
    }
}

}  // namespace

std::string schema_pointer_token(std::string_view name) {
    std::string out;
    for (const char c : name) {
        if (c == '~') {
            out += "~0";
        } else if (c == '/') {
            out += "~1";
        } else {
            out += c;
        }
    }
    return out;
}

void refuse_response_schema(std::string_view provider, const std::string& keyword,
                            const std::string& path, const std::string& why) {
    throw ProviderCapabilityError(ErrorCode::unsupported_schema_keyword,
                                  std::string(provider) +
                                      " structured output cannot take the schema: " + keyword +
                                      " at " + (path.empty() ? "#" : "#" + path) + " " + why);
}

void say_in_description(json& schema, const json& moved) {
    if (moved.empty()) return;
    std::string text = schema.value("description", std::string());
    if (!text.empty()) text += ' ';
    text += "(" + moved.dump(-1, ' ', false, json::error_handler_t::replace) + ")";
    schema["description"] = std::move(text);
}

bool describes_object(const json& schema) {
    const auto type = schema.find("type");
    if (type == schema.end()) return schema.contains("properties");
    if (type->is_string()) return *type == "object";
    if (type->is_array()) {
        for (const auto& name : *type) {
            if (name == "object") return true;
        }
    }
    return false;
}

bool anthropic_unsupported_keyword(std::string_view keyword, const json& value) {
    if (keyword == "minItems") {
        // Anthropic takes 0 and 1; a literal built in C++ is a signed integer, one parsed from
        // text an unsigned one, so both are read as integers.
        return !(value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                 value.get<std::int64_t>() <= 1);
    }
    for (const std::string_view refused :
         {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength",
          "maxLength", "maxItems", "uniqueItems", "minProperties", "maxProperties"}) {
        if (keyword == refused) return true;
    }
    return false;
}

void check_response_schema(const ResponseFormat& format, ResponseSchemaRules rules,
                           std::string_view provider) {
    validate_value_schema(format.schema);
    if (rules == ResponseSchemaRules::any) return;
    if (rules == ResponseSchemaRules::openai_strict && !format.strict) return;
    if (!format.schema.is_object() || format.schema.value("type", json()) != "object") {
        refuse_response_schema(provider, "`type`", "", "must be \"object\" at the root");
    }
    if (rules == ResponseSchemaRules::openai_strict) {
        OpenAiStrict{provider}.node(format.schema, "", 1);
    } else {
        check_anthropic(format.schema, "", provider);
    }
}

}  // namespace ullm::detail
