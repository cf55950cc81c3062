#pragma once

// Internal to the provider adapters: lenient readers of the fields of a provider's JSON.

#include <ullm/core/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace ullm::detail {

/// A non-negative integer field of `object`, or 0 when absent, null or not a number.
std::int64_t count_field(const json& object, std::string_view key);

/// The string field `key` of `object`, or "" when absent or not a string.
std::string string_field(const json& object, std::string_view key);

/// The array field `key` of `object`, or nullptr when absent or not an array.
const json* array_field(const json& object, std::string_view key);

/// The object field `key` of `object`, or nullptr when absent or not an object.
const json* object_field(const json& object, std::string_view key);

}  // namespace ullm::detail
