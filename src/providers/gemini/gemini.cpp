#include <ullm/providers/gemini.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "../base_url.hpp"
#include "../provider_request.hpp"
#include "gemini_internal.hpp"

namespace ullm {

namespace detail::gemini {

namespace {

bool is_model_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '@';
}

}  // namespace

std::string model_path(std::string_view model) {
    std::string_view id = model;
    std::string_view collection = "models/";
    if (id.starts_with("models/")) {
        id.remove_prefix(7);
    } else if (id.starts_with("tunedModels/")) {
        id.remove_prefix(12);
        collection = "tunedModels/";
    }
    if (id.empty() || !std::all_of(id.begin(), id.end(), is_model_char)) {
        throw InvalidOptionError(
            ErrorCode::invalid_model,
            "\"" + sanitise_provider_message(model, 200) +
                "\" is not a Gemini model id (letters, digits, '-', '.', '_')");
    }
    return std::string(collection) + std::string(id);
}

HttpRequest post_request(const GeminiOptions& options, std::string url, const json& body) {
    // Gemini streams by `alt=sse` in the URL, without an Accept header.
    return provider_request(options,
                            {.url = std::move(url), .body = &body, .key = {"x-goog-api-key", ""}});
}

std::string request_id_header(const HttpResponseHead& head) {
    if (auto id = head.header("x-request-id")) return *id;
    if (auto id = head.header("x-goog-request-id")) return *id;
    return {};
}

}  // namespace detail::gemini

namespace {

// The adapter's internal pieces (gemini_internal.hpp).
namespace gemini = detail::gemini;

// Gemini accepts at most this many stop sequences.
constexpr std::size_t max_stop_sequences = 5;

// The major version of a Gemma model ("gemma-3-27b-it" → 3), or nullopt for other models.
std::optional<int> gemma_generation(std::string_view model) {
    if (!model.starts_with("gemma-") || model.size() < 7) return std::nullopt;
    const char digit = model[6];
    if (digit < '0' || digit > '9') return std::nullopt;
    return digit - '0';
}

// Merges `patch` into `target`: objects key by key, anything else replaced; null removes.
void deep_merge(json& target, const json& patch) {
    if (!target.is_object() || !patch.is_object()) {
        target = patch;
        return;
    }
    for (const auto& [key, value] : patch.items()) {
        if (value.is_null()) {
            target.erase(key);
        } else if (value.is_object() && target.contains(key) && target[key].is_object()) {
            deep_merge(target[key], value);
        } else {
            target[key] = value;
        }
    }
}

}  // namespace

GeminiProvider::GeminiProvider(GeminiOptions options) : options_(std::move(options)) {
    options_.base_url = detail::trimmed_base_url(std::move(options_.base_url));
    embeddings_ = detail::gemini::make_embedding_codec(options_);
}

const EmbeddingCodec* GeminiProvider::embeddings() const noexcept {
    return embeddings_.get();
}

std::string_view GeminiProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities GeminiProvider::capabilities(std::string_view model) const {
    const std::string id = gemini::normalise_model(model);
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = !(id.starts_with("gemini-1") || id.starts_with("gemini-2.0"));
    if (const auto generation = gemma_generation(id); generation && *generation <= 3) {
        // Gemma 1–3 on the Gemini API have no function calling and no JSON mode.
        capabilities.tools = false;
        capabilities.tool_choice_required = false;
        capabilities.structured_output = false;
        capabilities.reasoning = false;
    }
    return capabilities;
}

