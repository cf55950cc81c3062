#include <ullm/providers/openai_responses.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "../base_url.hpp"
#include "../json_readers.hpp"
#include "../openai_common.hpp"
#include "../openai_embeddings.hpp"
#include "openai_responses_internal.hpp"

namespace ullm {

namespace {

// The adapter's internal pieces (openai_responses_internal.hpp).
namespace openai_responses = detail::openai_responses;

using detail::array_field;
using detail::is_openai_reasoning_model;
using detail::object_field;
using detail::string_field;

// Refuses an id that could not be a response's: it becomes a path segment as it is.
void check_response_id(std::string_view id) {
    const bool plain = std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
    if (id.empty() || id.size() > 256 || !plain) {
        throw InvalidOptionError(
            ErrorCode::invalid_response_id,
            "a response id is 1 to 256 ASCII letters, digits, '_' or '-'; got " +
                (id.empty() ? std::string("an empty one")
                            : "\"" + sanitise_provider_message(id, 80) + "\""));
    }
}

}  // namespace

OpenAiResponsesProvider::OpenAiResponsesProvider(OpenAiResponsesOptions options)
    : options_(std::move(options)) {
    options_.base_url = detail::trimmed_base_url(std::move(options_.base_url));
    auto embeddings = detail::embedding_settings(options_);
    embeddings.base64 =
        options_.provider_name == "openai" || options_.provider_name == "openai-responses";
    embeddings_ = detail::make_openai_embedding_codec(std::move(embeddings));
}

const EmbeddingCodec* OpenAiResponsesProvider::embeddings() const noexcept {
    return embeddings_.get();
}

std::string_view OpenAiResponsesProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities OpenAiResponsesProvider::capabilities(std::string_view model) const {
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = true;
    capabilities.stop_sequences = false;
    capabilities.response_schema = ResponseSchemaRules::openai_strict;
    if (is_openai_reasoning_model(model)) {
        capabilities.temperature = false;
        capabilities.top_p = false;
    }
    return capabilities;
}

json OpenAiResponsesProvider::encode_body(const ChatRequest& request, bool stream) const {
    if (request.max_tokens && *request.max_tokens < 16) {
        throw InvalidOptionError(ErrorCode::invalid_max_tokens,
                                 "the Responses API needs max_tokens of at least 16, got " +
                                     std::to_string(*request.max_tokens));
    }
    json body = {{"model", request.model}, {"store", false}};
    if (!request.system.empty()) body["instructions"] = request.system;
    json input = json::array();
    for (const auto& message : request.messages) {
        openai_responses::encode_message(message, name(), request.model, input);
    }
    body["input"] = std::move(input);

    if (!request.tools.empty()) {
        json tools = json::array();
        for (const auto& tool : request.tools) {
            tools.push_back({{"type", "function"},
                             {"name", tool.name},
                             {"description", tool.description},
                             {"parameters", tool.parameters},
                             {"strict", options_.strict_tools}});
        }
        body["tools"] = std::move(tools);
    }
    if (request.tool_choice) {
        body["tool_choice"] = detail::openai_tool_choice(
            *request.tool_choice, json{{"type", "function"}, {"name", request.tool_choice->name}});
    }
    if (request.max_tokens) body["max_output_tokens"] = *request.max_tokens;
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (request.response_format) {
        body["text"] = {{"format",
                         {{"type", "json_schema"},
                          {"name", request.response_format->name},
                          {"schema", request.response_format->schema},
                          {"strict", request.response_format->strict}}}};
    }
    if (options_.include_encrypted_reasoning.value_or(is_openai_reasoning_model(request.model))) {
        body["include"] = json::array({"reasoning.encrypted_content"});
    }
    if (stream) body["stream"] = true;
    for (const auto& [key, value] : request.provider_options.items()) body[key] = value;
    return body;
}

HttpRequest OpenAiResponsesProvider::encode(const ChatRequest& request, bool stream) const {
    const json body = encode_body(request, stream);
    return detail::openai_request(
        options_, {.url = options_.base_url + "/responses", .body = &body, .event_stream = stream});
}

ChatResponse OpenAiResponsesProvider::decode(const HttpResponse& response,
                                             const ChatRequest& request) const {
    ErrorOrigin origin{std::string(name()), request.model,
                       response.header("x-request-id").value_or("")};
    if (response.status < 200 || response.status > 299) {
        const json body = detail::parse_json_exact(response.body);
        ProviderFailure failure =
            body.is_object()
                ? openai_responses::failure_from(body, response.status)
                : ProviderFailure{response.status, "", "", response.body, std::nullopt};
        failure.retry_after = retry_hint(response);
        throw_provider_failure(failure, origin);
    }
    const json body = parse_provider_json(response.body, origin);
    if (!body.is_object()) throw_invalid_response("the response body is not a JSON object", origin);
    if (origin.request_id.empty()) origin.request_id = string_field(body, "id");
    const std::string status = string_field(body, "status");
    const json* error = object_field(body, "error");
    const json* output = array_field(body, "output");
    if (status == "failed" || (error != nullptr && output == nullptr)) {
        throw_provider_failure(
            openai_responses::failure_from(error != nullptr ? *error : json::object(), 0), origin);
    }
    const openai_responses::DecodeContext context = openai_responses::context_for(name(), request);
    if (status == "in_progress" || status == "queued") {
        return openai_responses::unfinished(body, status, context, origin);
    }
    const json none = json::array();
    if (output == nullptr && status == "cancelled") output = &none;
    if (output == nullptr) {
        throw_invalid_response("the body has no output array; it is not a Responses API response",
                               origin);
    }
    return openai_responses::interpret(body, *output, context, "completed", origin.request_id);
}

std::unique_ptr<StreamDecoder> OpenAiResponsesProvider::stream_decoder(
    const ChatRequest& request) const {
    return openai_responses::make_stream_decoder(openai_responses::context_for(name(), request));
}

HttpRequest OpenAiResponsesProvider::background_request(const ChatRequest& request,
                                                        std::string_view response_id,
                                                        std::string_view suffix, bool stream,
                                                        std::int64_t starting_after) const {
    check_response_id(response_id);
    std::string url =
        options_.base_url + "/responses/" + std::string(response_id) + std::string(suffix);
    std::string query;
    const auto add = [&query](const std::string& parameter) {
        query += (query.empty() ? "?" : "&") + parameter;
    };
    const bool cancel = !suffix.empty();
    if (!cancel) {
        if (options_.include_encrypted_reasoning.value_or(
                is_openai_reasoning_model(request.model))) {
            add("include%5B%5D=reasoning.encrypted_content");
        }
        if (stream) add("stream=true");
        if (stream && starting_after >= 0) add("starting_after=" + std::to_string(starting_after));
    }
    // A retrieve is a GET; a cancel a POST without a body.
    return detail::openai_request(
        options_, {.method = cancel ? "POST" : "GET", .url = url + query, .event_stream = stream});
}

bool OpenAiResponsesProvider::runs_in_background(const ChatRequest& request) const {
    return openai_responses::context_for(name(), request).background;
}

HttpRequest OpenAiResponsesProvider::encode_retrieve(const ChatRequest& request,
                                                     std::string_view response_id) const {
    return background_request(request, response_id, "", false, -1);
}

HttpRequest OpenAiResponsesProvider::encode_cancel(const ChatRequest& request,
                                                   std::string_view response_id) const {
    return background_request(request, response_id, "/cancel", false, -1);
}

HttpRequest OpenAiResponsesProvider::encode_resume(const ChatRequest& request,
                                                   const StreamPosition& from) const {
    return background_request(request, from.response_id, "", true, from.sequence_number);
}

ChatResponse OpenAiResponsesProvider::decode_retrieved(const HttpResponse& response,
                                                       const ChatRequest& request) const {
    return decode(response, request);
}

std::unique_ptr<StreamDecoder> OpenAiResponsesProvider::resumed_stream_decoder(
    const ChatRequest& request, const StreamPosition& from) const {
    check_response_id(from.response_id);
    return openai_responses::make_resumed_stream_decoder(
        openai_responses::context_for(name(), request), from);
}

}  // namespace ullm
