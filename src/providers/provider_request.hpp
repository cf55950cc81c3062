#pragma once

// Internal: the HTTP request every provider builds from its options, in one place. Each
// provider's options struct keeps its own flat fields (`api_key`, `extra_headers`,
// `connect_timeout`, `idle_timeout`), so that users' designated initialisers stay as they are.

#include <ullm/core/json.hpp>
#include <ullm/http/http_types.hpp>

#include <string>
#include <string_view>
#include <utility>

namespace ullm::detail {

/// Where a provider takes its API key: the header, and what goes before the key in it.
struct KeyHeader {
    std::string_view name;
    std::string_view prefix;
};

/// What one request of a provider is.
struct ProviderCall {
    std::string method = "POST";
    std::string url;
    const json* body =
        nullptr;  ///< Sent as JSON (bytes that are not UTF-8 replaced); none: no body.
    bool event_stream = false;  ///< Asks for `text/event-stream`.
    KeyHeader key;
    HttpHeaders own;  ///< The provider's own headers (an API version, an organisation).
};

/// `call` as an HTTP request under `options` (a provider's options struct): its body and
/// content type, `Accept` for an event stream, the API key (kept among the request's secrets,
/// so that no error text shows it), the provider's own headers, the caller's extra headers
/// last, and the timeouts.
template <class Options>
[[nodiscard]] HttpRequest provider_request(const Options& options, ProviderCall call) {
    HttpRequest http;
    http.method = std::move(call.method);
    http.url = std::move(call.url);
    if (call.body) {
        http.body = call.body->dump(-1, ' ', false, json::error_handler_t::replace);
        http.headers.emplace_back("Content-Type", "application/json");
    }
    if (call.event_stream) http.headers.emplace_back("Accept", "text/event-stream");
    if (!options.api_key.empty()) {
        http.headers.emplace_back(std::string(call.key.name),
                                  std::string(call.key.prefix) + options.api_key);
        http.secrets.push_back(options.api_key);
    }
    for (auto& header : call.own) http.headers.push_back(std::move(header));
    for (const auto& header : options.extra_headers) http.headers.push_back(header);
    http.connect_timeout = options.connect_timeout;
    http.idle_timeout = options.idle_timeout;
    return http;
}

}  // namespace ullm::detail
