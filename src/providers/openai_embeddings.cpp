#include "openai_embeddings.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/base64_floats.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <utility>

#include "embedding_checks.hpp"
#include "json_readers.hpp"
#include "openai_chat/openai_chat_internal.hpp"
#include "openai_common.hpp"

namespace ullm::detail {

namespace {

// What `/api/embed` is under: the server's root, without the `/v1` of its OpenAI-compatible
// API.
std::string ollama_root(std::string base_url) {
    if (base_url.ends_with("/v1")) base_url.resize(base_url.size() - 3);
    return base_url;
}

class OpenAiEmbeddingCodec final : public EmbeddingCodec {
public:
    explicit OpenAiEmbeddingCodec(OpenAiEmbeddingSettings settings)
        : settings_(std::move(settings)),
          url_(settings_.ollama_native ? ollama_root(settings_.base_url) + "/api/embed"
                                       : settings_.base_url + "/embeddings") {}

    [[nodiscard]] std::size_t max_inputs(std::string_view /*model*/) const override {
        return settings_.max_inputs;
    }

    void check(const EmbeddingRequest& request) const override {
        if (request.task) {
            throw ProviderCapabilityError(ErrorCode::unsupported_option,
                                          settings_.provider_name + " embeddings take no task (\"" +
                                              std::string(to_string(*request.task)) +
                                              "\"); only Gemini's do");
        }
        // OpenAI's first-generation model cannot shorten its vectors.
        if (request.dimensions && settings_.provider_name == "openai" &&
            request.model.starts_with("text-embedding-ada")) {
            throw ProviderCapabilityError(ErrorCode::unsupported_option,
                                          request.model +
                                              " cannot shorten its embeddings: `dimensions` is "
                                              "supported by text-embedding-3 and later models");
        }
    }

    [[nodiscard]] HttpRequest encode(const EmbeddingRequest& request) const override {
        json body = {{"model", request.model}, {"input", request.inputs}};
        if (settings_.ollama_native) {
            // An input longer than the model's context fails instead of being cut short.
            body["truncate"] = false;
        } else {
            body["encoding_format"] = settings_.base64 ? "base64" : "float";
        }
        if (request.dimensions) body["dimensions"] = *request.dimensions;
        return openai_request(settings_, {.url = url_, .body = &body});
    }

    [[nodiscard]] EmbeddingResponse decode(const HttpResponse& response,
                                           const EmbeddingRequest& request) const override {
        const ErrorOrigin origin{settings_.provider_name, request.model,
                                 response.header("x-request-id").value_or("")};
        if (response.status < 200 || response.status > 299) {
            openai_chat::throw_status_failure(response, origin);
        }
        const json body = parse_provider_json(response.body, origin);
        if (!body.is_object()) {
            throw_invalid_response("the embeddings body is not a JSON object", origin);
        }
        if (const auto error = body.find("error"); error != body.end() && !error->is_null()) {
            throw_provider_failure(openai_chat::failure_from_body(body, response.status), origin);
        }
        EmbeddingResponse out;
        out.vectors = settings_.ollama_native ? ollama_vectors(body, request, origin)
                                              : openai_vectors(body, request, origin);
        check_embedding_vectors(out.vectors, request, origin);
        out.model = string_field(body, "model");
        if (out.model.empty()) out.model = request.model;
        if (settings_.ollama_native) {
            out.usage.input_tokens = count_field(body, "prompt_eval_count");
        } else if (const json* usage = object_field(body, "usage")) {
            out.usage.input_tokens = count_field(*usage, "prompt_tokens");
        }
        out.requests = 1;
        return out;
    }

private:
    // `data`: `{"index", "embedding": [numbers] | "base64"}` items, placed by their index (a
    // server that sends none is taken to send them in order).
    static std::vector<std::vector<float>> openai_vectors(const json& body,
                                                          const EmbeddingRequest& request,
                                                          const ErrorOrigin& origin) {
        const json* data = array_field(body, "data");
        if (data == nullptr)
            throw_invalid_response("the embeddings body has no data array", origin);
        check_embedding_count(data->size(), request, origin);
        std::vector<std::vector<float>> vectors(data->size());
        std::vector<bool> seen(data->size(), false);
        for (std::size_t position = 0; position < data->size(); ++position) {
            const json& item = (*data)[position];
            const std::string where = "data/" + std::to_string(position);
            if (!item.is_object()) throw_invalid_response(where + " is not an object", origin);
            std::size_t index = position;
            if (const auto found = item.find("index"); found != item.end()) {
                if (!found->is_number_unsigned() || found->get<std::uint64_t>() >= data->size()) {
                    throw_invalid_response(where + " has an index that is not one of the " +
                                               std::to_string(data->size()) + " inputs",
                                           origin);
                }
                index = static_cast<std::size_t>(found->get<std::uint64_t>());
            }
            if (seen[index]) {
                throw_invalid_response(where + " repeats index " + std::to_string(index), origin);
            }
            seen[index] = true;
            const auto embedding = item.find("embedding");
            if (embedding == item.end()) {
                throw_invalid_response(where + " has no embedding", origin);
            }
            const std::string why =
                embedding->is_string()
                    ? decode_base64_floats(embedding->get_ref<const std::string&>(), vectors[index])
                    : decode_json_floats(*embedding, vectors[index]);
            if (!why.empty()) {
                throw_invalid_response(
                    where + "/embedding " +
                        (embedding->is_string() ? "is not base64 float32: " + why : why),
                    origin);
            }
        }
        return vectors;
    }

    // `embeddings`: one array of numbers per input, in order.
    static std::vector<std::vector<float>> ollama_vectors(const json& body,
                                                          const EmbeddingRequest& request,
                                                          const ErrorOrigin& origin) {
        const json* embeddings = array_field(body, "embeddings");
        if (embeddings == nullptr) {
            throw_invalid_response("the embeddings body has no embeddings array", origin);
        }
        check_embedding_count(embeddings->size(), request, origin);
        std::vector<std::vector<float>> vectors(embeddings->size());
        for (std::size_t i = 0; i < embeddings->size(); ++i) {
            const std::string why = decode_json_floats((*embeddings)[i], vectors[i]);
            if (!why.empty()) {
                throw_invalid_response("embeddings/" + std::to_string(i) + " " + why, origin);
            }
        }
        return vectors;
    }

    OpenAiEmbeddingSettings settings_;
    std::string url_;
};

}  // namespace

std::shared_ptr<const EmbeddingCodec> make_openai_embedding_codec(
    OpenAiEmbeddingSettings settings) {
    return std::make_shared<OpenAiEmbeddingCodec>(std::move(settings));
}

}  // namespace ullm::detail
