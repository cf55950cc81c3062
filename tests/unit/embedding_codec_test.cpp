#include <ullm/core/error.hpp>
#include <ullm/detail/base64_floats.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/fixtures.hpp"
#include "support/openapi_checker.hpp"

namespace embedding_codec_test {

using ullm::json;
using ullm::test::error_code_of;

namespace {

ullm::HttpResponse answer(std::string body, int status = 200, ullm::HttpHeaders headers = {}) {
    ullm::HttpResponse response;
    response.status = status;
    response.headers = std::move(headers);
    response.body = std::move(body);
    return response;
}

ullm::EmbeddingRequest texts(std::vector<std::string> inputs,
                             std::string model = "text-embedding-3-small") {
    return {.model = std::move(model), .inputs = std::move(inputs)};
}

std::string openai_body(const json& data, int prompt_tokens = 7) {
    return json{{"object", "list"},
                {"model", "text-embedding-3-small"},
                {"data", data},
                {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}}
        .dump();
}

json item(std::size_t index, json embedding) {
    return {{"object", "embedding"}, {"index", index}, {"embedding", std::move(embedding)}};
}

const ullm::OpenAiChatProvider openai({.api_key = "sk-test"});
const ullm::OpenAiChatProvider local({.base_url = "http://localhost:8000/v1",
                                      .provider_name = "vllm"});
const ullm::GeminiProvider gemini({.api_key = "AIza-test"});

// Whether `a` and `b` hold the same bits.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("base64 float32 vectors decode little-endian, bit for bit", "[embeddings][base64]") {
    std::vector<float> out;
    // 1.0f is 0x3F800000: bytes 00 00 80 3F.
    REQUIRE(ullm::detail::decode_base64_floats("AACAPw==", out).empty());
    REQUIRE(out.size() == 1);
    CHECK(out[0] == 1.0f);
    out.clear();
    // -2.5f (0xC0200000) and 0.5f (0x3F000000): 00 00 20 C0 00 00 00 3F.
    REQUIRE(ullm::detail::decode_base64_floats("AAAgwAAAAD8=", out).empty());
    CHECK(out == std::vector<float>{-2.5f, 0.5f});
    out.clear();
    CHECK(ullm::detail::decode_base64_floats("", out).empty());
    CHECK(out.empty());
    CHECK(ullm::detail::encode_base64_floats(std::vector<float>{1.0f}) == "AACAPw==");
}

TEST_CASE("base64 round trips every finite float exactly, specials and random bits included",
          "[embeddings][base64]") {
    std::vector<float> values = {0.0f,
                                 -0.0f,
                                 std::numeric_limits<float>::min(),
                                 std::numeric_limits<float>::denorm_min(),
                                 -std::numeric_limits<float>::denorm_min(),
                                 std::numeric_limits<float>::max(),
                                 std::numeric_limits<float>::lowest(),
                                 std::numeric_limits<float>::epsilon(),
                                 0.1f,
                                 -0.0023064255f};
    std::mt19937 random(15);
    while (values.size() < 1536) {
        const auto value = std::bit_cast<float>(static_cast<std::uint32_t>(random()));
        if (std::isfinite(value)) values.push_back(value);
    }
    // Every length modulo 3 of the byte count: each padding form.
    for (const std::size_t length :
         {std::size_t{1}, std::size_t{2}, std::size_t{3}, values.size()}) {
        const std::vector<float> slice(values.begin(),
                                       values.begin() + static_cast<std::ptrdiff_t>(length));
        std::vector<float> back;
        REQUIRE(ullm::detail::decode_base64_floats(ullm::detail::encode_base64_floats(slice), back)
                    .empty());
        CHECK(same_bits(back, slice));
    }
}

TEST_CASE("text that is not base64 float32 is refused with the reason, leaving the output alone",
          "[embeddings][base64]") {
    std::vector<float> out = {7.0f};
    CHECK(ullm::detail::decode_base64_floats("AACAP", out).find("multiple of 4") !=
          std::string::npos);
    CHECK(ullm::detail::decode_base64_floats("AAC*Pw==", out).find("not a base64 character") !=
          std::string::npos);
    CHECK(ullm::detail::decode_base64_floats("AA=APw==", out).find("not a base64 character") !=
          std::string::npos);
    // Two bytes, "AAA=" holds: not a whole float32.
    CHECK(ullm::detail::decode_base64_floats("AAA=", out).find("whole number") !=
          std::string::npos);
    // "AACAPx==" sets bits that padding covers.
    CHECK(ullm::detail::decode_base64_floats("AACAPx==", out).find("padding") != std::string::npos);
    CHECK(out == std::vector<float>{7.0f});
}

TEST_CASE("an OpenAI embeddings request is the documented body, base64 for OpenAI",
          "[embeddings][openai]") {
    const auto* codec = openai.embeddings();
    REQUIRE(codec != nullptr);
    CHECK(codec->max_inputs("text-embedding-3-small") == 2048);
    auto request = texts({"a cat", "a dog"});
    request.dimensions = 256;
    const auto http = codec->encode(request);
    CHECK(http.method == "POST");
    CHECK(http.url == "https://api.openai.com/v1/embeddings");
    CHECK(ullm::find_header(http.headers, "Authorization") == "Bearer sk-test");
    const json body = json::parse(http.body);
    CHECK(body == json{{"model", "text-embedding-3-small"},
                       {"input", {"a cat", "a dog"}},
                       {"encoding_format", "base64"},
                       {"dimensions", 256}});
    CHECK(ullm::test::spec().check(body, "CreateEmbeddingRequest").empty());

    // A compatible server gets JSON numbers unless asked otherwise; Ollama's native API its own
    // body on the server root.
    const json plain = json::parse(local.embeddings()->encode(texts({"x"}, "bge-m3")).body);
    CHECK(plain == json{{"model", "bge-m3"}, {"input", {"x"}}, {"encoding_format", "float"}});
    CHECK(ullm::test::spec().check(plain, "CreateEmbeddingRequest").empty());
    const ullm::OpenAiChatProvider ollama({.base_url = "http://localhost:11434/v1",
                                           .provider_name = "ollama",
                                           .embeddings_api = ullm::OpenAiEmbeddingsApi::ollama});
    const auto native = ollama.embeddings()->encode(texts({"x"}, "nomic-embed-text"));
    CHECK(native.url == "http://localhost:11434/api/embed");
    CHECK(json::parse(native.body) ==
          json{{"model", "nomic-embed-text"}, {"input", {"x"}}, {"truncate", false}});
    const ullm::OpenAiChatProvider forced({.provider_name = "llamacpp", .embeddings_base64 = true});
    CHECK(json::parse(forced.embeddings()->encode(texts({"x"})).body)["encoding_format"] ==
          "base64");

    // The Responses provider shares the codec.
    const ullm::OpenAiResponsesProvider responses({.api_key = "sk-test"});
    REQUIRE(responses.embeddings() != nullptr);
    CHECK(json::parse(responses.embeddings()->encode(request).body) == body);
}

TEST_CASE("OpenAI refuses a task, and dimensions for ada-002", "[embeddings][openai]") {
    auto request = texts({"x"});
    request.task = ullm::EmbeddingTask::retrieval_query;
    CHECK(error_code_of([&] { openai.embeddings()->check(request); }) == "unsupported_option");
    auto ada = texts({"x"}, "text-embedding-ada-002");
    CHECK(error_code_of([&] { openai.embeddings()->check(ada); }) == "no error");
    ada.dimensions = 512;
    CHECK(error_code_of([&] { openai.embeddings()->check(ada); }) == "unsupported_option");
    // Another server may shorten any model's vectors.
    CHECK(error_code_of([&] { local.embeddings()->check(ada); }) == "no error");
}

TEST_CASE("OpenAI embeddings decode from numbers and from base64, placed by index",
          "[embeddings][openai]") {
    const auto* codec = openai.embeddings();
    const std::vector<float> second = {0.25f, -1.5f, 3.0e-8f};
    const std::string body = openai_body(json::array(
        {item(1, ullm::detail::encode_base64_floats(second)), item(0, {0.5, -0.125, 1e-3})}));
    // The spec documents the number form only (a base64 answer holds a string instead).
    CHECK(ullm::test::spec()
              .check(json::parse(openai_body(json::array({item(0, {0.5, -0.125})}))),
                     "CreateEmbeddingResponse")
              .empty());
    const auto decoded =
        codec->decode(answer(body, 200, {{"x-request-id", "req_9"}}), texts({"first", "second"}));
    REQUIRE(decoded.vectors.size() == 2);
    CHECK(decoded.vectors[0] == std::vector<float>{0.5f, -0.125f, 1e-3f});
    CHECK(same_bits(decoded.vectors[1], second));
    CHECK(decoded.model == "text-embedding-3-small");
    CHECK(decoded.usage.input_tokens == 7);
    CHECK_FALSE(decoded.usage.cost_usd);
    CHECK(decoded.requests == 1);
    CHECK(decoded.dimensions() == 3);

    // Ollama's native answer.
    const ullm::OpenAiChatProvider ollama(
        {.provider_name = "ollama", .embeddings_api = ullm::OpenAiEmbeddingsApi::ollama});
    const auto native = ollama.embeddings()->decode(
        answer(R"({"model":"all-minilm","embeddings":[[0.01,-0.5],[0.25,0.75]],)"
               R"("total_duration":14143917,"prompt_eval_count":8})"),
        texts({"a", "b"}, "all-minilm"));
    CHECK(native.vectors == std::vector<std::vector<float>>{{0.01f, -0.5f}, {0.25f, 0.75f}});
    CHECK(native.usage.input_tokens == 8);
    CHECK(native.model == "all-minilm");
}

TEST_CASE("an OpenAI embeddings answer that is not one finite vector per input is refused",
          "[embeddings][openai]") {
    const auto* codec = openai.embeddings();
    const auto two = texts({"a", "b"});
    const auto fails = [&](const std::string& body, const ullm::EmbeddingRequest& request) {
        return error_code_of([&] { (void)codec->decode(answer(body), request); });
    };
    const json good = item(0, {1.0, 2.0});
    // Wrong count, either way.
    CHECK(fails(openai_body(json::array({good})), two) == "invalid_provider_response");
    CHECK(fails(openai_body(json::array({good, item(1, {1.0, 2.0}), item(2, {1.0, 2.0})})), two) ==
          "invalid_provider_response");
    // Indexes repeated or outside the inputs.
    CHECK(fails(openai_body(json::array({good, good})), two) == "invalid_provider_response");
    CHECK(fails(openai_body(json::array({good, item(5, {1.0, 2.0})})), two) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({good, {{"index", -1}, {"embedding", {1.0, 2.0}}}})),
                two) == "invalid_provider_response");
    // Inconsistent dimensions, the wrong dimension, an empty vector.
    CHECK(fails(openai_body(json::array({good, item(1, {1.0, 2.0, 3.0})})), two) ==
          "invalid_provider_response");
    auto shortened = texts({"a"});
    shortened.dimensions = 3;
    CHECK(fails(openai_body(json::array({good})), shortened) == "invalid_provider_response");
    CHECK(fails(openai_body(json::array({item(0, json::array())})), texts({"a"})) ==
          "invalid_provider_response");
    // Not numbers, numbers past float32, no embedding at all.
    CHECK(fails(openai_body(json::array({item(0, {1.0, "2"})})), texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({item(0, {1.0, nullptr})})), texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({item(0, {1.0, 1e39})})), texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails(R"({"data":[{"index":0,"embedding":[1.0,1e400]}]})", texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({{{"index", 0}}})), texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({item(0, {{"a", 1}})})), texts({"a"})) ==
          "invalid_provider_response");
    // NaN and infinity arrive in base64 only; so does bad base64.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    CHECK(fails(openai_body(json::array(
                    {item(0, ullm::detail::encode_base64_floats(std::vector<float>{1.0f, nan}))})),
                texts({"a"})) == "invalid_provider_response");
    CHECK(fails(openai_body(json::array(
                    {item(0, ullm::detail::encode_base64_floats(std::vector<float>{inf, 1.0f}))})),
                texts({"a"})) == "invalid_provider_response");
    CHECK(fails(openai_body(json::array({item(0, "AACAPw")})), texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({item(0, "AAA=")})), texts({"a"})) ==
          "invalid_provider_response");
    // Malformed, truncated and trailing bodies; no data.
    CHECK(fails("not json", two) == "invalid_provider_response");
    CHECK(fails(openai_body(json::array({good})).substr(0, 40), two) ==
          "invalid_provider_response");
    CHECK(fails(openai_body(json::array({good})) + "x", texts({"a"})) ==
          "invalid_provider_response");
    CHECK(fails("[]", two) == "invalid_provider_response");
    CHECK(fails(R"({"object":"list"})", two) == "invalid_provider_response");
    CHECK(fails(R"({"data":{"0":[1]}})", two) == "invalid_provider_response");
    CHECK(fails(R"({"data":[7]})", texts({"a"})) == "invalid_provider_response");
}

