#include "fast_json.hpp"

#include <ullm/detail/json_checks.hpp>

#include "text.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace ullm::detail {

namespace {

using json = nlohmann::json;

// Builds the value in place: each container that is still open, and the slot the next value
// goes into.
class DomBuilder {
public:
    // `strict` declines duplicate keys; a container opening inside `max_depth` open ones is
    // declined.
    DomBuilder(std::string_view text, std::size_t max_depth, bool strict)
        : lexer_(text),
          max_depth_(std::min(max_depth, FastJsonLexer::max_depth)),
          strict_(strict) {}

    // The whole text as one value, or false to decline.
    bool parse(json& root) {
        std::vector<json*> open;  // the containers whose closing bracket is still to come
        json* slot = &root;       // where the next value goes
        for (;;) {
            // A value into `slot`; a container that is not empty opens and asks for its first.
            lexer_.skip_space();
            if (lexer_.at_end()) return false;
            switch (lexer_.peek()) {
                case '{':
                case '[': {
                    if (open.size() >= max_depth_) return false;
                    const bool object = lexer_.take() == '{';
                    *slot = object ? json::object() : json::array();
                    if (lexer_.take_after_space(object ? '}' : ']')) break;
                    open.push_back(slot);
                    slot = element(*slot);
                    if (slot == nullptr) return false;
                    continue;
                }
                case '"': {
                    lexer_.take();
                    std::string text;
                    if (!lexer_.string(text)) return false;
                    *slot = std::move(text);
                    break;
                }
                case 't':
                    if (!lexer_.literal("true")) return false;
                    *slot = true;
                    break;
                case 'f':
                    if (!lexer_.literal("false")) return false;
                    *slot = false;
                    break;
                case 'n':
                    if (!lexer_.literal("null")) return false;
                    *slot = nullptr;
                    break;
                default: {
                    FastJsonLexer::Number number;
                    if (!lexer_.number(number)) return false;
                    switch (number.kind) {
                        case FastJsonLexer::Number::Kind::unsigned_integer:
                            *slot = number.unsigned_value;
                            break;
                        case FastJsonLexer::Number::Kind::integer:
                            *slot = number.integer_value;
                            break;
                        case FastJsonLexer::Number::Kind::floating:
                            *slot = number.float_value;
                            break;
                    }
                    break;
                }
            }
            // The value is done: close what it completes, or move to the next member.
            for (;;) {
                lexer_.skip_space();
                if (open.empty()) return lexer_.at_end();
                if (lexer_.at_end()) return false;
                json& container = *open.back();
                const char c = lexer_.take();
                if (c == ',') {
                    slot = element(container);
                    if (slot == nullptr) return false;
                    break;
                }
                if (c != (container.is_object() ? '}' : ']')) return false;
                open.pop_back();
            }
        }
    }

private:
    // The slot of a container's next element: an array's new last one, or an object's member
    // named by the key and colon that come next. A key that comes again replaces the earlier
    // value, as nlohmann does (strict: declines). Null when the key is not well-formed.
    json* element(json& container) {
        if (container.is_array()) return &container.get_ref<json::array_t&>().emplace_back();
        std::string key;
        if (!lexer_.take_after_space('"') || !lexer_.string(key) || !lexer_.take_after_space(':')) {
            return nullptr;
        }
        auto& members = container.get_ref<json::object_t&>();
        const auto [member, inserted] = members.insert_or_assign(std::move(key), json());
        if (strict_ && !inserted) return nullptr;
        return &member->second;
    }

    FastJsonLexer lexer_;
    std::size_t max_depth_;
    bool strict_;
};

}  // namespace

bool FastJsonLexer::literal(std::string_view word) noexcept {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::string_view(p_, word.size()) != word) {
        return false;
    }
    p_ += word.size();
    return true;
}

