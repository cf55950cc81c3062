#pragma once

// Internal: the strict validator's check of arguments and values against a schema that
// `check_schema` accepted.

#include <ullm/core/json.hpp>

#include "schema_support.hpp"

namespace ullm::detail::validation {

/// What `validate_arguments` checks: an object, safe JSON (depth, finite numbers, UTF-8, no
/// prototype-sensitive keys), then the schema. `compiled` holds the schema's patterns (null:
/// compiled as met). Throws `ToolArgumentError`.
void check_arguments(const json& schema, const json& arguments, const PatternMap* compiled);

/// What `validate_value` checks: `value` against the schema. Throws `ToolArgumentError`.
void check_value(const json& schema, const json& value, const PatternMap* compiled);

}  // namespace ullm::detail::validation