TEST_CASE("OpenAI embeddings errors map as the provider's completions do", "[embeddings][openai]") {
    const auto* codec = openai.embeddings();
    const auto code = [&](int status, const std::string& body) {
        return error_code_of([&] { (void)codec->decode(answer(body, status), texts({"a"})); });
    };
    CHECK(
        code(401, R"({"error":{"message":"Incorrect API key","type":"invalid_request_error"}})") ==
        "authentication_failed");
    CHECK(code(429, R"({"error":{"message":"Rate limit","code":"rate_limit_exceeded"}})") ==
          "rate_limited");
    CHECK(code(500, "<html>oops</html>") == "provider_error");
    CHECK(code(400,
               R"({"error":{"message":"This model's maximum context length is 8192 tokens"}})") ==
          "context_length_exceeded");
    CHECK(code(400, R"({"error":{"message":"'$.input' is invalid"}})") == "invalid_request");
    CHECK(code(200, R"({"error":{"message":"overloaded","code":503}})") == "provider_error");
    const ullm::OpenAiChatProvider ollama(
        {.provider_name = "ollama", .embeddings_api = ullm::OpenAiEmbeddingsApi::ollama});
    CHECK(error_code_of([&] {
              (void)ollama.embeddings()->decode(
                  answer(R"({"error":"model \"nope\" not found, try pulling it first"})", 404),
                  texts({"a"}, "nope"));
          }) == "invalid_request");
}

