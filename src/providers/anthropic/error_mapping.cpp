#include "anthropic_internal.hpp"

#include "../json_readers.hpp"

namespace ullm::detail::anthropic {

namespace {

int status_for_error_type(std::string_view type) {
    if (type == "invalid_request_error") return 400;
    if (type == "authentication_error") return 401;
    if (type == "billing_error") return 402;
    if (type == "permission_error") return 403;
    if (type == "not_found_error") return 404;
    if (type == "request_too_large") return 413;
    if (type == "rate_limit_error") return 429;
    if (type == "timeout_error") return 504;
    if (type == "overloaded_error") return 529;
    return 500;  // api_error and types we do not know
}

}  // namespace

// `{"type":"error","error":{"type":…,"message":…},"request_id":…}`. For an error inside a 2xx
// body or stream, the status is the one the error type implies.
ProviderFailure failure_from_body(const json& body, int status) {
    ProviderFailure failure;
    failure.status = status;
    const json* error = &body;
    if (const auto it = body.find("error"); it != body.end()) {
        if (it->is_object()) {
            error = &*it;
        } else if (it->is_string()) {
            failure.message = it->get<std::string>();
            error = nullptr;
        }
    }
    if (error != nullptr) {
        failure.type = string_field(*error, "type");
        failure.message = string_field(*error, "message");
        if (failure.type == "error") failure.type.clear();
    }
    if (status < 400) failure.status = status_for_error_type(failure.type);
    return failure;
}

}  // namespace ullm::detail::anthropic
