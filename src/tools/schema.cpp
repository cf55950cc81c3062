#include <ullm/tools/schema.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/validator.hpp>

#include "pattern.hpp"

#include <cmath>
#include <set>
#include <utility>

namespace ullm::schema {

namespace {

[[noreturn]] void fail(std::string_view builder, const std::string& problem) {
    throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                              "schema::" + std::string(builder) + ": " + problem);
}

json typed(std::string_view type, std::string_view description) {
    json out = json::object();
    out["type"] = type;
    if (!description.empty()) out["description"] = description;
    return out;
}

void check_finite(std::string_view builder, std::string_view option,
                  const std::optional<double>& value) {
    if (value && !std::isfinite(*value)) {
        fail(builder, std::string(option) + " must be a finite number");
    }
}

template <class T>
void check_order(std::string_view builder, std::string_view low_name, const std::optional<T>& low,
                 std::string_view high_name, const std::optional<T>& high) {
    if (low && high && *low > *high) {
        fail(builder, std::string(low_name) + " is greater than " + std::string(high_name));
    }
}

bool contains_non_finite(const json& value) {
    if (value.is_number_float()) return !std::isfinite(value.get<double>());
    if (value.is_structured()) {
        for (const auto& element : value) {
            if (contains_non_finite(element)) return true;
        }
    }
    return false;
}

json alternatives_of(std::string_view builder, std::string_view keyword,
                     std::vector<json> alternatives, std::string_view description) {
    if (alternatives.empty()) fail(builder, "needs at least one alternative");
    for (const auto& alternative : alternatives) {
        if (!alternative.is_object()) fail(builder, "every alternative must be a schema object");
    }
    json out = json::object();
    out[std::string(keyword)] = json(std::move(alternatives));
    if (!description.empty()) out["description"] = description;
    return out;
}

}  // namespace

json string(std::string_view description, const StringOptions& options) {
    check_order("string", "min_length", options.min_length, "max_length", options.max_length);
    json out = typed("string", description);
    if (options.min_length) out["minLength"] = *options.min_length;
    if (options.max_length) out["maxLength"] = *options.max_length;
    if (options.pattern) {
        const auto compiled = detail::compile_pattern(*options.pattern, max_pattern_memory);
        if (compiled.problem == detail::PatternProblem::malformed) {
            fail("string",
                 "pattern is not a valid ECMAScript regular expression: " + compiled.reason);
        }
        if (compiled.problem == detail::PatternProblem::unsupported) {
            fail("string", "pattern cannot be run by RE2: " + compiled.reason);
        }
        out["pattern"] = *options.pattern;
    }
    if (options.format) out["format"] = *options.format;
    if (!options.enum_values.empty()) out["enum"] = options.enum_values;
    return out;
}

json integer(std::string_view description, const IntegerOptions& options) {
    check_order("integer", "minimum", options.minimum, "maximum", options.maximum);
    if (options.multiple_of && *options.multiple_of <= 0) {
        fail("integer", "multiple_of must be positive");
    }
    json out = typed("integer", description);
    if (options.minimum) out["minimum"] = *options.minimum;
    if (options.maximum) out["maximum"] = *options.maximum;
    if (options.exclusive_minimum) out["exclusiveMinimum"] = *options.exclusive_minimum;
    if (options.exclusive_maximum) out["exclusiveMaximum"] = *options.exclusive_maximum;
    if (options.multiple_of) out["multipleOf"] = *options.multiple_of;
    return out;
}

json number(std::string_view description, const NumberOptions& options) {
    check_finite("number", "minimum", options.minimum);
    check_finite("number", "maximum", options.maximum);
    check_finite("number", "exclusive_minimum", options.exclusive_minimum);
    check_finite("number", "exclusive_maximum", options.exclusive_maximum);
    check_finite("number", "multiple_of", options.multiple_of);
    check_order("number", "minimum", options.minimum, "maximum", options.maximum);
    if (options.multiple_of && *options.multiple_of <= 0) {
        fail("number", "multiple_of must be positive");
    }
    json out = typed("number", description);
    if (options.minimum) out["minimum"] = *options.minimum;
    if (options.maximum) out["maximum"] = *options.maximum;
    if (options.exclusive_minimum) out["exclusiveMinimum"] = *options.exclusive_minimum;
    if (options.exclusive_maximum) out["exclusiveMaximum"] = *options.exclusive_maximum;
    if (options.multiple_of) out["multipleOf"] = *options.multiple_of;
    return out;
}

json boolean(std::string_view description) {
    return typed("boolean", description);
}

json null(std::string_view description) {
    return typed("null", description);
}

json any_value(std::string_view description) {
    json out = json::object();
    out["type"] = json::array({"object", "array", "string", "number", "boolean", "null"});
    if (!description.empty()) out["description"] = description;
    return out;
}

json array(json items, std::string_view description, const ArrayOptions& options) {
    if (!items.is_object()) fail("array", "items must be a schema object");
    check_order("array", "min_items", options.min_items, "max_items", options.max_items);
    json out = typed("array", description);
    out["items"] = std::move(items);
    if (options.min_items) out["minItems"] = *options.min_items;
    if (options.max_items) out["maxItems"] = *options.max_items;
    if (options.unique_items) out["uniqueItems"] = true;
    return out;
}

