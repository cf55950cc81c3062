#include <ullm/providers/gemini.hpp>

#include <ullm/providers/provider_errors.hpp>

#include <string>
#include <utility>
#include <vector>

#include "../embedding_checks.hpp"
#include "../json_readers.hpp"
#include "gemini_internal.hpp"

namespace ullm::detail::gemini {

namespace {

// Gemini's `batchEmbedContents` takes at most this many requests.
constexpr std::size_t max_batch = 100;

std::string_view task_type(EmbeddingTask task) {
    switch (task) {
        case EmbeddingTask::retrieval_query:
            return "RETRIEVAL_QUERY";
        case EmbeddingTask::retrieval_document:
            return "RETRIEVAL_DOCUMENT";
        case EmbeddingTask::semantic_similarity:
            return "SEMANTIC_SIMILARITY";
        case EmbeddingTask::classification:
            return "CLASSIFICATION";
        case EmbeddingTask::clustering:
            return "CLUSTERING";
        case EmbeddingTask::question_answering:
            return "QUESTION_ANSWERING";
        case EmbeddingTask::fact_verification:
            return "FACT_VERIFICATION";
        case EmbeddingTask::code_retrieval_query:
            return "CODE_RETRIEVAL_QUERY";
    }
    return "TASK_TYPE_UNSPECIFIED";
}

class GeminiEmbeddingCodec final : public EmbeddingCodec {
public:
    explicit GeminiEmbeddingCodec(const GeminiOptions& options) : options_(options) {}

    [[nodiscard]] std::size_t max_inputs(std::string_view /*model*/) const override {
        return max_batch;
    }

    void check(const EmbeddingRequest& request) const override { (void)model_path(request.model); }

    [[nodiscard]] HttpRequest encode(const EmbeddingRequest& request) const override {
        const std::string model = model_path(request.model);
        // Each request names the model, as Google's REST examples do.
        const auto one = [&](const std::string& input) {
            json entry = {{"model", model},
                          {"content", {{"parts", json::array({{{"text", input}}})}}}};
            if (request.task) entry["taskType"] = task_type(*request.task);
            if (request.dimensions) entry["outputDimensionality"] = *request.dimensions;
            return entry;
        };
        json body;
        if (request.inputs.size() == 1) {
            body = one(request.inputs.front());
        } else {
            body = {{"requests", json::array()}};
            for (const auto& input : request.inputs) body["requests"].push_back(one(input));
        }
        return post_request(
            options_,
            options_.base_url + "/" + model +
                (request.inputs.size() == 1 ? ":embedContent" : ":batchEmbedContents"),
            body);
    }

    [[nodiscard]] EmbeddingResponse decode(const HttpResponse& response,
                                           const EmbeddingRequest& request) const override {
        const ErrorOrigin origin{options_.provider_name, request.model,
                                 request_id_header(response)};
        if (response.status < 200 || response.status > 299) throw_status_failure(response, origin);
        const json body = parse_provider_json(response.body, origin);
        if (!body.is_object()) {
            throw_invalid_response("the embeddings body is not a JSON object", origin);
        }
        if (const json* error = error_of(body)) {
            throw_provider_failure(failure_from_error(*error, response.status, &response), origin);
        }
        EmbeddingResponse out;
        if (request.inputs.size() == 1) {
            const json* embedding = object_field(body, "embedding");
            if (embedding == nullptr) {
                throw_invalid_response("the embedContent body has no embedding", origin);
            }
            out.vectors.emplace_back();
            read_values(*embedding, "embedding", out.vectors.back(), origin);
        } else {
            const json* embeddings = array_field(body, "embeddings");
            if (embeddings == nullptr) {
                throw_invalid_response("the batchEmbedContents body has no embeddings array",
                                       origin);
            }
            check_embedding_count(embeddings->size(), request, origin);
            out.vectors.resize(embeddings->size());
            for (std::size_t i = 0; i < embeddings->size(); ++i) {
                read_values((*embeddings)[i], "embeddings/" + std::to_string(i), out.vectors[i],
                            origin);
            }
        }
        check_embedding_vectors(out.vectors, request, origin);
        // Older answers count no tokens; current ones carry the prompt's count.
        if (const json* usage = object_field(body, "usageMetadata")) {
            out.usage.input_tokens = count_field(*usage, "promptTokenCount");
        }
        out.model = normalise_model(request.model);
        out.requests = 1;
        return out;
    }

private:
    static void read_values(const json& embedding, const std::string& where,
                            std::vector<float>& out, const ErrorOrigin& origin) {
        const auto values = embedding.is_object() ? embedding.find("values") : embedding.end();
        if (!embedding.is_object() || values == embedding.end()) {
            throw_invalid_response(where + " has no values", origin);
        }
        if (const std::string why = decode_json_floats(*values, out); !why.empty()) {
            throw_invalid_response(where + "/values " + why, origin);
        }
    }

    GeminiOptions options_;
};

}  // namespace

std::shared_ptr<const EmbeddingCodec> make_embedding_codec(const GeminiOptions& options) {
    return std::make_shared<GeminiEmbeddingCodec>(options);
}

}  // namespace ullm::detail::gemini
