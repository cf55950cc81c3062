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
/// `$schema`, `$id`, `$comment`. Every other keyword is rejected, and so are the boolean
/// schemas `true` and `false` in place of a schema object.
///
/// Semantics that differ from, or pin down, JSON Schema:
/// - `format` is an annotation only: it is passed to providers but not enforced.
/// - `integer` accepts a JSON number with no fractional part whose magnitude is at most 2^53
///   (so `3` and `3.0` pass, `3.5` and `1e300` do not).
/// - `pattern` is an ECMA-262 regular expression, searched (not anchored) over the string,
///   and run by RE2, which matches in time linear in the string: a pattern RE2 cannot run in
///   linear time and bounded memory (lookahead, lookbehind, backreferences, a repeat count over
///   1000, a program over `max_pattern_memory`) is refused when the schema is checked, with
///   `unsupported_schema_keyword`. `\d`, `\w` and `\b` are ASCII as in ECMAScript; `.`, `\s`
///   and `\S` keep ECMAScript's meaning (Unicode spaces and line terminators); the string is
///   matched as Unicode code points (as with ECMAScript's `u` flag). A string longer than
///   `max_pattern_subject_bytes` is rejected rather than matched.
/// - `minLength` / `maxLength` count Unicode code points.
/// - In a tool parameter schema every schema must say which types it accepts: `type`, `enum`,
///   `const`, `$ref`, `anyOf` / `oneOf` alternatives that each do, or an `allOf` member that
///   does (alternatives need no type of their own when the schema around them names one). An
///   untyped schema such as `{}` is refused with `invalid_tool_schema`. Write "any JSON value"
///   as `schema::any_value()`, a `type` listing all six JSON types.
/// - `$ref` applies alongside its sibling keywords (2019-09 semantics) and always resolves
///   against the root; `$id` is an annotation, so a `$ref` beneath a nested `$id` (which
///   JSON Schema would resolve against that `$id`) is refused with
///   `unsupported_schema_keyword`.
/// - `multipleOf` is exact for integers and tolerates a relative error of 1e-9 otherwise.

#include <ullm/core/json.hpp>

#include <cstddef>
#include <memory>

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

/// The longest string, in bytes, that is matched against a `pattern` (a match takes time
/// proportional to the string times the pattern's program).
inline constexpr std::size_t max_pattern_subject_bytes = 1024;

/// The longest `pattern` accepted in a schema, in bytes.
inline constexpr std::size_t max_pattern_bytes = 1024;

/// The memory RE2 may use for one compiled `pattern`, in bytes (its `max_mem`); a pattern
/// whose program does not fit is refused.
inline constexpr std::size_t max_pattern_memory = std::size_t{1} << 20;

/// The most RE2 instructions (`RE2::ProgramSize`) the distinct patterns of one schema may
/// compile to together, so that an untrusted schema cannot take unbounded memory.
inline constexpr std::size_t max_schema_pattern_program = 250'000;

/// The most schema evaluations one `validate_arguments` call performs before it gives up.
inline constexpr std::size_t max_validation_steps = 250'000;

/// Checks that `schema` is a valid tool parameter schema: JSON-safe (finite numbers, valid
/// UTF-8, at most `max_schema_depth` levels), a root of `type: "object"`, only supported
/// keywords with well-formed values, a type on every schema, patterns RE2 can run,
/// resolvable `$ref`s and no `$ref` cycle that would not consume any argument. Throws
/// `ToolDefinitionError` with code `unsupported_schema_keyword` (naming the keyword and its
/// `#/...` schema path) or `invalid_tool_schema`. Thread-safe (pure).
void validate_schema(const json& schema);

/// Checks model-provided `arguments` against `schema`, which must already have passed
/// `validate_schema` (otherwise the result is unspecified but memory-safe). The root must be
/// an object; keys `__proto__`, `constructor` and `prototype` are rejected at any depth.
/// Throws `ToolArgumentError` with the JSON pointer of the first failure and a reason the
/// model can act on, e.g. `argument /city is required but missing`. Compiles the schema's
/// patterns on every call: to check many arguments, use a `CompiledSchema`. Thread-safe
/// (pure).
void validate_arguments(const json& schema, const json& arguments);

/// Checks that `schema` is a valid schema for any JSON value: the rules of `validate_schema`
/// except that the root may describe any type, and no schema needs to name one (`{}` accepts
/// any value). Used for the schemas of values that are not tool arguments, such as cells and
/// pattern results. Throws `ToolDefinitionError` like `validate_schema`. Thread-safe (pure).
void validate_value_schema(const json& schema);

/// Checks `value`, of any type, against `schema`, which must already have passed
/// `validate_value_schema` or `validate_schema`. Unlike `validate_arguments` it applies only
/// the schema: no root-type, reserved-key or depth rule (callers that store the value check
/// JSON safety themselves, e.g. with `detail::check_json_rules`). Throws `ToolArgumentError`
/// with the JSON pointer of the first failure (relative to `value`) and its reason. Compiles
/// the schema's patterns on every call, like `validate_arguments`. Thread-safe (pure).
void validate_value(const json& schema, const json& value);

/// A schema checked once and compiled for repeated validation: its patterns are compiled by
/// RE2 when it is made, not on every call. A cheap handle: copies share the compiled state,
/// which is immutable, so every member may be called from many threads at once.
class CompiledSchema {
public:
    /// Checks `schema` as tool parameters (the rules of `validate_schema`) and compiles it.
    /// Throws `ToolDefinitionError` like `validate_schema`.
    [[nodiscard]] static CompiledSchema parameters(json schema);

    /// Checks `schema` as the schema of any value (the rules of `validate_value_schema`) and
    /// compiles it. Throws `ToolDefinitionError` like `validate_value_schema`.
    [[nodiscard]] static CompiledSchema value(json schema);

    /// The schema it checks. Does not throw.
    [[nodiscard]] const json& schema() const noexcept;

    /// `validate_arguments(schema(), arguments)` without compiling anything. Throws
    /// `ToolArgumentError` like it.
    void validate_arguments(const json& arguments) const;

    /// `validate_value(schema(), value)` without compiling anything. Throws
    /// `ToolArgumentError` like it.
    void validate_value(const json& value) const;

private:
    struct State;
    explicit CompiledSchema(std::shared_ptr<const State> state) noexcept;
    std::shared_ptr<const State> state_;
};

}  // namespace ullm