bool FastJsonLexer::string(std::string& out) {
    for (;;) {
        const char* start = p_;
        bool wide = false;
        // Eight bytes at a time while none of them ends the run (a quote, a backslash, a
        // control character); the exact byte is then found one at a time.
        constexpr std::uint64_t ones = 0x0101010101010101U;
        constexpr std::uint64_t highs = 0x8080808080808080U;
        while (end_ - p_ >= 8) {
            std::uint64_t word = 0;
            std::memcpy(&word, p_, 8);
            const std::uint64_t quote = word ^ (ones * '"');
            const std::uint64_t backslash = word ^ (ones * '\\');
            // A byte is zero, or below 0x20, exactly when its high bit survives these masks
            // (the borrow of a lower byte can mark a higher one only when the lower one hit).
            const std::uint64_t stops = ((quote - ones) & ~quote) |
                                        ((backslash - ones) & ~backslash) |
                                        ((word - ones * 0x20) & ~word);
            if ((stops & highs) != 0) break;
            wide = wide || (word & highs) != 0;
            p_ += 8;
        }
        while (p_ != end_) {
            const auto byte = static_cast<unsigned char>(*p_);
            if (byte == '"' || byte == '\\' || byte < 0x20) break;
            wide = wide || byte >= 0x80;
            ++p_;
        }
        if (p_ == end_) return false;
        const std::string_view run(start, static_cast<std::size_t>(p_ - start));
        if (wide && !is_valid_utf8(run)) return false;
        out.append(run);
        const char c = *p_++;
        if (c == '"') return true;
        if (c != '\\' || p_ == end_) return false;  // a control character, or a cut escape
        switch (*p_++) {
            case '"':
                out += '"';
                break;
            case '\\':
                out += '\\';
                break;
            case '/':
                out += '/';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'n':
                out += '\n';
                break;
            case 'r':
                out += '\r';
                break;
            case 't':
                out += '\t';
                break;
            case 'u': {
                std::uint32_t code = 0;
                if (!hex4(code)) return false;
                if (code >= 0xDC00 && code <= 0xDFFF) return false;
                if (code >= 0xD800 && code <= 0xDBFF) {
                    std::uint32_t low = 0;
                    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
                    p_ += 2;
                    if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                }
                append_utf8(out, code);
                break;
            }
            default:
                return false;
        }
    }
}

bool FastJsonLexer::hex4(std::uint32_t& code) noexcept {
    if (end_ - p_ < 4) return false;
    for (int i = 0; i < 4; ++i) {
        const int digit = detail::hex_digit_value(*p_++);
        if (digit < 0) return false;
        code = (code << 4) | static_cast<std::uint32_t>(digit);
    }
    return true;
}

// JSON's number grammar. A double is correctly rounded, as nlohmann's strtod rounds it;
// declines what overflows.
bool FastJsonLexer::number(Number& out) {
    const char* start = p_;
    const bool negative = *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_) return false;
    std::uint64_t magnitude = 0;
    bool overflow = false;
    if (*p_ == '0') {
        ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
        while (p_ != end_ && *p_ >= '0' && *p_ <= '9') {
            const auto digit = static_cast<std::uint64_t>(*p_ - '0');
            overflow = overflow || magnitude > (UINT64_MAX - digit) / 10;
            magnitude = magnitude * 10 + digit;
            ++p_;
        }
    } else {
        return false;
    }
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
        integral = false;
        ++p_;
        if (!digits()) return false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
        integral = false;
        ++p_;
        if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
        if (!digits()) return false;
    }
    out.text = std::string_view(start, static_cast<std::size_t>(p_ - start));
    if (integral) {
        if (overflow) return false;
        if (!negative) {
            out.kind = Number::Kind::unsigned_integer;
            out.unsigned_value = magnitude;
            return true;
        }
        if (magnitude > std::uint64_t{1} << 63) return false;
        out.kind = Number::Kind::integer;
        out.integer_value =
            magnitude == std::uint64_t{1} << 63 ? INT64_MIN : -static_cast<std::int64_t>(magnitude);
        return true;
    }
    double value = 0;
    const auto [end, error] = std::from_chars(start, p_, value);
    if (error != std::errc() || end != p_) return false;
    out.kind = Number::Kind::floating;
    out.float_value = value;
    return true;
}

bool FastJsonLexer::digits() noexcept {
    const char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
}

namespace {

std::optional<json> build_dom(std::string_view text, std::size_t max_depth, bool strict) {
    json root;
    DomBuilder builder(text, max_depth, strict);
    if (!builder.parse(root)) return std::nullopt;
    return root;
}

}  // namespace

std::optional<json> parse_json_fast(std::string_view text) {
    return build_dom(text, FastJsonLexer::max_depth, false);
}

std::optional<json> parse_json_fast_strict(std::string_view text, std::size_t max_depth) {
    return build_dom(text, max_depth, true);
}

}  // namespace ullm::detail
