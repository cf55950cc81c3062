#pragma once

/// Internal: keeps secrets (API keys) out of error messages and logs.

#include <ullm/http/http_types.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ullm::detail {

/// Whether a header carries credentials by its name alone.
[[nodiscard]] inline bool is_secret_header(std::string_view name) {
    std::string lower(name);
    for (auto& c : lower) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return lower == "authorization" || lower == "proxy-authorization" || lower == "x-api-key" ||
           lower == "api-key" || lower == "x-goog-api-key" || lower == "cookie";
}

/// The secret values of a request: the listed secrets and every credential header's value
/// (and, for `Bearer`/`Basic` schemes, the token alone).
[[nodiscard]] inline std::vector<std::string> request_secrets(const HttpRequest& request) {
    std::vector<std::string> out = request.secrets;
    for (const auto& [name, value] : request.headers) {
        if (!is_secret_header(name) || value.empty()) continue;
        out.push_back(value);
        if (const auto space = value.find(' '); space != std::string::npos) {
            out.push_back(value.substr(space + 1));
        }
    }
    return out;
}

/// `text` with every occurrence of each secret (at least 4 characters long) replaced by
/// `[redacted]`, and the value of any `key=` / `api_key=` URL query parameter too.
[[nodiscard]] inline std::string redact(std::string text, const std::vector<std::string>& secrets) {
    for (const auto& secret : secrets) {
        if (secret.size() < 4) continue;
        for (auto pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos)) {
            text.replace(pos, secret.size(), "[redacted]");
            pos += 10;
        }
    }
    for (const std::string_view param : {"key=", "api_key=", "apikey="}) {
        for (auto pos = text.find(param); pos != std::string::npos; pos = text.find(param, pos)) {
            const bool at_boundary = pos > 0 && (text[pos - 1] == '?' || text[pos - 1] == '&');
            pos += param.size();
            if (!at_boundary) continue;
            auto end = text.find_first_of("& \t\r\n\"'", pos);
            if (end == std::string::npos) end = text.size();
            text.replace(pos, end - pos, "[redacted]");
        }
    }
    return text;
}

}  // namespace ullm::detail