json GeminiProvider::encode_body(const ChatRequest& request, bool /*stream*/) const {
    (void)gemini::model_path(request.model);
    if (request.tool_choice && request.tools.empty() &&
        (request.tool_choice->mode == ToolChoice::Mode::required ||
         request.tool_choice->mode == ToolChoice::Mode::tool)) {
        throw InvalidOptionError(ErrorCode::invalid_tool_choice,
                                 "tool_choice forces a tool call but the request has no tools");
    }
    if (request.stop.size() > max_stop_sequences) {
        throw ProviderCapabilityError(ErrorCode::unsupported_option,
                                      "gemini takes at most 5 stop sequences; the request has " +
                                          std::to_string(request.stop.size()));
    }
    for (const char* key : {"generationConfig", "toolConfig"}) {
        if (const auto it = request.provider_options.find(key);
            it != request.provider_options.end() && !it->is_object()) {
            throw InvalidOptionError(
                ErrorCode::invalid_provider_options,
                std::string("provider_options.") + key + " must be a JSON object");
        }
    }
    if (const auto it = request.provider_options.find("tools");
        it != request.provider_options.end() && !it->is_array()) {
        throw InvalidOptionError(ErrorCode::invalid_provider_options,
                                 "provider_options.tools must be a JSON array");
    }

    gemini::ContentsEncoder encoder(name(), gemini::normalise_model(request.model));
    encoder.add_system(request.system);
    for (const auto& message : request.messages) encoder.add(message);

    json body = json::object();
    body["contents"] = std::move(encoder.contents());
    if (!encoder.system_parts().empty())
        body["systemInstruction"] = {{"parts", std::move(encoder.system_parts())}};

    if (!request.tools.empty()) {
        json declarations = json::array();
        for (const auto& tool : request.tools) {
            json declaration = {{"name", tool.name}, {"description", tool.description}};
            if (!gemini::declares_no_arguments(tool.parameters))
                declaration["parametersJsonSchema"] = gemini::translate_schema(tool.parameters);
            declarations.push_back(std::move(declaration));
        }
        body["tools"] = json::array({{{"functionDeclarations", std::move(declarations)}}});
    }
    if (request.tool_choice && !request.tools.empty()) {
        json config;
        switch (request.tool_choice->mode) {
            case ToolChoice::Mode::automatic:
                config = {{"mode", "AUTO"}};
                break;
            case ToolChoice::Mode::none:
                config = {{"mode", "NONE"}};
                break;
            case ToolChoice::Mode::required:
                config = {{"mode", "ANY"}};
                break;
            case ToolChoice::Mode::tool:
                config = {{"mode", "ANY"},
                          {"allowedFunctionNames", json::array({request.tool_choice->name})}};
                break;
        }
        body["toolConfig"] = {{"functionCallingConfig", std::move(config)}};
    }

    json generation = json::object();
    if (request.max_tokens) generation["maxOutputTokens"] = *request.max_tokens;
    if (request.temperature) generation["temperature"] = *request.temperature;
    if (request.top_p) generation["topP"] = *request.top_p;
    if (!request.stop.empty()) generation["stopSequences"] = request.stop;
    if (request.response_format) {
        generation["responseMimeType"] = "application/json";
        if (gemini::takes_json_schema(request.model)) {
            generation["responseJsonSchema"] =
                gemini::translate_schema(request.response_format->schema);
        } else {
            generation["responseSchema"] =
                gemini::openapi_schema(request.response_format->schema, name());
        }
    }
    if (!generation.empty()) body["generationConfig"] = std::move(generation);

    for (const auto& [key, value] : request.provider_options.items()) {
        if (key == "generationConfig" || key == "toolConfig") {
            json& target = body[key];
            if (target.is_null()) target = json::object();
            deep_merge(target, value);
            if (target.empty()) body.erase(key);
        } else if (key == "tools") {
            json& tools = body["tools"];
            if (tools.is_null()) tools = json::array();
            for (const auto& tool : value) tools.push_back(tool);
            if (tools.empty()) body.erase(key);
        } else {
            body[key] = value;
        }
    }
    return body;
}

HttpRequest GeminiProvider::encode(const ChatRequest& request, bool stream) const {
    HttpRequest http = detail::gemini::post_request(
        options_,
        options_.base_url + "/" + gemini::model_path(request.model) +
            (stream ? ":streamGenerateContent?alt=sse" : ":generateContent"),
        encode_body(request, stream));
    if (stream) http.headers.insert(http.headers.begin() + 1, {"Accept", "text/event-stream"});
    return http;
}

ChatResponse GeminiProvider::decode(const HttpResponse& response,
                                    const ChatRequest& request) const {
    gemini::ResponseReader reader(std::string(name()), request,
                                  gemini::request_id_header(response));
    if (response.status < 200 || response.status > 299) {
        detail::gemini::throw_status_failure(response, reader.origin());
    }
    const json body = parse_provider_json(response.body, reader.origin());
    if (const json* error = gemini::error_of(body)) {
        throw_provider_failure(gemini::failure_from_error(*error, response.status, &response),
                               reader.origin());
    }
    if (body.is_array()) {
        // streamGenerateContent without alt=sse: the body is the array of chunks.
        for (const auto& chunk : body) reader.read(chunk, false, gemini::EventSink{});
        if (!reader.finished()) {
            throw_invalid_response("the streamed response body has no chunk with a finishReason",
                                   reader.origin());
        }
    } else {
        reader.read(body, true, gemini::EventSink{});
    }
    reader.close(gemini::EventSink{});
    return reader.build();
}

std::unique_ptr<StreamDecoder> GeminiProvider::stream_decoder(const ChatRequest& request) const {
    return gemini::make_stream_decoder(std::string(name()), request);
}

}  // namespace ullm