json object(std::vector<Property> properties, const std::vector<std::string>& required,
            std::string_view description, const ObjectOptions& options) {
    check_order("object", "min_properties", options.min_properties, "max_properties",
                options.max_properties);
    json out = typed("object", description);
    json props = json::object();
    for (auto& property : properties) {
        if (props.contains(property.name)) {
            fail("object", "property \"" + property.name + "\" is listed twice");
        }
        if (!property.schema.is_object()) {
            fail("object", "the schema of property \"" + property.name + "\" must be an object");
        }
        props[property.name] = std::move(property.schema);
    }
    std::set<std::string> seen;
    for (const auto& name : required) {
        if (!seen.insert(name).second) {
            fail("object", "required property \"" + name + "\" is listed twice");
        }
        if (!options.additional_properties && !props.contains(name)) {
            fail("object", "required property \"" + name + "\" is not one of the properties");
        }
    }
    out["properties"] = std::move(props);
    if (!required.empty()) out["required"] = required;
    out["additionalProperties"] = options.additional_properties;
    if (options.min_properties) out["minProperties"] = *options.min_properties;
    if (options.max_properties) out["maxProperties"] = *options.max_properties;
    return out;
}

json enumeration(std::vector<json> values, std::string_view description) {
    if (values.empty()) fail("enumeration", "needs at least one value");
    std::string common;
    for (const auto& value : values) {
        if (contains_non_finite(value)) fail("enumeration", "values must be finite numbers");
        std::string type;
        if (value.is_string()) {
            type = "string";
        } else if (value.is_boolean()) {
            type = "boolean";
        } else if (value.is_number_integer()) {
            type = "integer";
        } else if (value.is_number()) {
            type = "number";
        } else {
            type = "-";  // null, object or array: no single type is emitted
        }
        if (common.empty()) {
            common = type;
        } else if (common != type) {
            const bool numeric = (common == "integer" || common == "number") &&
                                 (type == "integer" || type == "number");
            common = numeric ? "number" : "-";
        }
    }
    json out = json::object();
    if (common != "-") out["type"] = common;
    if (!description.empty()) out["description"] = description;
    out["enum"] = json(std::move(values));
    return out;
}

json constant(json value, std::string_view description) {
    if (contains_non_finite(value)) fail("constant", "the value must not hold a non-finite number");
    json out = json::object();
    out["const"] = std::move(value);
    if (!description.empty()) out["description"] = description;
    return out;
}

json nullable(json schema) {
    if (!schema.is_object()) fail("nullable", "the schema must be an object");
    return {{"anyOf", json::array({std::move(schema), {{"type", "null"}}})}};
}

json any_of(std::vector<json> alternatives, std::string_view description) {
    return alternatives_of("any_of", "anyOf", std::move(alternatives), description);
}

json one_of(std::vector<json> alternatives, std::string_view description) {
    return alternatives_of("one_of", "oneOf", std::move(alternatives), description);
}

json ref(std::string_view name) {
    if (name.empty()) fail("ref", "the definition name must not be empty");
    std::string pointer = "#/$defs/";
    for (const char c : name) {
        if (c == '~') {
            pointer += "~0";
        } else if (c == '/') {
            pointer += "~1";
        } else {
            pointer.push_back(c);
        }
    }
    return {{"$ref", std::move(pointer)}};
}

json with_defs(json root, std::vector<Property> defs) {
    if (!root.is_object()) fail("with_defs", "the root schema must be an object");
    if (root.contains("$defs")) fail("with_defs", "the root schema already has $defs");
    json out = json::object();
    for (auto& def : defs) {
        if (def.name.empty()) fail("with_defs", "definition names must not be empty");
        if (out.contains(def.name)) {
            fail("with_defs", "definition \"" + def.name + "\" is listed twice");
        }
        if (!def.schema.is_object()) {
            fail("with_defs", "definition \"" + def.name + "\" must be a schema object");
        }
        out[def.name] = std::move(def.schema);
    }
    root["$defs"] = std::move(out);
    return root;
}

}  // namespace ullm::schema

namespace ullm {

namespace {

json inline_refs(const json& node, const json& root, std::set<std::string>& visiting) {
    if (node.is_array()) {
        json out = json::array();
        for (const auto& item : node) out.push_back(inline_refs(item, root, visiting));
        return out;
    }
    if (!node.is_object()) return node;
    if (const auto ref = node.find("$ref"); ref != node.end() && ref->is_string()) {
        const std::string target = ref->get<std::string>();
        if (target.rfind("#/", 0) != 0) {
            throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                                      "only local references can be inlined, not " + target);
        }
        if (visiting.count(target) != 0) {
            throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                                      "the reference " + target + " refers to itself");
        }
        const json::json_pointer pointer(target.substr(1));
        if (!root.contains(pointer)) {
            throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                                      "the reference " + target + " points to nothing");
        }
        visiting.insert(target);
        json resolved = inline_refs(root.at(pointer), root, visiting);
        visiting.erase(target);
        for (const auto& [key, value] : node.items()) {
            if (key != "$ref") resolved[key] = inline_refs(value, root, visiting);
        }
        return resolved;
    }
    json out = json::object();
    for (const auto& [key, value] : node.items()) {
        if (key == "$defs" || key == "definitions") continue;
        out[key] = inline_refs(value, root, visiting);
    }
    return out;
}

}  // namespace

json inline_schema_refs(const json& schema) {
    std::set<std::string> visiting;
    return inline_refs(schema, schema, visiting);
}

}  // namespace ullm
