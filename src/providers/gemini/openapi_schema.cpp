// A JSON Schema in the OpenAPI 3.0 subset of Gemini's `responseSchema`, for the models before
// 2.5, which do not take `responseJsonSchema`.

#include "gemini_internal.hpp"

#include <ullm/core/error.hpp>
#include <ullm/tools/schema.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>

#include "../response_schema.hpp"

namespace ullm::detail::gemini {

namespace {

// Bounds and rules the subset cannot say: sent as words in the description, and still checked
// against the reply.
bool said_in_description(std::string_view keyword) {
    for (const std::string_view moved :
         {"minLength", "maxLength", "pattern", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
          "uniqueItems", "minProperties", "maxProperties", "const"}) {
        if (keyword == moved) return true;
    }
    return false;
}

// Annotations with no meaning for the model's output.
bool dropped(std::string_view keyword) {
    for (const std::string_view ignored : {"$schema", "$id", "$comment", "default", "examples",
                                           "readOnly", "writeOnly", "deprecated", "$anchor"}) {
        if (keyword == ignored) return true;
    }
    return false;
}

// The formats the subset names, by type.
bool known_format(const std::string& type, const std::string& format) {
    if (type == "STRING") return format == "enum" || format == "date-time";
    if (type == "INTEGER") return format == "int32" || format == "int64";
    if (type == "NUMBER") return format == "float" || format == "double";
    return false;
}

std::string upper(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return text;
}

class OpenApiTranslation {
public:
    explicit OpenApiTranslation(std::string_view provider) : provider_(provider) {}

    json node(const json& schema, const std::string& path) const {
        if (!schema.is_object() || schema.empty()) {
            refuse("a schema that allows any value", path,
                   "cannot be said in Gemini's responseSchema before 2.5; give it a type");
        }
        json out = json::object();
        json moved = json::object();
        bool nullable = false;
        std::string inner_description;  // of the one branch of an anyOf with null
        for (const auto& [key, value] : schema.items()) {
            if (key == "type") {
                set_type(out, nullable, value, path);
            } else if (key == "anyOf" || key == "oneOf") {
                alternatives(out, nullable, inner_description, value, path + "/" + key);
            } else if (key == "properties") {
                if (!value.is_object()) refuse("`properties`", path, "must be an object");
                json properties = json::object();
                json ordering = json::array();
                for (const auto& [name, property] : value.items()) {
                    properties[name] =
                        node(property, path + "/properties/" + schema_pointer_token(name));
                    ordering.push_back(name);
                }
                out["properties"] = std::move(properties);
                out["propertyOrdering"] = std::move(ordering);
            } else if (key == "items") {
                if (!value.is_object()) {
                    refuse("`items`", path, "must be one schema (a tuple cannot be said)");
                }
                out["items"] = node(value, path + "/items");
            } else if (key == "enum") {
                const bool strings = std::all_of(value.begin(), value.end(),
                                                 [](const json& item) { return item.is_string(); });
                if (strings) {
                    out["enum"] = value;
                } else {
                    moved["enum"] = value;  // the subset lists strings only
                }
            } else if (key == "additionalProperties") {
                if (value.is_object()) {
                    refuse("`additionalProperties`", path,
                           "a map (additionalProperties with a schema) cannot be said");
                }
                // true or false: the model only writes the properties it is shown.
            } else if (key == "required") {
                for (const auto& name : value) {
                    if (!name.is_string() || !schema.value("properties", json::object())
                                                  .contains(name.get<std::string>())) {
                        refuse("`required`", path,
                               "names " + name.dump() + ", which is not among the properties");
                    }
                }
                out[key] = value;
            } else if (key == "description" || key == "title" || key == "minItems" ||
                       key == "maxItems" || key == "minimum" || key == "maximum" ||
                       key == "nullable") {
                out[key] = value;
            } else if (key == "format" || said_in_description(key)) {
                moved[key] = value;  // a format is placed once the type is known
            } else if (!dropped(key)) {
                refuse("`" + key + "`", path, "is not in Gemini's responseSchema subset");
            }
        }
        if (nullable) out["nullable"] = true;
        if (!inner_description.empty()) {
            const std::string own = out.value("description", std::string());
            out["description"] = own.empty() ? inner_description : own + " " + inner_description;
        }
        if (const auto format = moved.find("format"); format != moved.end()) {
            if (format->is_string() &&
                known_format(out.value("type", std::string()), format->get<std::string>())) {
                out["format"] = *format;
                moved.erase("format");
            }
        }
        if (out.value("type", std::string()) == "OBJECT" && !out.contains("anyOf") &&
            out.value("properties", json::object()).empty()) {
            refuse("an object without properties", path,
                   "cannot be said in Gemini's responseSchema (it needs at least one)");
        }
        if (!out.contains("type") && !out.contains("anyOf")) {
            refuse("a schema without `type`", path,
                   "cannot be said in Gemini's responseSchema before 2.5");
        }
        say_in_description(out, moved);
        return out;
    }

private:
    [[noreturn]] void refuse(const std::string& what, const std::string& path,
                             const std::string& why) const {
        refuse_response_schema(provider_, what, path, why);
    }

