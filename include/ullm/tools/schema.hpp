#pragma once

/// Builders for the JSON Schema of tool parameters, so that callers need not hand-write it:
/// `schema::object({{"city", schema::string("The city to look up")}}, {"city"})`.
///
/// Every builder returns a plain `ullm::json` value; hand-written schema fragments mix freely
/// with built ones. Builders check only their own arguments (non-finite bounds, a non-positive
/// `multipleOf`, duplicate property names, ...) and throw `ToolDefinitionError` with code
/// `invalid_tool_schema` when one is wrong; the complete schema is validated by
/// `validate_schema` when the tool reaches a registry or a provider. All builders are pure
/// functions and safe to call from any thread.

#include <ullm/core/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::schema {

/// Optional constraints of `schema::string`.
struct StringOptions {
    std::optional<std::size_t> min_length;  ///< `minLength`, in Unicode code points.
    std::optional<std::size_t> max_length;  ///< `maxLength`, in Unicode code points.
    std::optional<std::string> pattern;     ///< `pattern`, an ECMAScript regex (unanchored).
    std::optional<std::string> format;      ///< `format`, an annotation; it is not enforced.
    std::vector<std::string> enum_values;   ///< `enum`, when not empty.
};

/// Optional constraints of `schema::integer`.
struct IntegerOptions {
    std::optional<std::int64_t> minimum;            ///< `minimum` (inclusive).
    std::optional<std::int64_t> maximum;            ///< `maximum` (inclusive).
    std::optional<std::int64_t> exclusive_minimum;  ///< `exclusiveMinimum`.
    std::optional<std::int64_t> exclusive_maximum;  ///< `exclusiveMaximum`.
    std::optional<std::int64_t> multiple_of;        ///< `multipleOf`; must be positive.
};

/// Optional constraints of `schema::number`.
struct NumberOptions {
    std::optional<double> minimum;            ///< `minimum` (inclusive); must be finite.
    std::optional<double> maximum;            ///< `maximum` (inclusive); must be finite.
    std::optional<double> exclusive_minimum;  ///< `exclusiveMinimum`; must be finite.
    std::optional<double> exclusive_maximum;  ///< `exclusiveMaximum`; must be finite.
    std::optional<double> multiple_of;        ///< `multipleOf`; must be finite and positive.
};

/// Optional constraints of `schema::array`.
struct ArrayOptions {
    std::optional<std::size_t> min_items;  ///< `minItems`.
    std::optional<std::size_t> max_items;  ///< `maxItems`.
    bool unique_items = false;             ///< Emits `uniqueItems: true` when set.
};

/// Optional settings of `schema::object`.
struct ObjectOptions {
    /// Whether properties not listed are accepted. The builder's default is `false`, which is
    /// what OpenAI's strict mode requires and what lets strict validation reject a misspelt
    /// argument; a hand-written schema without the keyword accepts them (JSON Schema's rule).
    bool additional_properties = false;
    std::optional<std::size_t> min_properties;  ///< `minProperties`.
    std::optional<std::size_t> max_properties;  ///< `maxProperties`.
};

/// One named property of `schema::object`; written `{"city", schema::string()}`.
struct Property {
    std::string name;  ///< The property (argument) name.
    json schema;       ///< The schema of its value.
};

/// `{"type": "string"}` with the optional description and constraints; throws
/// `ToolDefinitionError` (`invalid_tool_schema`) when `min_length > max_length` or the pattern
/// is not a valid ECMAScript regex or one RE2 cannot run (see `validate_schema`).
[[nodiscard]] json string(std::string_view description = {}, const StringOptions& options = {});

/// `{"type": "integer"}` with the optional description and bounds; throws
/// `ToolDefinitionError` (`invalid_tool_schema`) for a non-positive `multiple_of` or
/// `minimum > maximum`.
[[nodiscard]] json integer(std::string_view description = {}, const IntegerOptions& options = {});