TEST_CASE("Gemini embeds one input with embedContent and more with batchEmbedContents",
          "[embeddings][gemini]") {
    const auto* codec = gemini.embeddings();
    REQUIRE(codec != nullptr);
    CHECK(codec->max_inputs("gemini-embedding-001") == 100);
    auto one = texts({"Hello world"}, "gemini-embedding-001");
    const auto single = codec->encode(one);
    CHECK(single.url ==
          "https://generativelanguage.googleapis.com/v1beta/models/"
          "gemini-embedding-001:embedContent");
    CHECK(ullm::find_header(single.headers, "x-goog-api-key") == "AIza-test");
    CHECK(json::parse(single.body) ==
          json{{"model", "models/gemini-embedding-001"},
               {"content", {{"parts", json::array({{{"text", "Hello world"}}})}}}});

    auto batch = texts({"a", "b"}, "models/gemini-embedding-001");
    batch.task = ullm::EmbeddingTask::retrieval_document;
    batch.dimensions = 768;
    const auto http = codec->encode(batch);
    CHECK(http.url ==
          "https://generativelanguage.googleapis.com/v1beta/models/"
          "gemini-embedding-001:batchEmbedContents");
    const json entry = [](const char* text) {
        return json{{"model", "models/gemini-embedding-001"},
                    {"content", {{"parts", json::array({{{"text", text}}})}}},
                    {"taskType", "RETRIEVAL_DOCUMENT"},
                    {"outputDimensionality", 768}};
    }("a");
    const json body = json::parse(http.body);
    REQUIRE(body["requests"].size() == 2);
    CHECK(body["requests"][0] == entry);
    CHECK(body["requests"][1]["content"]["parts"][0]["text"] == "b");

    CHECK(error_code_of([&] { codec->check(texts({"a"}, "bad model/../x")); }) == "invalid_model");
    CHECK(error_code_of([&] { codec->check(batch); }) == "no error");
}

