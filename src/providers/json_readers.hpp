#pragma once

// Internal to the provider adapters: lenient readers of the fields of a provider's JSON.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/detail/json_checks.hpp>

#include "../core/fast_json.hpp"

#include <cstddef>
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

/// The base of the SAX readers of a decoder's fast path (`read_with`): the types nlohmann asks
/// for, and every callback refusing (returning false, which ends the parse) or, for a parse
/// error, reporting failure. A reader hides the callbacks of what it accepts.
struct RefusingSaxReader {
    using number_integer_t = json::number_integer_t;
    using number_unsigned_t = json::number_unsigned_t;
    using number_float_t = json::number_float_t;
    using string_t = json::string_t;
    using binary_t = json::binary_t;

    bool null() { return false; }
    bool boolean(bool /*value*/) { return false; }
    bool number_integer(number_integer_t /*value*/) { return false; }
    bool number_unsigned(number_unsigned_t /*value*/) { return false; }
    bool number_float(number_float_t /*value*/, const string_t& /*text*/) { return false; }
    bool string(string_t& /*value*/) { return false; }
    bool binary(binary_t& /*value*/) { return false; }
    bool start_object(std::size_t /*size*/) { return false; }
    bool end_object() { return false; }
    bool start_array(std::size_t /*size*/) { return false; }
    bool end_array() { return false; }
    bool key(string_t& /*name*/) { return false; }
    bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                     const json::exception& /*error*/) {
        return false;
    }
};

/// Runs `reader` over `data` (see `RefusingSaxReader`); true when it accepted the whole text.
/// False sends the decoder to its general path, which parses with `parse_json_exact`: the fast
/// lexer accepts only what nlohmann accepts, with the same values, and declines the rest.
template <class Reader>
bool read_with(std::string_view data, Reader& reader) {
    return sax_parse_fast(data, reader);
}

}  // namespace ullm::detail
