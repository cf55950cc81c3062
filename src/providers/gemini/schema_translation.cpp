#include "gemini_internal.hpp"

#include <set>
#include <string>
#include <utility>

namespace ullm::detail::gemini {

namespace {

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

}  // namespace

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

}  // namespace ullm::detail::gemini
