// Google Benchmark: what decoding one 1,536-float embedding costs through ullm's OpenAI codec
// (JSON numbers and base64 float32), against a raw nlohmann decode of the same body (parse,
// then the vector out of it, with none of the codec's checks).

#include <ullm/detail/base64_floats.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <random>
#include <string>
#include <vector>

namespace {

using ullm::json;

constexpr std::size_t dimensions = 1536;

std::vector<float> sample_vector() {
    std::mt19937 random(1536);
    std::normal_distribution<float> normal(0.0f, 0.03f);
    std::vector<float> values(dimensions);
    for (auto& value : values) value = normal(random);
    return values;
}

// An OpenAI answer with one vector, its numbers as OpenAI prints them (shortest round trip).
std::string body_with(bool base64) {
    const auto values = sample_vector();
    std::string embedding;
    if (base64) {
        embedding = "\"" + ullm::detail::encode_base64_floats(values) + "\"";
    } else {
        embedding = "[";
        for (std::size_t i = 0; i < values.size(); ++i) {
            embedding += (i == 0 ? "" : ",") + fmt::format("{}", values[i]);
        }
        embedding += "]";
    }
    return R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":)" + embedding +
           R"(}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}})";
}

void codec_decode(benchmark::State& state, bool base64) {
    const ullm::OpenAiChatProvider provider;
    ullm::HttpResponse response;
    response.status = 200;
    response.body = body_with(base64);
    const ullm::EmbeddingRequest request{.model = "text-embedding-3-small", .inputs = {"x"}};
    for (auto _ : state) {
        auto decoded = provider.embeddings()->decode(response, request);
        benchmark::DoNotOptimize(decoded.vectors.front().data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(response.body.size()));
    state.counters["body_bytes"] = static_cast<double>(response.body.size());
}

void raw_nlohmann(benchmark::State& state, bool base64) {
    const std::string body = body_with(base64);
    for (auto _ : state) {
        const json parsed = json::parse(body);
        const json& embedding = parsed["data"][0]["embedding"];
        if (base64) {
            benchmark::DoNotOptimize(embedding.get_ref<const std::string&>().data());
        } else {
            auto values = embedding.get<std::vector<float>>();
            benchmark::DoNotOptimize(values.data());
        }
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(body.size()));
    state.counters["body_bytes"] = static_cast<double>(body.size());
}

void BM_codec_json(benchmark::State& state) {
    codec_decode(state, false);
}
void BM_codec_base64(benchmark::State& state) {
    codec_decode(state, true);
}
void BM_raw_nlohmann_json(benchmark::State& state) {
    raw_nlohmann(state, false);
}
// The raw decode of the base64 body stops at the string: nlohmann has no base64 decoder.
void BM_raw_nlohmann_base64_string(benchmark::State& state) {
    raw_nlohmann(state, true);
}

}  // namespace

BENCHMARK(BM_codec_json);
BENCHMARK(BM_codec_base64);
BENCHMARK(BM_raw_nlohmann_json);
BENCHMARK(BM_raw_nlohmann_base64_string);

BENCHMARK_MAIN();
