#pragma once

/// A JSON reader that gives exactly what nlohmann gives for the documents it accepts, several
/// times faster: it scans a string's plain bytes in one pass and copies them once, where
/// nlohmann's lexer copies every byte twice (a `push_back` each). It declines anything it does
/// not handle exactly as nlohmann would (syntax errors, a leading byte order mark, integers past
/// 64 bits, floats out of range, nesting past 512 levels); the caller then reads the text
/// another way (nlohmann's parser, which is the authority on what a document means, or its own
/// general path).
///
/// Two faces over one lexer: `parse_json_fast` builds the value; `sax_parse_fast` hands the
/// events to a reader with nlohmann's SAX interface, in nlohmann's order and with its values.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ullm::detail {

/// `text` parsed as `nlohmann::json::parse(text)` parses it, or nothing when declined.
[[nodiscard]] std::optional<nlohmann::json> parse_json_fast(std::string_view text);

/// As `parse_json_fast`, and also declines a text where an object names a key twice or a
/// container opens inside `max_depth` (at most `FastJsonLexer::max_depth`) open ones: for
/// readers that refuse those and leave it to their own slower path to say where.
[[nodiscard]] std::optional<nlohmann::json> parse_json_fast_strict(std::string_view text,
                                                                   std::size_t max_depth);

/// The tokens of one JSON text, read front to back; each reader returns false to decline.
class FastJsonLexer {
public:
    /// Nesting deeper than this is declined.
    static constexpr std::size_t max_depth = 512;

    /// A number as nlohmann types it: not negative and integral is `unsigned_integer`, negative
    /// and integral `integer`, anything with a fraction or exponent `floating`.
    struct Number {
        enum class Kind { unsigned_integer, integer, floating };
        Kind kind = Kind::unsigned_integer;
        std::uint64_t unsigned_value = 0;
        std::int64_t integer_value = 0;
        double float_value = 0;
        std::string_view text;  ///< The number as written.
    };

    explicit FastJsonLexer(std::string_view text) noexcept
        : p_(text.data()), end_(text.data() + text.size()) {}

    void skip_space() noexcept {
        while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
    }
    [[nodiscard]] bool at_end() const noexcept { return p_ == end_; }
    /// The next byte; only when not `at_end()`.
    [[nodiscard]] char peek() const noexcept { return *p_; }
    /// Takes the next byte; only when not `at_end()`.
    char take() noexcept { return *p_++; }
    /// Skips space, then takes `c` if it comes next.
    bool take_after_space(char c) noexcept {
        skip_space();
        if (p_ == end_ || *p_ != c) return false;
        ++p_;
        return true;
    }

    /// `word` (`true`, `false` or `null`) at the current position.
    bool literal(std::string_view word) noexcept;
    /// The rest of a string after its opening quote, appended to `out`, with nlohmann's rules:
    /// no control character unescaped, valid UTF-8 only, a surrogate escape only in a pair.
    bool string(std::string& out);
    /// A number at the current position.
    bool number(Number& out);

private:
    bool hex4(std::uint32_t& code) noexcept;
    bool digits() noexcept;

    const char* p_;
    const char* end_;
};

/// Runs `reader` (nlohmann's SAX interface, as for `json::sax_parse`) over `text`, calling it as
/// nlohmann's strict `sax_parse` would for a text it accepts; false when `reader` refused an
/// event or the text was declined (in which case `reader` may have seen a prefix of the events,
/// and `parse_error` is not called). A container's size is given as `std::size_t(-1)`, as
/// nlohmann gives it.
template <class Reader>
bool sax_parse_fast(std::string_view text, Reader& reader) {
    constexpr std::size_t unknown_size = static_cast<std::size_t>(-1);
    FastJsonLexer lexer(text);
    char open[FastJsonLexer::max_depth];  // '{' or '[' for each container still open
    std::size_t depth = 0;
    std::string scratch;
    FastJsonLexer::Number number;
    const auto key = [&] {
        if (!lexer.take_after_space('"')) return false;
        scratch.clear();
        return lexer.string(scratch) && lexer.take_after_space(':') && reader.key(scratch);
    };
    for (;;) {
        // A value; a container that is not empty opens and reads up to its first value.
        lexer.skip_space();
        if (lexer.at_end()) return false;
        switch (lexer.peek()) {
            case '{':
            case '[': {
                const bool object = lexer.take() == '{';
                if (!(object ? reader.start_object(unknown_size)
                             : reader.start_array(unknown_size))) {
                    return false;
                }
                if (lexer.take_after_space(object ? '}' : ']')) {
                    if (!(object ? reader.end_object() : reader.end_array())) return false;
                    break;
                }
                if (depth == FastJsonLexer::max_depth) return false;
                open[depth++] = object ? '{' : '[';
                if (object && !key()) return false;
                continue;
            }
            case '"':
                lexer.take();
                scratch.clear();
                if (!lexer.string(scratch) || !reader.string(scratch)) return false;
                break;
            case 't':
                if (!lexer.literal("true") || !reader.boolean(true)) return false;
                break;
            case 'f':
                if (!lexer.literal("false") || !reader.boolean(false)) return false;
                break;
            case 'n':
                if (!lexer.literal("null") || !reader.null()) return false;
                break;
            default: {
                if (!lexer.number(number)) return false;
                bool taken = false;
                switch (number.kind) {
                    case FastJsonLexer::Number::Kind::unsigned_integer:
                        taken = reader.number_unsigned(number.unsigned_value);
                        break;
                    case FastJsonLexer::Number::Kind::integer:
                        taken = reader.number_integer(number.integer_value);
                        break;
                    case FastJsonLexer::Number::Kind::floating:
                        scratch.assign(number.text);
                        taken = reader.number_float(number.float_value, scratch);
                        break;
                }
                if (!taken) return false;
                break;
            }
        }
        // The value is done: close what it completes, or move to the next member.
        for (;;) {
            lexer.skip_space();
            if (depth == 0) return lexer.at_end();
            if (lexer.at_end()) return false;
            const char c = lexer.take();
            const bool object = open[depth - 1] == '{';
            if (c == ',') {
                if (object && !key()) return false;
                break;
            }
            if (c != (object ? '}' : ']')) return false;
            --depth;
            if (!(object ? reader.end_object() : reader.end_array())) return false;
        }
    }
}

}  // namespace ullm::detail
