#pragma once

// Internal to the providers: the JSON Schema subsets providers take for structured output, and
// the checks `check_request` runs against them (src/providers/response_schema.cpp).

#include <ullm/core/json.hpp>
#include <ullm/providers/provider.hpp>

#include <string>
#include <string_view>

namespace ullm::detail {

/// Checks `format` against the rules of `rules` for provider `provider`: a schema ullm's
/// validator takes as the schema of a value (`ToolDefinitionError` otherwise), a root object
/// where the provider wants one, and the provider's subset, refused with
/// `ProviderCapabilityError` `unsupported_schema_keyword` naming the keyword and its `#/…` path.
void check_response_schema(const ResponseFormat& format, ResponseSchemaRules rules,
                           std::string_view provider);

/// A JSON pointer token: `~` and `/` escaped.
[[nodiscard]] std::string schema_pointer_token(std::string_view name);

/// Throws `ProviderCapabilityError` `unsupported_schema_keyword`: "<provider> structured output
/// cannot take the schema: <keyword> at #<path> <why>".
[[noreturn]] void refuse_response_schema(std::string_view provider, const std::string& keyword,
                                         const std::string& path, const std::string& why);

/// Appends the keywords of `moved`, as JSON in parentheses, to `schema`'s description (after a
/// space when it has one), for the rules a provider's subset cannot say; nothing when empty.
void say_in_description(json& schema, const json& moved);

/// Whether `schema` describes objects: its `type` is or lists "object", or it has no type and
/// has `properties`.
[[nodiscard]] bool describes_object(const json& schema);

/// The keywords Anthropic's structured output refuses (numeric, string-length and most array
/// and object bounds), which `anthropic_output_schema` moves into descriptions.
[[nodiscard]] bool anthropic_unsupported_keyword(std::string_view keyword, const json& value);

}  // namespace ullm::detail
