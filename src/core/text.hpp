#pragma once

// Internal: the ASCII text helpers that headers and wire values need, locale-free.

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

}  // namespace ullm::detail