TEST_CASE("Gemini embeddings decode, and bad answers are refused", "[embeddings][gemini]") {
    const auto* codec = gemini.embeddings();
    const auto one = texts({"a"}, "gemini-embedding-001");
    const auto two = texts({"a", "b"}, "gemini-embedding-001");
    const auto single = codec->decode(answer(R"({"embedding":{"values":[0.5,-0.25,0.125]}})"), one);
    CHECK(single.vectors == std::vector<std::vector<float>>{{0.5f, -0.25f, 0.125f}});
    CHECK(single.model == "gemini-embedding-001");
    CHECK(single.usage.input_tokens == 0);
    const auto batch =
        codec->decode(answer(R"({"embeddings":[{"values":[1,2]},{"values":[3,4]}]})"), two);
    CHECK(batch.vectors == std::vector<std::vector<float>>{{1.0f, 2.0f}, {3.0f, 4.0f}});
    CHECK(batch.usage.input_tokens == 0);
    // The token count current answers carry.
    const auto counted = codec->decode(
        answer(
            R"({"embeddings":[{"values":[1,2]},{"values":[3,4]}],"usageMetadata":)"
            R"({"promptTokenCount":5,"promptTokenDetails":[{"modality":"TEXT","tokenCount":5}]}})"),
        two);
    CHECK(counted.usage.input_tokens == 5);

    const auto fails = [&](const std::string& body, const ullm::EmbeddingRequest& request) {
        return error_code_of([&] { (void)codec->decode(answer(body), request); });
    };
    CHECK(fails(R"({"embeddings":[{"values":[1,2]}]})", two) == "invalid_provider_response");
    CHECK(fails(R"({"embeddings":[{"values":[1,2]},{"values":[1]}]})", two) ==
          "invalid_provider_response");
    CHECK(fails(R"({"embeddings":[{"values":[1,2]},{"value":[1,2]}]})", two) ==
          "invalid_provider_response");
    CHECK(fails(R"({"embeddings":[{"values":[1,2]},[1,2]]})", two) == "invalid_provider_response");
    CHECK(fails(R"({"embedding":{"values":[1,"x"]}})", one) == "invalid_provider_response");
    CHECK(fails(R"({"embedding":{"values":[]}})", one) == "invalid_provider_response");
    CHECK(fails(R"({"embeddings":[{"values":[1,2]}]})", one) == "invalid_provider_response");
    CHECK(fails(R"({"embedding":{"values":[1,2]})", one) == "invalid_provider_response");
    CHECK(fails(R"([{"values":[1,2]}])", one) == "invalid_provider_response");

    // The recorded answer to a batch over the limit.
    const std::string limit = ullm::test::read_file(ullm::test::fixtures_dir() / "gemini" /
                                                    "google-embedding-batch-limit-error.json");
    CHECK(error_code_of([&] { (void)codec->decode(answer(limit, 400), two); }) ==
          "invalid_request");
    CHECK(
        error_code_of([&] {
            (void)codec->decode(
                answer(R"({"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}})",
                       429),
                two);
        }) == "rate_limited");
    CHECK(error_code_of([&] { (void)codec->decode(answer("upstream down", 503), two); }) ==
          "provider_error");
}

