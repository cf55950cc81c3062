// ullm embeddings: embed a batch of documents and a query, then rank the documents by cosine
// similarity to the query.
//
// A real program talks to api.openai.com (or Gemini, or a local Ollama). This one runs offline:
// an in-process HTTP server on 127.0.0.1 plays the OpenAI `/embeddings` API with a toy model
// that counts the words of four topics. Everything else is what a real call does: the inputs
// are split into requests within the provider's limit, sent through libcurl, checked (one
// finite vector per input, all of one length), put back in input order and priced.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <exception>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_server.hpp"

namespace {

using ullm::json;

// The toy model: how often each text names words of pets, money, weather and food, plus a
// constant so that no vector is zero. It answers with JSON numbers; api.openai.com sends
// base64, which ullm asks it for and decodes bit for bit the same way.
std::vector<float> toy_vector(const std::string& text) {
    static const std::vector<std::set<std::string>> topics = {
        {"cat", "dog", "pet", "windowsill"},
        {"stock", "markets", "bank", "prices"},
        {"rain", "weekend", "saturday", "weather", "sunny"},
        {"pasta", "flour", "eggs", "cook"}};
    std::vector<float> vector(topics.size() + 1, 0.0f);
    vector.back() = 0.2f;
    std::istringstream words(text);
    std::string word;
    while (words >> word) {
        std::string clean;
        for (const char c : word) {
            if (std::isalpha(static_cast<unsigned char>(c)) != 0) {
                clean += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            }
        }
        for (std::size_t t = 0; t < topics.size(); ++t) {
            if (topics[t].contains(clean)) vector[t] += 1.0f;
        }
    }
    return vector;
}

ullm::test::ScriptedResponse embeddings_server(const ullm::test::RecordedRequest& request) {
    const json body = json::parse(request.body);
    json data = json::array();
    std::size_t tokens = 0;
    for (std::size_t i = 0; i < body["input"].size(); ++i) {
        const auto text = body["input"][i].get<std::string>();
        tokens += static_cast<std::size_t>(std::count(text.begin(), text.end(), ' ')) + 1;
        data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", toy_vector(text)}});
    }
    return ullm::test::ScriptedResponse::json(
        200, json{{"object", "list"},
                  {"model", body["model"]},
                  {"data", data},
                  {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
                 .dump());
}

float cosine(const std::vector<float>& a, const std::vector<float>& b) {
    double dot = 0;
    double norm_a = 0;
    double norm_b = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        dot += static_cast<double>(a[i]) * b[i];
        norm_a += static_cast<double>(a[i]) * a[i];
        norm_b += static_cast<double>(b[i]) * b[i];
    }
    return static_cast<float>(dot / std::sqrt(norm_a * norm_b));
}

}  // namespace

int main() try {
    ullm::test::TestServer server;
    server.set_handler(embeddings_server);

    // An OpenAI provider at the stand-in server. OpenAI takes up to 2,048 inputs a request; this
    // one is told 2, so that the batch below goes out as two requests.
    auto openai = std::make_shared<ullm::OpenAiChatProvider>(
        ullm::OpenAiChatOptions{.api_key = "sk-offline-example",
                                .base_url = server.base_url() + "/v1",
                                .embeddings_max_inputs = 2});
    const ullm::Client client({.providers = {openai}});

    const std::vector<std::string> documents = {
        "The cat sat on the warm windowsill.", "Stock markets fell as bank prices dropped.",
        "Heavy rain is expected this weekend.", "Fresh pasta needs only flour and eggs."};

    // One vector per input, in input order, however many requests it took.
    const auto embedded = client.embed({.model = "text-embedding-3-small", .inputs = documents});
    fmt::print("embedded {} documents in {} requests: {} dimensions, {} tokens, ${:.8f}\n",
               embedded.vectors.size(), embedded.requests, embedded.dimensions(),
               embedded.usage.input_tokens, embedded.usage.cost_usd.value_or(0.0));

    const std::string query = "Will it rain on Saturday?";
    const auto asked = client.embed({.model = "text-embedding-3-small", .inputs = {query}});

    std::vector<std::pair<float, std::string>> ranked;
    for (std::size_t i = 0; i < documents.size(); ++i) {
        ranked.emplace_back(cosine(asked.vectors[0], embedded.vectors[i]), documents[i]);
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a > b; });
    fmt::print("query: {}\n", query);
    for (const auto& [score, text] : ranked) fmt::print("  {:.3f}  {}\n", score, text);
    fmt::print("best match: {}\n", ranked.front().second);

    // Bad input is refused before anything is sent.
    try {
        (void)client.embed({.model = "text-embedding-3-small", .inputs = {"fine", ""}});
    } catch (const ullm::Error& error) {
        fmt::print("refused: {}\n", error.what());
    }
    fmt::print("requests sent: {}\n", server.request_count());
    return 0;
} catch (const ullm::Error& error) {
    std::fprintf(stderr, "embedding failed (%s): %s\n", error.code().c_str(), error.what());
    return 1;
} catch (const std::exception& error) {
    std::fprintf(stderr, "embeddings example failed: %s\n", error.what());
    return 1;
}
