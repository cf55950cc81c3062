// Fuzz target: a provider adapter's `decode` of a complete response (built once per adapter;
// see provider_fuzz.hpp).
//
// Only `ullm::Error` may leave `decode`. A response it returns must come from a 2xx status
// and a body that is one whole JSON text (the adapter documents every other body as an
// error).
//
// Header bytes: options bits 0-1 pick the request's model and bits 2-3 the adapter variant;
// bit 4 set means the payload starts with response header lines (`name: value`, up to an
// empty line) before the body. The chunking byte picks the HTTP status. The seed is unused.

#include "provider_fuzz.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace {

constexpr int statuses[] = {200, 200, 200, 201, 204, 400, 401, 403, 404, 408, 409, 413,
                            422, 429, 500, 502, 503, 504, 529, 299, 300, 100, 0,   599};

// Splits `name: value` lines off the front of `payload` (names lower-cased, as the transport
// delivers them), up to an empty line.
ullm::HttpHeaders take_headers(std::string_view& payload) {
    ullm::HttpHeaders headers;
    while (!payload.empty()) {
        const std::size_t end = payload.find('\n');
        const std::string_view line = payload.substr(0, end);
        payload.remove_prefix(end == std::string_view::npos ? payload.size() : end + 1);
        if (line.empty()) break;
        const std::size_t colon = line.find(':');
        std::string name(line.substr(0, colon));
        for (char& c : name) {
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        }
        std::string_view value =
            colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        headers.emplace_back(std::move(name), std::string(value));
    }
    return headers;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const auto subject = ullm::fuzz::make_subject(input->options);
    std::string_view payload = input->payload;

    ullm::HttpResponse response;
    response.status = statuses[input->chunking % std::size(statuses)];
    if ((input->options & 0x10) != 0) response.headers = take_headers(payload);
    response.body = std::string(payload);

    std::optional<ullm::ChatResponse> decoded;
    const auto failure =
        ullm::fuzz::capture([&] { decoded = subject.provider->decode(response, subject.request); });
    if (failure) return 0;
    if (response.status < 200 || response.status > 299) {
        ullm::fuzz::finding(
            "decode returned a response for a non-2xx status",
            "status " + std::to_string(response.status) + "\n" + ullm::fuzz::describe(*decoded));
    }
    if (!ullm::fuzz::is_whole_json(response.body)) {
        ullm::fuzz::finding(
            "decode returned a response for a body that is not one JSON text",
            "body " + ullm::fuzz::quote(response.body) + "\n" + ullm::fuzz::describe(*decoded));
    }
    return 0;
}
