#pragma once

// Internal: the strict validator's check of a schema (what `validate_schema` and
// `validate_value_schema` do), which also compiles its patterns.

#include <ullm/core/json.hpp>

#include "schema_support.hpp"

namespace ullm::detail::validation {

/// Checks `schema` (whose root must be `type: "object"` when `object_root`) and returns its
/// compiled patterns. Throws `ToolDefinitionError` (`invalid_tool_schema`,
/// `unsupported_schema_keyword`).
PatternMap check_schema(const json& schema, bool object_root);

}  // namespace ullm::detail::validation