TEST_CASE("Anthropic and custom providers offer no embeddings by default", "[embeddings]") {
    const ullm::AnthropicProvider anthropic({.api_key = "sk-ant-test"});
    CHECK(anthropic.embeddings() == nullptr);
}

TEST_CASE("every cut and every one-byte change of an answer decodes whole or fails with an Error",
          "[embeddings]") {
    const std::vector<float> vector = {0.25f, -1.5f, 3.0e-8f, 7.0f};
    struct Case {
        const ullm::EmbeddingCodec* codec;
        std::string body;
        ullm::EmbeddingRequest request;
    };
    const std::vector<Case> cases = {
        {openai.embeddings(),
         openai_body(json::array(
             {item(1, ullm::detail::encode_base64_floats(vector)), item(0, {0.5, -0.5, 1, 2})})),
         texts({"a", "b"})},
        {gemini.embeddings(), R"({"embeddings":[{"values":[1,2,3]},{"values":[4,5,6]}]})",
         texts({"a", "b"}, "gemini-embedding-001")},
    };
    std::size_t decoded = 0;
    for (const auto& sample : cases) {
        for (std::size_t cut = 0; cut < sample.body.size(); ++cut) {
            INFO("cut at " << cut);
            CHECK(error_code_of([&] {
                      (void)sample.codec->decode(answer(sample.body.substr(0, cut)),
                                                 sample.request);
                  }) == "invalid_provider_response");
        }
        for (std::size_t at = 0; at < sample.body.size(); ++at) {
            for (const char replacement : {'0', '9', '-', ']', '"', 'A', '=', '\0', 'e'}) {
                std::string changed = sample.body;
                changed[at] = replacement;
                try {
                    const auto response = sample.codec->decode(answer(changed), sample.request);
                    ++decoded;
                    REQUIRE(response.vectors.size() == 2);
                    CHECK(response.vectors[0].size() == response.vectors[1].size());
                    for (const auto& values : response.vectors) {
                        for (const float value : values) CHECK(std::isfinite(value));
                    }
                } catch (const ullm::Error&) {
                    // Refused, with a stable code: what the contract allows.
                }
            }
        }
    }
    CHECK(decoded > 0);
}

TEST_CASE("JSON numbers at float32's edge: the short form of the largest value is taken",
          "[embeddings]") {
    const float largest = std::numeric_limits<float>::max();
    const ullm::OpenAiChatProvider ollama(
        {.provider_name = "ollama", .embeddings_api = ullm::OpenAiEmbeddingsApi::ollama});
    const auto decode = [&](const std::string& values) {
        return ollama.embeddings()->decode(
            answer(R"({"model":"all-minilm","embeddings":[)" + values + R"(]})"),
            texts({"a"}, "all-minilm"));
    };
    // 3.4028235e+38 is what float32 printers (Go's, so Ollama's) write for the largest value;
    // as a double it lies just above it, and rounds to it.
    CHECK(decode("[3.4028235e+38, -3.4028235e+38, 0.5]").vectors ==
          std::vector<std::vector<float>>{{largest, -largest, 0.5f}});
    // From half a step past it a float32 would be infinite: refused.
    for (const char* values : {"[0.25, 3.4028236e+38]", "[-1e39]", "[1e300]"}) {
        CHECK(error_code_of([&] { (void)decode(values); }) == "invalid_provider_response");
    }
}

}  // namespace embedding_codec_test
