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

#include "common.hpp"

int main(int argc, char** argv) {
    perf::Args args = perf::parse_args(argc, argv);
    ullm::ClientOptions options;
    options.retry.max_attempts = 1;
    ullm::HttpHeaders headers;
    headers.emplace_back("x-mock-events", std::to_string(args.n));
    if (args.anthropic()) {
        ullm::AnthropicOptions a;
        a.api_key = "sk-test";
        a.base_url = args.base() + "/v1";
        a.extra_headers = headers;
        options.providers.push_back(std::make_shared<ullm::AnthropicProvider>(a));
        options.default_model = std::string("anthropic/") + perf::kAntModel;
    } else if (args.gemini()) {
        ullm::GeminiOptions g;
        g.api_key = "gem-test";
        g.base_url = args.base() + "/v1beta";
        g.extra_headers = headers;
        options.providers.push_back(std::make_shared<ullm::GeminiProvider>(g));
        options.default_model = std::string("gemini/") + perf::kGemModel;
    } else if (args.responses()) {
        ullm::OpenAiResponsesOptions r;
        r.api_key = "sk-test";
        r.base_url = args.base() + "/v1";
        r.extra_headers = headers;
        options.providers.push_back(std::make_shared<ullm::OpenAiResponsesProvider>(r));
        options.default_model = std::string("openai/") + perf::kOaiModel;
    } else {
        ullm::OpenAiChatOptions o;
        o.api_key = "sk-test";
        o.base_url = args.base() + "/v1";
        o.extra_headers = headers;
        options.providers.push_back(std::make_shared<ullm::OpenAiChatProvider>(o));
        options.default_model = std::string("openai/") + perf::kOaiModel;
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
