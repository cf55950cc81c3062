#include "decode.hpp"

#include "output.hpp"

#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/testing/replay.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ullm_cli {

namespace {

using ullm::json;

constexpr int exit_invalid = 2;

struct Provider {
    std::unique_ptr<ullm::Provider> adapter;
    ullm::testing::ChunkFraming framing;
};

std::optional<Provider> make_provider(const std::string& name) {
    if (name.empty()) return std::nullopt;
    if (name == "gemini") {
        return Provider{std::make_unique<ullm::GeminiProvider>(),
                        ullm::testing::ChunkFraming::data_only};
    }
    if (name == "openai-responses") {
        return Provider{std::make_unique<ullm::OpenAiResponsesProvider>(),
                        ullm::testing::ChunkFraming::typed_events};
    }
    if (name == "anthropic") {
        return Provider{std::make_unique<ullm::AnthropicProvider>(),
                        ullm::testing::ChunkFraming::typed_events};
    }
    return Provider{std::make_unique<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{
                        .provider_name = name == "openai-chat" ? "openai" : name}),
                    ullm::testing::ChunkFraming::chat_completions};
}

// Errors that mean the file is not a transcript, rather than a transcript of a failure.
bool is_invalid_transcript(const ullm::Error& error) {
    return error.code() == "invalid_provider_response" || error.code() == "stream_truncated";
}

}  // namespace

int decode(const std::string& provider_name, int status, const std::string& path) {
    const auto provider = make_provider(provider_name);
    if (!provider) {
        std::fprintf(stderr, "ullm decode: unknown provider \"%s\"\n", provider_name.c_str());
        return exit_usage;
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        std::fprintf(stderr, "ullm decode: cannot read %s\n", path.c_str());
        return exit_invalid;
    }
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    ullm::ChatRequest request;
    request.model = "recorded";

    const json whole = json::parse(text, nullptr, false);
    try {
        if (!whole.is_discarded() && whole.is_object()) {
            ullm::HttpResponse response;
            response.status = status;
            response.body = text;
            print_line(response_json(provider->adapter->decode(response, request)));
            return 0;
        }
        const std::string wire = ullm::testing::looks_like_sse_wire(text)
                                     ? text
                                     : ullm::testing::frame_chunks_as_sse(text, provider->framing);
        auto decoder = provider->adapter->stream_decoder(request);
        std::vector<ullm::StreamEvent> events;
        std::optional<ullm::ChatResponse> final_response;
        auto flush = [&] {
            for (const auto& event : events) {
                print_line(event_json(event));
                if (event.response) final_response = event.response;
            }
            events.clear();
        };
        try {
            decoder->feed(wire, events);
            decoder->finish(events);
        } catch (...) {
            flush();
            throw;
        }
        flush();
        if (!final_response) throw ullm::StreamTruncatedError("the stream produced no response");
        print_line(response_json(*final_response));
        return 0;
    } catch (const ullm::Error& error) {
        if (is_invalid_transcript(error)) {
            std::fprintf(stderr, "ullm decode: %s: not a valid %s transcript: %s\n", path.c_str(),
                         provider_name.c_str(), error.message().c_str());
            return exit_invalid;
        }
        print_line(error_json(error));
        return 0;
    }
}

}  // namespace ullm_cli