/// `{"type": "number"}` with the optional description and bounds; throws
/// `ToolDefinitionError` (`invalid_tool_schema`) for a non-finite bound, a non-positive
/// `multiple_of` or `minimum > maximum`.
[[nodiscard]] json number(std::string_view description = {}, const NumberOptions& options = {});

/// `{"type": "boolean"}` with the optional description. Does not throw except `bad_alloc`.
[[nodiscard]] json boolean(std::string_view description = {});

/// `{"type": "null"}` with the optional description. Does not throw except `bad_alloc`.
[[nodiscard]] json null(std::string_view description = {});

/// `{"type": ["object", "array", "string", "number", "boolean", "null"]}` with the optional
/// description: any JSON value, said explicitly. Tool parameters need it where a schema would
/// otherwise name no type, since strict validation refuses an untyped schema such as `{}`.
/// Does not throw except `bad_alloc`.
[[nodiscard]] json any_value(std::string_view description = {});

/// `{"type": "array", "items": items}` with the optional description and constraints; throws
/// `ToolDefinitionError` (`invalid_tool_schema`) when `items` is not an object or
/// `min_items > max_items`.
[[nodiscard]] json array(json items, std::string_view description = {},
                         const ArrayOptions& options = {});

/// `{"type": "object", "properties": ..., "required": [...], "additionalProperties": false}`
/// (see `ObjectOptions` for that default); throws `ToolDefinitionError`
/// (`invalid_tool_schema`) for a duplicate property name, a property schema that is not an
/// object, a duplicate required name, or a required name that is not a property while
/// additional properties are not allowed.
[[nodiscard]] json object(std::vector<Property> properties = {},
                          const std::vector<std::string>& required = {},
                          std::string_view description = {}, const ObjectOptions& options = {});

/// `{"enum": values}`, plus `"type"` when every value has the same JSON type (string, integer,
/// number or boolean; integers mixed with numbers give `number`), which providers such as
/// Gemini require; throws `ToolDefinitionError` (`invalid_tool_schema`) when `values` is empty
/// or holds a non-finite number.
[[nodiscard]] json enumeration(std::vector<json> values, std::string_view description = {});

/// `{"const": value}` with the optional description; throws `ToolDefinitionError`
/// (`invalid_tool_schema`) for a non-finite number.
[[nodiscard]] json constant(json value, std::string_view description = {});

/// `{"anyOf": [schema, {"type": "null"}]}`: the value may also be null. Throws
/// `ToolDefinitionError` (`invalid_tool_schema`) when `schema` is not an object.
[[nodiscard]] json nullable(json schema);

/// `{"anyOf": alternatives}` with the optional description; throws `ToolDefinitionError`
/// (`invalid_tool_schema`) when there are no alternatives or one is not an object.
[[nodiscard]] json any_of(std::vector<json> alternatives, std::string_view description = {});

/// `{"oneOf": alternatives}` with the optional description; throws `ToolDefinitionError`
/// (`invalid_tool_schema`) when there are no alternatives or one is not an object.
[[nodiscard]] json one_of(std::vector<json> alternatives, std::string_view description = {});

/// `{"$ref": "#/$defs/<name>"}`, a reference to a schema in the root's `$defs` (see
/// `with_defs`); throws `ToolDefinitionError` (`invalid_tool_schema`) for an empty name.
[[nodiscard]] json ref(std::string_view name);

/// `root` with `"$defs": defs` added, for schemas that use `schema::ref`; throws
/// `ToolDefinitionError` (`invalid_tool_schema`) when `root` is not an object or already has
/// `$defs`, or a definition is not an object.
[[nodiscard]] json with_defs(json root, std::vector<Property> defs);

}  // namespace ullm::schema

namespace ullm {

/// `schema` with every local `$ref` (`#/$defs/…`, `#/definitions/…`) replaced by what it points
/// to and the definitions dropped. Throws `ToolDefinitionError` `invalid_tool_schema` for a
/// dangling or cyclic reference.
[[nodiscard]] json inline_schema_refs(const json& schema);

}  // namespace ullm
