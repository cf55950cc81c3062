#include <ullm/tools/reflect.hpp>

#include <ullm/tools/tool.hpp>
#include <ullm/tools/validator.hpp>

#include <exception>
#include <string>

namespace ullm::detail {

namespace {

thread_local std::size_t schema_depth = 0;

}  // namespace

SchemaDepth::SchemaDepth() {
    if (schema_depth >= max_schema_depth) throw_schema_too_deep();
    ++schema_depth;
}

SchemaDepth::~SchemaDepth() {
    --schema_depth;
}

void throw_schema_too_deep() {
    throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                              "json_schema_of: the type nests deeper than " +
                                  std::to_string(max_schema_depth) +
                                  " levels (a type that contains itself has no finite schema; "
                                  "write its ullm_json_schema with schema::ref)");
}

json reflected_object(std::string_view type_name, std::vector<ReflectedField> fields,
                      const TypeDescription* description) {
    json properties = json::object();
    json required = json::array();
    for (auto& field : fields) {
        required.push_back(field.name);
        properties[field.name] = std::move(field.schema);
    }
    json schema = {{"type", "object"},
                   {"properties", std::move(properties)},
                   {"required", std::move(required)},
                   {"additionalProperties", false}};
    if (description == nullptr) return schema;
    if (!description->description.empty()) schema["description"] = description->description;
    for (const auto& [name, text] : description->fields) {
        const auto found = schema["properties"].find(name);
        if (found == schema["properties"].end()) {
            throw ToolDefinitionError(
                ErrorCode::invalid_tool_schema,
                "ullm_describe of " + std::string(type_name) + " describes field " +
                    json(name).dump(-1, ' ', false, json::error_handler_t::replace) +
                    ", which it does not have");
        }
        (*found)["description"] = text;
    }
    return schema;
}

json reflected_enum(std::initializer_list<std::string_view> names) {
    json values = json::array();
    for (const auto name : names) values.push_back(std::string(name));
    return {{"type", "string"}, {"enum", std::move(values)}};
}

void throw_unknown_enum_value(const json& value, std::initializer_list<std::string_view> names) {
    std::string list;
    for (const auto name : names) {
        if (!list.empty()) list += ", ";
        list += '"';
        list += name;
        list += '"';
    }
    std::string shown = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (shown.size() > 80) shown = shown.substr(0, 80) + "...";
    throw ToolArgumentError("", "must be one of " + list + ", not " + shown);
}

void rethrow_field_error(const char* name) {
    try {
        throw_argument_decode_error(std::current_exception());
    } catch (const ToolArgumentError& error) {
        throw ToolArgumentError(std::string("/") + name + error.path(), error.reason());
    }
}

}  // namespace ullm::detail
