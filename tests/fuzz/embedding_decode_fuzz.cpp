// Fuzz target: the embeddings codecs' `decode` of a complete response (`EmbeddingCodec`,
// <ullm/providers/embedding.hpp>): OpenAI's `/embeddings` (JSON numbers or base64 float32),
// Ollama's native `/api/embed`, Gemini's `embedContent` and `batchEmbedContents`.
//
// Only `ullm::Error` may leave `decode`, with a non-empty code and a `what()` that is valid UTF-8
// and starts with `[ullm.<code>]`. A response it returns must come from a 2xx status and a body
// that is one whole JSON text, and keep the codec's promise: exactly one vector per input, none
// empty, all of one length (the request's dimensions when set), every value finite; one request, a
// model named, usage unpriced and not negative. A base64 embedding it accepts is canonical:
// encoding its vector again gives the same text. Decoding the same response twice gives the same
// vectors, model and usage, or the same error.
//
// Header bytes: options bits 0-2 pick the codec (modulo 5): 0 OpenAI with JSON numbers, 1 OpenAI
// asking for base64, 2 Ollama native, 3 Gemini `embedContent` (always one input), 4 Gemini
// `batchEmbedContents` (at least two inputs); bit 3 set means the request sets `dimensions`; bits
// 4-7 are the number of inputs less one (1 to 16). The chunking byte's bits 0-3 pick the HTTP
// status and bits 4-7 the dimensions less one (1 to 16). The seed is unused.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/detail/base64_floats.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/http/http_types.hpp>
#include <ullm/providers/embedding.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>

#include "fuzz_support.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using ullm::json;

constexpr int statuses[] = {200, 200, 200, 201, 204, 299, 0,   100,
                            300, 400, 401, 404, 413, 429, 500, 503};

enum class Codec { openai_numbers, openai_base64, ollama_native, gemini_single, gemini_batch };

struct Subject {
    Codec kind = Codec::openai_numbers;
    const ullm::EmbeddingCodec* codec = nullptr;
    ullm::EmbeddingRequest request;
};

// The providers are immutable and thread-safe: built once, shared by every input.
const ullm::EmbeddingCodec* codec_of(Codec kind) {
    static const ullm::OpenAiChatProvider openai_numbers(
        ullm::OpenAiChatOptions{.embeddings_base64 = false});
    static const ullm::OpenAiChatProvider openai_base64(
        ullm::OpenAiChatOptions{.embeddings_base64 = true});
    static const ullm::OpenAiChatProvider ollama(
        ullm::OpenAiChatOptions{.base_url = "http://localhost:11434/v1",
                                .provider_name = "ollama",
                                .embeddings_api = ullm::OpenAiEmbeddingsApi::ollama});
    static const ullm::GeminiProvider gemini;
    switch (kind) {
        case Codec::openai_numbers:
            return openai_numbers.embeddings();
        case Codec::openai_base64:
            return openai_base64.embeddings();
        case Codec::ollama_native:
            return ollama.embeddings();
        case Codec::gemini_single:
        case Codec::gemini_batch:
            return gemini.embeddings();
    }
    return nullptr;
}

Subject make_subject(std::uint8_t options, std::uint8_t chunking) {
    Subject subject;
    subject.kind = static_cast<Codec>((options & 7u) % 5u);
    subject.codec = codec_of(subject.kind);
    std::size_t inputs = 1 + static_cast<std::size_t>(options >> 4);
    switch (subject.kind) {
        case Codec::openai_numbers:
        case Codec::openai_base64:
            subject.request.model = "text-embedding-3-small";
            break;
        case Codec::ollama_native:
            subject.request.model = "nomic-embed-text";
            break;
        case Codec::gemini_single:
            subject.request.model = "gemini-embedding-001";
            inputs = 1;
            break;
        case Codec::gemini_batch:
            subject.request.model = "gemini-embedding-001";
            if (inputs < 2) inputs = 2;
            break;
    }
    for (std::size_t i = 0; i < inputs; ++i) {
        subject.request.inputs.push_back("input " + std::to_string(i));
    }
    if ((options & 0x08) != 0) subject.request.dimensions = 1 + (chunking >> 4);
    return subject;
}

std::string describe(const ullm::EmbeddingResponse& response) {
    json vectors = json::array();
    for (const auto& vector : response.vectors) {
        json values = json::array();
        for (const float value : vector) values.push_back(value);
        vectors.push_back(std::move(values));
    }
    return "vectors " + ullm::fuzz::show(vectors) + " model " + ullm::fuzz::quote(response.model) +
           " usage " + ullm::fuzz::show(ullm::usage_to_json(response.usage)) + " requests " +
           std::to_string(response.requests);
}

// Bit for bit: 0.0 and -0.0 differ, as they do on the wire.
bool same_vectors(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].size() != b[i].size()) return false;
        for (std::size_t k = 0; k < a[i].size(); ++k) {
            if (std::bit_cast<std::uint32_t>(a[i][k]) != std::bit_cast<std::uint32_t>(b[i][k])) {
                return false;
            }
        }
    }
    return true;
}

bool same_response(const ullm::EmbeddingResponse& a, const ullm::EmbeddingResponse& b) {
    return same_vectors(a.vectors, b.vectors) && a.model == b.model && a.usage == b.usage &&
           a.requests == b.requests && a.budget_skipped == b.budget_skipped;
}

