#pragma once

/// Internal: keeps secrets (API keys) out of error messages and logs.

#include <ullm/http/http_types.hpp>

#include <algorithm>
#include <cstddef>
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

/// Whether a URL query parameter carries credentials by its name alone (`key`, `api_key`,
/// `access_token`, `token`, `sig`, …).
[[nodiscard]] inline bool is_secret_query_parameter(std::string_view name) {
    std::string lower(name);
    for (auto& c : lower) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return lower == "key" || lower == "api_key" || lower == "apikey" || lower == "api-key" ||
           lower == "token" || lower == "access_token" || lower == "auth" || lower == "password" ||
           lower == "secret" || lower == "sig" || lower == "signature";
}

/// The secret values of a request: the listed secrets, every credential header's value (and,
/// for `Bearer`/`Basic` schemes, the token alone), and the value of every credential query
/// parameter of the URL.
[[nodiscard]] inline std::vector<std::string> request_secrets(const HttpRequest& request) {
    std::vector<std::string> out;
    for (const auto& secret : request.secrets) {
        if (!secret.empty()) out.push_back(secret);
    }
    for (const auto& [name, value] : request.headers) {
        if (!is_secret_header(name) || value.empty()) continue;
        out.push_back(value);
        if (const auto space = value.find(' '); space != std::string::npos) {
            out.push_back(value.substr(space + 1));
        }
    }
    const std::string_view url = request.url;
    if (const auto query = url.find('?'); query != std::string_view::npos) {
        std::string_view rest = url.substr(query + 1);
        if (const auto fragment = rest.find('#'); fragment != std::string_view::npos) {
            rest = rest.substr(0, fragment);
        }
        while (!rest.empty()) {
            const auto amp = rest.find('&');
            const std::string_view pair = rest.substr(0, amp);
            rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
            const auto equals = pair.find('=');
            if (equals == std::string_view::npos) continue;
            const std::string_view value = pair.substr(equals + 1);
            if (!value.empty() && is_secret_query_parameter(pair.substr(0, equals))) {
                out.emplace_back(value);
            }
        }
    }
    return out;
}

/// How many leading characters of a secret, seen in a text, count as the secret: a message
/// cut at a length limit may end inside it, and even its first characters identify it.
inline constexpr std::size_t redact_prefix_chars = 8;

/// `text` with every occurrence of each secret (at least 4 characters long) replaced by
/// `[redacted]`, and so is any run of at least `redact_prefix_chars` of its leading characters
/// (what remains where a message was cut inside the secret); the value of any `key=` /
/// `api_key=` URL query parameter is redacted too. A secret holding a space (a header value
/// with its scheme) is redacted only whole.
[[nodiscard]] inline std::string redact(std::string text, const std::vector<std::string>& secrets) {
    constexpr std::string_view marker = "[redacted]";
    for (const auto& secret : secrets) {
        if (secret.size() < 4) continue;
        // A credential header's whole value ("Bearer …") is matched whole; its token alone is
        // a secret of its own.
        const bool whole = secret.find(' ') != std::string::npos;
        const std::size_t least =
            whole ? secret.size() : std::min(secret.size(), redact_prefix_chars);
        const std::string_view head(secret.data(), least);
        for (auto pos = text.find(head); pos != std::string::npos; pos = text.find(head, pos)) {
            std::size_t length = least;
            while (length < secret.size() && pos + length < text.size() &&
                   text[pos + length] == secret[length]) {
                ++length;
            }
            text.replace(pos, length, marker);
            pos += marker.size();
        }
    }
    for (const std::string_view param : {"key=", "api_key=", "apikey="}) {
        for (auto pos = text.find(param); pos != std::string::npos; pos = text.find(param, pos)) {
            const bool at_boundary = pos > 0 && (text[pos - 1] == '?' || text[pos - 1] == '&');
            pos += param.size();
            if (!at_boundary) continue;
            auto end = text.find_first_of("& \t\r\n\"'", pos);
            if (end == std::string::npos) end = text.size();
            text.replace(pos, end - pos, marker);
        }
    }
    return text;
}

}  // namespace ullm::detail
