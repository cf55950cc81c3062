#pragma once

// Internal: the text helpers that headers and wire values need, locale-free.

#include <cstdint>
#include <string>
#include <string_view>

namespace ullm::detail {

/// `text` with 'A'..'Z' lowered; other bytes (UTF-8 included) unchanged.
inline std::string lower_ascii(std::string_view text) {
    std::string out(text);
    for (auto& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

/// `text` without leading and trailing spaces, tabs, CRs and LFs.
constexpr std::string_view trim_space(std::string_view text) noexcept {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

/// Whether `text` is empty or holds only ASCII whitespace (space, tab, LF, CR, FF, VT).
constexpr bool is_blank(std::string_view text) noexcept {
    return text.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos;
}

/// The value of the hexadecimal digit `c` (either case), or -1 when `c` is none.
constexpr int hex_digit_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Appends the UTF-8 encoding of `code` (a scalar value, at most U+10FFFF) to `out`.
inline void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
    }
}

}  // namespace ullm::detail