    void set_type(json& out, bool& nullable, const json& type, const std::string& path) const {
        if (type.is_string()) {
            if (type == "null") refuse("`type` \"null\"", path, "cannot stand alone");
            out["type"] = upper(type.get<std::string>());
            return;
        }
        if (!type.is_array()) refuse("`type`", path, "must be a type name or a list of them");
        std::string single;
        for (const auto& name : type) {
            if (!name.is_string()) refuse("`type`", path, "must list type names");
            if (name == "null") {
                nullable = true;
            } else if (single.empty()) {
                single = name.get<std::string>();
            } else {
                refuse("`type`", path, "may list one type besides \"null\", not several");
            }
        }
        if (single.empty()) refuse("`type`", path, "lists no type besides \"null\"");
        out["type"] = upper(single);
    }

    void alternatives(json& out, bool& nullable, std::string& inner_description,
                      const json& branches, const std::string& path) const {
        if (!branches.is_array()) refuse("`anyOf`", path, "must be an array of schemas");
        json kept = json::array();
        for (std::size_t i = 0; i < branches.size(); ++i) {
            const json& branch = branches[i];
            if (branch.is_object() && branch.size() == 1 &&
                branch.value("type", json()) == "null") {
                nullable = true;
                continue;
            }
            kept.push_back(node(branch, path + "/" + std::to_string(i)));
        }
        if (kept.empty()) refuse("`anyOf`", path, "has no branch besides null");
        if (kept.size() == 1) {
            // One branch and null: the branch itself, nullable. Its description (where its
            // bounds may be said) goes after the schema's own, whichever comes first.
            for (auto& [key, value] : kept[0].items()) {
                if (key == "description") {
                    if (value.is_string()) inner_description = value.get<std::string>();
                } else {
                    out[key] = std::move(value);
                }
            }
            return;
        }
        out["anyOf"] = std::move(kept);
    }

    std::string_view provider_;
};

}  // namespace

bool takes_json_schema(std::string_view model) {
    const std::string id = normalise_model(model);
    return !(id.starts_with("gemini-1") || id.starts_with("gemini-2.0"));
}

json openapi_schema(const json& schema, std::string_view provider) {
    json inlined;
    try {
        inlined = inline_schema_refs(schema);
    } catch (const ToolDefinitionError& error) {
        refuse_response_schema(provider, "`$ref`", "",
                               "cannot be inlined for Gemini's responseSchema: " + error.message());
    } catch (const json::exception&) {
        refuse_response_schema(provider, "`$ref`", "", "is not a valid JSON pointer");
    }
    return OpenApiTranslation(provider).node(inlined, "");
}

}  // namespace ullm::detail::gemini
