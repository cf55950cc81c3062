#pragma once

/// A SAX reader (nlohmann's interface) that writes down every event it is given, so that two
/// parsers can be held to the same sequence; it refuses the event numbered `refuse_at` (from 1),
/// to check that both stop there. Floats are written bit for bit, with the text as written.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "../../src/core/fast_json.hpp"

namespace ullm::test {

struct SaxRecorder {
    using json = nlohmann::json;
    using number_integer_t = json::number_integer_t;
    using number_unsigned_t = json::number_unsigned_t;
    using number_float_t = json::number_float_t;
    using string_t = json::string_t;
    using binary_t = json::binary_t;

    std::vector<std::string> events;
    std::size_t refuse_at = std::numeric_limits<std::size_t>::max();

    bool null() { return record("null"); }
    bool boolean(bool value) { return record(value ? "true" : "false"); }
    bool number_integer(number_integer_t value) { return record("i" + std::to_string(value)); }
    bool number_unsigned(number_unsigned_t value) { return record("u" + std::to_string(value)); }
    bool number_float(number_float_t value, const string_t& text) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &value, sizeof bits);
        return record("f" + std::to_string(bits) + " " + text);
    }
    bool string(string_t& value) { return record("s" + value); }
    bool binary(binary_t& /*value*/) { return record("binary"); }
    bool start_object(std::size_t size) { return record("{" + std::to_string(size)); }
    bool end_object() { return record("}"); }
    bool start_array(std::size_t size) { return record("[" + std::to_string(size)); }
    bool end_array() { return record("]"); }
    bool key(string_t& name) { return record("k" + name); }
    bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                     const json::exception& /*error*/) {
        return false;
    }

private:
    bool record(std::string event) {
        events.push_back(std::move(event));
        return events.size() != refuse_at;
    }
};

/// What `sax_parse_fast` does with `text` next to nlohmann's strict `sax_parse`, with a reader
/// refusing event `refuse_at`: "declined" (false without a refusal), "same" (the same events,
/// the same answer), or what went wrong. A text with a NUL byte is one nlohmann's lexer reads
/// only up to it, so there it is no reference: the fast reader must not accept such a text (a
/// NUL is valid nowhere in JSON), and may refuse an event before it.
inline std::string sax_verdict(std::string_view text,
                               std::size_t refuse_at = std::numeric_limits<std::size_t>::max()) {
    SaxRecorder fast;
    fast.refuse_at = refuse_at;
    const bool fast_ok = ullm::detail::sax_parse_fast(text, fast);
    const bool refused = fast.events.size() == refuse_at;
    if (text.find('\0') != std::string_view::npos) {
        return fast_ok ? "accepted a NUL byte" : "declined";
    }
    SaxRecorder reference;
    reference.refuse_at = refuse_at;
    const bool reference_ok =
        nlohmann::json::sax_parse(text, &reference, nlohmann::json::input_format_t::json, true);
    if (!fast_ok && !refused) return "declined";
    if (fast_ok != reference_ok) return "accepted what nlohmann refuses";
    if (fast.events != reference.events) {
        return "events differ after " + std::to_string(fast.events.size()) + " vs " +
               std::to_string(reference.events.size());
    }
    return "same";
}

}  // namespace ullm::test
