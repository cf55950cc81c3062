#include "gemini_internal.hpp"

#include <ullm/detail/json_checks.hpp>
#include <ullm/http/retry_policy.hpp>

#include <chrono>
#include <map>

#include "../json_readers.hpp"

namespace ullm::detail::gemini {

namespace {

int status_of_grpc(std::string_view status) {
    static const std::map<std::string_view, int> statuses = {
        {"INVALID_ARGUMENT", 400},   {"FAILED_PRECONDITION", 400},
        {"OUT_OF_RANGE", 400},       {"UNAUTHENTICATED", 401},
        {"PERMISSION_DENIED", 403},  {"NOT_FOUND", 404},
        {"ALREADY_EXISTS", 409},     {"ABORTED", 409},
        {"RESOURCE_EXHAUSTED", 429}, {"CANCELLED", 499},
        {"INTERNAL", 500},           {"UNKNOWN", 500},
        {"DATA_LOSS", 500},          {"UNIMPLEMENTED", 501},
        {"UNAVAILABLE", 503},        {"DEADLINE_EXCEEDED", 504},
    };
    const auto it = statuses.find(status);
    return it == statuses.end() ? 0 : it->second;
}

}  // namespace

// What an `{"error": …}` value says. `http_status` is the response status (2xx inside a body or
// stream that arrived with 200).
ProviderFailure failure_from_error(const json& error, int http_status,
                                   const HttpResponseHead* head) {
    ProviderFailure failure;
    int status = http_status >= 400 ? http_status : 0;
    std::optional<std::chrono::milliseconds> retry_delay;
    if (error.is_string()) {
        failure.message = error.get<std::string>();
    } else if (error.is_object()) {
        failure.message = string_field(error, "message");
        failure.type = string_field(error, "status");
        if (status == 0) {
            const auto code = count_field(error, "code");
            if (code >= 400 && code <= 599) status = static_cast<int>(code);
        }
        if (status == 0) status = status_of_grpc(failure.type);
        if (const auto details = error.find("details");
            details != error.end() && details->is_array()) {
            for (const auto& detail : *details) {
                const std::string type = string_field(detail, "@type");
                if (ends_with(type, "google.rpc.RetryInfo")) {
                    retry_delay = RetryPolicy::parse_duration(string_field(detail, "retryDelay"));
                } else if (ends_with(type, "google.rpc.ErrorInfo") && failure.code.empty()) {
                    failure.code = string_field(detail, "reason");
                }
            }
        }
    }
    // Gemini answers an invalid API key with 400 INVALID_ARGUMENT; it is a credential failure.
    if (failure.code == "API_KEY_INVALID" && (status == 400 || status == 0)) status = 401;
    // With no status of its own, an error keeps the response's (a redirect is not a 500), and
    // one inside a 200 stream is a server failure.
    if (status == 0 && http_status > 0 && (http_status < 200 || http_status > 299)) {
        status = http_status;
    }
    failure.status = status == 0 ? 500 : status;
    if (head != nullptr) {
        if (const auto value = head->header("retry-after")) {
            failure.retry_after = RetryPolicy::parse_retry_after(*value);
        }
    }
    if (!failure.retry_after) failure.retry_after = retry_delay;
    return failure;
}

// The error value of a body: `{"error": …}`, or the first element's in the array form.
const json* error_of(const json& body) {
    const json* object = &body;
    if (body.is_array() && !body.empty()) object = &body.front();
    if (!object->is_object()) return nullptr;
    const auto error = object->find("error");
    return error == object->end() || error->is_null() ? nullptr : &*error;
}

void throw_status_failure(const HttpResponse& response, const ErrorOrigin& origin) {
    const json body = detail::parse_json_exact(response.body);
    const json* error = body.is_discarded() ? nullptr : error_of(body);
    throw_provider_failure(
        error != nullptr ? failure_from_error(*error, response.status, &response)
                         : failure_from_error(json(response.body), response.status, &response),
        origin);
}

}  // namespace ullm::detail::gemini
