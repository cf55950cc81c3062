#include "openai_chat_internal.hpp"

#include <ullm/detail/json_checks.hpp>

#include <cstdint>

#include "../json_readers.hpp"

namespace ullm::detail::openai_chat {

ProviderFailure failure_from_body(const json& body, int status) {
    ProviderFailure failure;
    failure.status = status;
    const json* error = &body;
    if (const auto it = body.find("error"); it != body.end()) {
        if (it->is_string()) failure.message = it->get<std::string>();
        if (it->is_object()) error = &*it;
    }
    if (failure.message.empty()) failure.message = string_field(*error, "message");
    if (failure.message.empty()) failure.message = string_field(*error, "detail");
    failure.type = string_field(*error, "type");
    if (const auto code = error->find("code"); code != error->end()) {
        if (code->is_string()) {
            failure.code = code->get<std::string>();
        } else if (code->is_number_integer()) {
            const auto number = code->get<std::int64_t>();
            failure.code = std::to_string(number);
            // llama.cpp and routers put the HTTP status here, also inside a 200 stream.
            if (status < 400 && number >= 400 && number <= 599) {
                failure.status = static_cast<int>(number);
            }
        }
    }
    // An error inside a 2xx body or stream that names no status is the provider's fault.
    if (failure.status < 400) failure.status = 502;
    return failure;
}

void throw_status_failure(const HttpResponse& response, const ErrorOrigin& origin) {
    const json body = detail::parse_json_exact(response.body);
    ProviderFailure failure =
        body.is_object() ? failure_from_body(body, response.status)
                         : ProviderFailure{response.status, "", "", response.body, std::nullopt};
    failure.status = response.status;
    failure.retry_after = retry_hint(response);
    throw_provider_failure(failure, origin);
}

}  // namespace ullm::detail::openai_chat
