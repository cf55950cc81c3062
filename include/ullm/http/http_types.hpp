#pragma once

/// Plain HTTP request and response values exchanged with a `Transport`.

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm {

/// HTTP header fields in order. Names keep the case they were given; lookups ignore case.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

/// The first value of header `name` (ASCII case-insensitive), or nullopt.
[[nodiscard]] inline std::optional<std::string> find_header(const HttpHeaders& headers,
                                                            std::string_view name) {
    const auto lower = [](char c) {
        return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    };
    for (const auto& [key, value] : headers) {
        if (key.size() == name.size() &&
            std::equal(key.begin(), key.end(), name.begin(),
                       [&](char a, char b) { return lower(a) == lower(b); })) {
            return value;
        }
    }
    return std::nullopt;
}

/// One HTTP request. A value type.
struct HttpRequest {
    std::string method = "POST";
    std::string url;
    HttpHeaders headers;
    std::string body;
    /// Longest wait to establish the connection (TCP and TLS).
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
    /// Longest silence while waiting for response bytes; streams have no total timeout, only
    /// this one. Zero disables it.
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(120)};
    /// Header values never to be shown in errors or logs (API keys). Authorization-like headers
    /// (`authorization`, `x-api-key`, `api-key`, `x-goog-api-key`) are treated as secret
    /// without being listed here.
    std::vector<std::string> secrets;
};

/// The status line and headers of a response.
struct HttpResponseHead {
    int status = 0;
    HttpHeaders headers;  ///< Names lower-cased, in the order received.

    [[nodiscard]] std::optional<std::string> header(std::string_view name) const {
        return find_header(headers, name);
    }
};

/// A complete response. Error statuses are responses too: the body is kept for the error.
struct HttpResponse : HttpResponseHead {
    std::string body;
};

}  // namespace ullm
