#pragma once

/// The strict JSON Schema subset ullm accepts for tool parameters, and the validator that
/// checks model-provided arguments against it.
///
/// Supported keywords: `type` (a name or an array of names among object, array, string,
/// number, integer, boolean, null), `properties`, `required`, `additionalProperties` (boolean
/// or schema), `items` (one schema), `enum`, `const`, `anyOf`, `oneOf`, `allOf`, `$ref` (local:
/// `#`, `#/$defs/<name>` or `#/definitions/<name>`, with `$defs` / `definitions` at the root),
/// `minLength`, `maxLength`, `pattern`, `format`, `minimum`, `maximum`, `exclusiveMinimum`,
/// `exclusiveMaximum`, `multipleOf`, `minItems`, `maxItems`, `uniqueItems`, `minProperties`,
/// `maxProperties`, and the annotations `description`, `title`, `default`, `examples`,
/// `$schema`, `$id`, `$comment`. Every other keyword is rejected.
///
/// Semantics that differ from, or pin down, JSON Schema:
/// - `format` is an annotation only: it is passed to providers but not enforced.
/// - `integer` accepts a JSON number with no fractional part whose magnitude is at most 2^53
///   (so `3` and `3.0` pass, `3.5` and `1e300` do not).
/// - `pattern` is an ECMAScript `std::regex` searched (not anchored) over the UTF-8 bytes; a
///   string longer than `max_pattern_subject_bytes` is rejected rather than matched, because
///   `std::regex` recurses once per character. Patterns come from the tool author and are
///   trusted: avoid nested quantifiers such as `(a+)+`, which backtrack exponentially.
/// - `minLength` / `maxLength` count Unicode code points.
/// - `$ref` applies alongside its sibling keywords (2019-09 semantics).
/// - `multipleOf` is exact for integers and tolerates a relative error of 1e-9 otherwise.

#include <ullm/core/json.hpp>

#include <cstddef>

namespace ullm {

/// How a registry treats model-provided tool arguments before running a tool.
enum class ValidationMode {
    /// Arguments are checked against the tool's parameters (and for prototype-sensitive keys,
    /// non-finite numbers, invalid UTF-8 and excessive depth) before `execute` runs. Default.
    strict,
    /// Only "arguments are an object" is checked; for legacy callbacks that validate their own
    /// arguments. Tool definitions are validated in both modes.
    permissive,
};

/// The deepest nesting (objects and arrays inside each other) accepted in a parameter schema.
inline constexpr std::size_t max_schema_depth = 64;

/// The deepest nesting (objects and arrays inside each other) accepted in tool arguments.
inline constexpr std::size_t max_argument_depth = 64;

/// The longest string, in bytes, that is matched against a `pattern`.
inline constexpr std::size_t max_pattern_subject_bytes = 1024;

/// The longest `pattern` accepted in a schema, in bytes.
inline constexpr std::size_t max_pattern_bytes = 1024;

/// The most schema evaluations one `validate_arguments` call performs before it gives up.
inline constexpr std::size_t max_validation_steps = 250'000;

/// Checks that `schema` is a valid tool parameter schema: JSON-safe (finite numbers, valid
/// UTF-8, at most `max_schema_depth` levels), a root of `type: "object"`, only supported
/// keywords with well-formed values, compilable patterns, resolvable `$ref`s and no `$ref`
/// cycle that would not consume any argument. Throws `ToolDefinitionError` with code
/// `unsupported_schema_keyword` (naming the keyword and its `#/...` schema path) or
/// `invalid_tool_schema`. Thread-safe (pure).
void validate_schema(const json& schema);

/// Checks model-provided `arguments` against `schema`, which must already have passed
/// `validate_schema` (otherwise the result is unspecified but memory-safe). The root must be
/// an object; keys `__proto__`, `constructor` and `prototype` are rejected at any depth.
/// Throws `ToolArgumentError` with the JSON pointer of the first failure and a reason the
/// model can act on, e.g. `argument /city is required but missing`. Thread-safe (pure).
void validate_arguments(const json& schema, const json& arguments);

/// Checks that `schema` is a valid schema for any JSON value: the rules of `validate_schema`
/// except that the root may describe any type (or leave it open). Used for the schemas of
/// values that are not tool arguments, such as cells and pattern results. Throws
/// `ToolDefinitionError` like `validate_schema`. Thread-safe (pure).
void validate_value_schema(const json& schema);

/// Checks `value`, of any type, against `schema`, which must already have passed
/// `validate_value_schema` or `validate_schema`. Unlike `validate_arguments` it applies only
/// the schema: no root-type, reserved-key or depth rule (callers that store the value check
/// JSON safety themselves, e.g. with `detail::check_json_rules`). Throws `ToolArgumentError`
/// with the JSON pointer of the first failure (relative to `value`) and its reason.
/// Thread-safe (pure).
void validate_value(const json& schema, const json& value);

}  // namespace ullm
