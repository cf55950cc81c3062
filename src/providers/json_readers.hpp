#pragma once

// Internal to the provider adapters: lenient readers of the fields of a provider's JSON.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/detail/json_checks.hpp>

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

/// The read-only text of the string field `key` of `object`, or "" when absent or not a
/// string: no copy, valid while `object` is.
std::string_view string_view_field(const json& object, std::string_view key);

/// The string field `key` of `object` taken out of it (left empty there), or "" when absent or
/// not a string: for text a decoder hands on and does not read again.
std::string take_string_field(json& object, std::string_view key);

/// Throws what `parse_provider_json` throws for `body`, which is not JSON.
[[noreturn]] void throw_not_json(std::string_view body, const ErrorOrigin& origin,
                                 std::string_view what);

/// `parse_provider_json` for the hot path of a stream: the error origin (a few strings) is made
/// by `make_origin()` only when `data` is refused.
template <class MakeOrigin>
json parse_stream_json(std::string_view data, MakeOrigin&& make_origin, std::string_view what) {
    json value = parse_json_exact(data);
    if (value.is_discarded()) throw_not_json(data, make_origin(), what);
    return value;
}

}  // namespace ullm::detail