// The promise `EmbeddingCodec::decode` makes of what it returns; the broken part, or empty.
std::string promise_broken(const ullm::EmbeddingResponse& response,
                           const ullm::EmbeddingRequest& request) {
    if (response.vectors.size() != request.inputs.size()) {
        return std::to_string(response.vectors.size()) + " vectors for " +
               std::to_string(request.inputs.size()) + " inputs";
    }
    const std::size_t length = response.vectors.front().size();
    if (length == 0) return "an empty vector";
    if (request.dimensions && length != static_cast<std::size_t>(*request.dimensions)) {
        return "vectors of " + std::to_string(length) + " values where " +
               std::to_string(*request.dimensions) + " dimensions were asked for";
    }
    for (std::size_t i = 0; i < response.vectors.size(); ++i) {
        const auto& vector = response.vectors[i];
        if (vector.size() != length) {
            return "vector " + std::to_string(i) + " has " + std::to_string(vector.size()) +
                   " values where vector 0 has " + std::to_string(length);
        }
        for (const float value : vector) {
            if (!std::isfinite(value)) return "vector " + std::to_string(i) + " is not finite";
        }
    }
    if (response.requests != 1) return "requests is " + std::to_string(response.requests);
    if (response.budget_skipped) return "budget_skipped is set";
    if (response.model.empty()) return "no model";
    const ullm::Usage& usage = response.usage;
    if (usage.cost_usd) return "the usage is priced";
    if (usage.input_tokens < 0) return "negative input tokens";
    if (usage.output_tokens != 0 || usage.cached_read_tokens != 0 ||
        usage.cached_write_tokens != 0 || usage.reasoning_tokens != 0) {
        return "counts other than input tokens";
    }
    return {};
}

// OpenAI's base64 embeddings, `data[i].embedding` as text, re-encoded from the decoded vectors.
// The decoder refuses non-canonical base64, so each must come out as it went in.
std::string base64_broken(const std::string& body, const ullm::EmbeddingResponse& response) {
    const json parsed = json::parse(body);
    const json& data = parsed.at("data");
    for (std::size_t position = 0; position < data.size(); ++position) {
        const json& item = data[position];
        const auto embedding = item.find("embedding");
        if (embedding == item.end() || !embedding->is_string()) continue;
        const auto index = item.contains("index") ? item.at("index").get<std::size_t>() : position;
        const std::string again = ullm::detail::encode_base64_floats(response.vectors.at(index));
        if (again != embedding->get_ref<const std::string&>()) {
            return "data/" + std::to_string(position) +
                   "/embedding decodes to values that encode as " + ullm::fuzz::quote(again);
        }
    }
    return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto input = ullm::fuzz::read_input(data, size);
    if (!input) return 0;
    const Subject subject = make_subject(input->options, input->chunking);

    ullm::HttpResponse response;
    response.status = statuses[input->chunking % std::size(statuses)];
    response.body = std::string(input->payload);

    std::optional<ullm::EmbeddingResponse> first;
    std::optional<ullm::EmbeddingResponse> second;
    const auto failure =
        ullm::fuzz::capture([&] { first = subject.codec->decode(response, subject.request); });
    const auto failure_again =
        ullm::fuzz::capture([&] { second = subject.codec->decode(response, subject.request); });

    const auto both = [&] {
        return "first:  " + (first ? describe(*first) : ullm::fuzz::describe(failure)) +
               "\nsecond: " + (second ? describe(*second) : ullm::fuzz::describe(failure_again));
    };
    if (failure != failure_again || first.has_value() != second.has_value() ||
        (first && !same_response(*first, *second))) {
        ullm::fuzz::finding("decoding the same response twice gave different results", both());
    }

    if (failure) {
        if (failure->code.empty()) {
            ullm::fuzz::finding("decode threw a ullm::Error with an empty code",
                                ullm::fuzz::describe(failure));
        }
        if (!ullm::detail::is_valid_utf8(failure->what)) {
            ullm::fuzz::finding("an error's what() is not valid UTF-8",
                                ullm::fuzz::describe(failure));
        }
        if (!failure->what.starts_with("[ullm." + failure->code + "]")) {
            ullm::fuzz::finding("an error's what() does not start with [ullm.<code>]",
                                ullm::fuzz::describe(failure));
        }
        return 0;
    }
    if (response.status < 200 || response.status > 299) {
        ullm::fuzz::finding("decode returned vectors for a non-2xx status",
                            "status " + std::to_string(response.status) + "\n" + describe(*first));
    }
    if (!ullm::fuzz::is_whole_json(response.body)) {
        ullm::fuzz::finding("decode returned vectors for a body that is not one JSON text",
                            "body " + ullm::fuzz::quote(response.body) + "\n" + describe(*first));
    }
    if (const std::string broken = promise_broken(*first, subject.request); !broken.empty()) {
        ullm::fuzz::finding("decode broke the codec's promise: " + broken,
                            "body " + ullm::fuzz::quote(response.body) + "\n" + describe(*first));
    }
    if (subject.kind == Codec::openai_numbers || subject.kind == Codec::openai_base64) {
        if (const std::string broken = base64_broken(response.body, *first); !broken.empty()) {
            ullm::fuzz::finding(
                "a base64 embedding does not encode back to itself: " + broken,
                "body " + ullm::fuzz::quote(response.body) + "\n" + describe(*first));
        }
    }
    return 0;
}
