#include "openai_responses_internal.hpp"

#include "../json_readers.hpp"

namespace ullm::detail::openai_responses {

namespace {

// The HTTP status an error code or type carried inside a 200 body or stream stands for.
int status_for(const std::string& code, const std::string& type) {
    const auto is = [&](std::string_view value) { return code == value || type == value; };
    if (is("rate_limit_exceeded") || is("insufficient_quota") || is("rate_limit_error") ||
        is("requests") || is("tokens")) {
        return 429;
    }
    if (is("invalid_api_key") || is("authentication_error")) return 401;
    if (is("permission_denied") || is("permission_error")) return 403;
    if (code.find("overloaded") != std::string::npos ||
        type.find("overloaded") != std::string::npos) {
        return 529;
    }
    if ((code.empty() && type.empty()) || is("server_error") || is("internal_error") ||
        is("api_error") || is("vector_store_timeout")) {
        return 500;
    }
    return 400;
}

}  // namespace

// Reads an error: `{"error": {code, message, type}}`, `{"error": "text"}`, an error object, or
// an `error` stream event with the fields at its top level. `status` 0 derives the status
// from the code, for errors inside a 200 body or stream.
ProviderFailure failure_from(const json& value, int status) {
    ProviderFailure failure;
    const json* error = &value;
    bool nested = false;
    if (value.is_object()) {
        if (const auto it = value.find("error"); it != value.end()) {
            if (it->is_object()) {
                error = &*it;
                nested = true;
            } else if (it->is_string()) {
                failure.message = it->get<std::string>();
            }
        }
    }
    if (failure.message.empty()) failure.message = string_field(*error, "message");
    // At the top level of an `error` event, `type` names the event, not the error.
    if (nested || string_field(value, "type") != "error")
        failure.type = string_field(*error, "type");
    if (error->is_object()) {
        if (const auto code = error->find("code"); code != error->end()) {
            if (code->is_string()) {
                failure.code = code->get<std::string>();
            } else if (code->is_number_integer()) {
                failure.code = std::to_string(code->get<std::int64_t>());
            }
        }
    }
    failure.status = status != 0 ? status : status_for(failure.code, failure.type);
    if (failure.message.empty() && status == 0) failure.message = "the response failed";
    return failure;
}

}  // namespace ullm::detail::openai_responses
