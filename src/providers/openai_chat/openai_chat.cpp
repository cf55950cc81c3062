#include <ullm/providers/openai_chat.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <utility>

#include "../base_url.hpp"
#include "../json_readers.hpp"
#include "../openai_common.hpp"
#include "../openai_embeddings.hpp"
#include "../response_builder.hpp"
#include "openai_chat_internal.hpp"

namespace ullm {

namespace {

// The adapter's internal pieces (openai_chat_internal.hpp).
namespace openai_chat = detail::openai_chat;

using detail::is_openai_reasoning_model;
using detail::string_field;

}  // namespace

OpenAiChatProvider::OpenAiChatProvider(OpenAiChatOptions options) : options_(std::move(options)) {
    options_.base_url = detail::trimmed_base_url(std::move(options_.base_url));
    auto embeddings = detail::embedding_settings(options_);
    embeddings.base64 = options_.embeddings_base64.value_or(options_.provider_name == "openai");
    embeddings.ollama_native = options_.embeddings_api == OpenAiEmbeddingsApi::ollama;
    embeddings.max_inputs = options_.embeddings_max_inputs;
    embeddings_ = detail::make_openai_embedding_codec(std::move(embeddings));
}

const EmbeddingCodec* OpenAiChatProvider::embeddings() const noexcept {
    return embeddings_.get();
}

std::string_view OpenAiChatProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities OpenAiChatProvider::capabilities(std::string_view model) const {
    ProviderCapabilities capabilities;
    capabilities.documents = options_.provider_name == "openai";
    capabilities.reasoning = true;
    if (options_.provider_name == "openai") {
        capabilities.response_schema = ResponseSchemaRules::openai_strict;
    }
    if (options_.provider_name == "openai" && is_openai_reasoning_model(model)) {
        capabilities.temperature = false;
        capabilities.top_p = false;
    }
    return capabilities;
}

json OpenAiChatProvider::encode_body(const ChatRequest& request, bool stream) const {
    json body = {{"model", request.model}};
    json messages = json::array();
    std::string system = request.system;
    if (request.response_format && !options_.json_schema_output) {
        // JSON mode constrains the reply to JSON only: the schema travels in words.
        if (!system.empty()) system += "\n\n";
        system +=
            "Reply with only a JSON value that matches this JSON Schema:\n" +
            request.response_format->schema.dump(-1, ' ', false, json::error_handler_t::replace);
    }
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", std::move(system)}});
    for (const auto& message : request.messages) openai_chat::encode_message(message, messages);
    body["messages"] = std::move(messages);

    if (!request.tools.empty()) {
        json tools = json::array();
        for (const auto& tool : request.tools) {
            tools.push_back({{"type", "function"},
                             {"function",
                              {{"name", tool.name},
                               {"description", tool.description},
                               {"parameters", tool.parameters}}}});
        }
        body["tools"] = std::move(tools);
    }
    if (request.tool_choice) {
        body["tool_choice"] = detail::openai_tool_choice(
            *request.tool_choice,
            json{{"type", "function"}, {"function", {{"name", request.tool_choice->name}}}});
    }
    if (request.max_tokens) {
        const bool completion_field =
            options_.use_max_completion_tokens.value_or(options_.provider_name == "openai");
        body[completion_field ? "max_completion_tokens" : "max_tokens"] = *request.max_tokens;
    }
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (!request.stop.empty()) body["stop"] = request.stop;
    if (request.response_format && !options_.json_schema_output) {
        body["response_format"] = {{"type", "json_object"}};
    } else if (request.response_format) {
        body["response_format"] = {{"type", "json_schema"},
                                   {"json_schema",
                                    {{"name", request.response_format->name},
                                     {"schema", request.response_format->schema},
                                     {"strict", request.response_format->strict}}}};
    }
    if (stream) {
        body["stream"] = true;
        if (options_.stream_usage) body["stream_options"] = {{"include_usage", true}};
    }
    for (const auto& [key, value] : request.provider_options.items()) body[key] = value;
    return body;
}

HttpRequest OpenAiChatProvider::encode(const ChatRequest& request, bool stream) const {
    const json body = encode_body(request, stream);
    return detail::openai_request(
        options_,
        {.url = options_.base_url + "/chat/completions", .body = &body, .event_stream = stream});
}

ChatResponse OpenAiChatProvider::decode(const HttpResponse& response,
                                        const ChatRequest& request) const {
    ErrorOrigin origin = openai_chat::origin_of(name(), request.model, &response);
    if (response.status < 200 || response.status > 299) {
        detail::openai_chat::throw_status_failure(response, origin);
    }
    const json body = parse_provider_json(response.body, origin);
    if (!body.is_object()) throw_invalid_response("the response body is not a JSON object", origin);
    if (const auto error = body.find("error"); error != body.end() && !error->is_null()) {
        throw_provider_failure(openai_chat::failure_from_body(body, response.status), origin);
    }
    const auto choices = body.find("choices");
    if (choices == body.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        throw_invalid_response("the response has no choices", origin);
    }
    const json& choice = (*choices)[0];
    const auto message = choice.find("message");
    if (message == choice.end() || !message->is_object()) {
        throw_invalid_response("the first choice has no message", origin);
    }

    detail::ResponseBuilder builder;
    std::string text;
    std::string reasoning = openai_chat::decode_reasoning(*message);
    if (const auto content = message->find("content"); content != message->end()) {
        openai_chat::decode_content(*content, text, reasoning);
    }
    builder.add_reasoning(reasoning);
    builder.add_text(text);
    builder.add_refusal(string_field(*message, "refusal"));
    if (const auto calls = message->find("tool_calls");
        calls != message->end() && calls->is_array()) {
        std::size_t index = 0;
        for (const auto& call : *calls) {
            const auto function = call.find("function");
            if (!call.is_object() || function == call.end() || !function->is_object()) {
                throw_invalid_response("tool call " + std::to_string(index) + " has no function",
                                       origin);
            }
            std::string id = string_field(call, "id");
            if (id.empty()) id = "call_" + std::to_string(index);
            const auto arguments = function->find("arguments");
            const std::string arguments_text =
                arguments == function->end() || arguments->is_null() ? std::string()
                : arguments->is_string()                             ? arguments->get<std::string>()
                                                                     : arguments->dump();
            builder.add_tool_call({id, string_field(*function, "name"),
                                   detail::parse_tool_arguments(arguments_text)});
            ++index;
        }
    }
    const std::string finish = string_field(choice, "finish_reason");
    builder.set_finish(openai_chat::map_finish(finish), finish);
    const bool reasoning_apart = options_.provider_name == "xai";
    builder.usage() =
        openai_chat::decode_usage(body.value("usage", json::object()), reasoning_apart);
    if (builder.usage().input_tokens == 0) {
        if (const auto groq = body.find("x_groq"); groq != body.end() && groq->is_object()) {
            builder.usage() =
                openai_chat::decode_usage(groq->value("usage", json::object()), reasoning_apart);
        }
    }
    builder.set_model(string_field(body, "model"));
    builder.set_request_id(origin.request_id.empty() ? string_field(body, "id")
                                                     : origin.request_id);
    return std::move(builder).build(std::string(name()));
}

std::unique_ptr<StreamDecoder> OpenAiChatProvider::stream_decoder(
    const ChatRequest& request) const {
    return openai_chat::make_stream_decoder(std::string(name()), request.model);
}

}  // namespace ullm
