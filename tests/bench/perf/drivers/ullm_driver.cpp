// The library under test: one ullm::Client for the whole run (one transport, keep-alive),
// pointed at the mock server, no retries. Unary: Client::complete; stream: Client::stream,
// counting non-empty text deltas. Build: ULLM_PREFIX=<install prefix> ./run.sh
// (ullm's in-tree copy of ../shared/perf/drivers/ullm_driver.cpp: adds GeminiProvider for the
// gem-* scenarios and OpenAiResponsesProvider for rsp-*.)
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/ullm.hpp>

#include <memory>
#include <string>

#include "common.hpp"

// Points `client` at the mock through one `Provider` (every provider's options have the same
// fields for this: key, base URL, headers) and makes `model` its default.
template <class Provider, class Options>
void use(ullm::ClientOptions& client, Options options, const perf::Args& args, const char* key,
         const std::string& path, const ullm::HttpHeaders& headers, const std::string& model) {
    options.api_key = key;
    options.base_url = args.base() + path;
    options.extra_headers = headers;
    client.providers.push_back(std::make_shared<Provider>(options));
    client.default_model = model;
}

int main(int argc, char** argv) {
    perf::Args args = perf::parse_args(argc, argv);
    ullm::ClientOptions options;
    options.retry.max_attempts = 1;
    ullm::HttpHeaders headers;
    headers.emplace_back("x-mock-events", std::to_string(args.n));
    if (args.anthropic()) {
        use<ullm::AnthropicProvider>(options, ullm::AnthropicOptions{}, args, "sk-test", "/v1",
                                     headers, std::string("anthropic/") + perf::kAntModel);
    } else if (args.gemini()) {
        use<ullm::GeminiProvider>(options, ullm::GeminiOptions{}, args, "gem-test", "/v1beta",
                                  headers, std::string("gemini/") + perf::kGemModel);
    } else if (args.responses()) {
        use<ullm::OpenAiResponsesProvider>(options, ullm::OpenAiResponsesOptions{}, args,
                                           "sk-test", "/v1", headers,
                                           std::string("openai/") + perf::kOaiModel);
    } else {
        use<ullm::OpenAiChatProvider>(options, ullm::OpenAiChatOptions{}, args, "sk-test", "/v1",
                                      headers, std::string("openai/") + perf::kOaiModel);
    }
    ullm::Client client(options);
    return perf::run_driver("ullm", argc, argv, [&](const perf::Args& a, perf::Outcome& o) {
        ullm::ChatRequest request;
        request.system = perf::kSystemPrompt;
        request.messages.push_back(ullm::Message::user(perf::kUserPrompt));
        request.max_tokens = 1024;
        try {
            if (!a.streaming()) {
                auto reply = client.complete(std::move(request));
                o.text = reply.text;
                return true;
            }
            auto stream = client.stream(std::move(request));
            for (const auto& event : stream)
                if (const auto* delta = event.text_delta(); delta && !delta->empty()) {
                    o.text += *delta;
                    ++o.events;
                }
            return true;
        } catch (const ullm::Error& e) {
            o.error = e.what();
            return false;
        }
    });
}
