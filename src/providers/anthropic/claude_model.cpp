#include "anthropic_internal.hpp"

#include <algorithm>
#include <cctype>

namespace ullm::detail::anthropic {

namespace {

bool small_number(std::string_view token) {
    return !token.empty() && token.size() <= 2 &&
           std::all_of(token.begin(), token.end(),
                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

ClaudeModel parse_claude_model(std::string_view model) {
    ClaudeModel out;
    const auto at = model.find("claude-");
    if (at == std::string_view::npos) return out;
    const std::string_view rest = model.substr(at + 7);
    bool after_major = false;
    std::size_t pos = 0;
    while (pos <= rest.size()) {
        std::size_t end = rest.find_first_of("-@:", pos);
        if (end == std::string_view::npos) end = rest.size();
        const std::string_view token = rest.substr(pos, end - pos);
        const auto dot = token.find('.');
        if (small_number(token)) {
            const int value = std::stoi(std::string(token));
            if (!out.known) {
                out.known = true;
                out.major = value;
                after_major = true;
            } else {
                if (after_major) out.minor = std::min(value, 9);
                after_major = false;
            }
        } else if (!out.known && dot != std::string_view::npos &&
                   small_number(token.substr(0, dot)) && small_number(token.substr(dot + 1))) {
            // Legacy ids such as "claude-2.1".
            out.known = true;
            out.major = std::stoi(std::string(token.substr(0, dot)));
            out.minor = std::min(std::stoi(std::string(token.substr(dot + 1))), 9);
            after_major = false;
        } else {
            if (out.family.empty() && !token.empty() &&
                std::isalpha(static_cast<unsigned char>(token.front())) != 0) {
                out.family = std::string(token);
            }
            after_major = false;
        }
        // Bedrock ("…-v2:0") and Vertex ("…@20241022") suffixes end the id proper.
        if (end == rest.size() || rest[end] != '-') break;
        pos = end + 1;
    }
    return out;
}

}  // namespace ullm::detail::anthropic
