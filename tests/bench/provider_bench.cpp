// Prints what decoding costs per provider: per response (whole bodies through decode()) and
// per event (recorded streams through the stream decoder), over the recorded fixtures.
// Usage: ullm_bench_providers [repetitions]

#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "support/fixtures.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
    const char* label;
    const char* folder;
    std::unique_ptr<ullm::Provider> provider;
    ullm::test::Framing framing;
};

struct Corpus {
    std::vector<std::string> bodies;   // decode() succeeds on each
    std::vector<std::string> streams;  // the stream decoder succeeds on each
};

bool decodes_body(const ullm::Provider& provider, const std::string& body) {
    try {
        ullm::HttpResponse response;
        response.status = 200;
        response.body = body;
        (void)provider.decode(response, ullm::ChatRequest{.model = "bench"});
        return true;
    } catch (const ullm::Error&) {
        return false;
    }
}

std::size_t decode_stream(const ullm::Provider& provider, const std::string& wire) {
    auto decoder = provider.stream_decoder(ullm::ChatRequest{.model = "bench"});
    std::vector<ullm::StreamEvent> events;
    for (std::size_t at = 0; at < wire.size(); at += 1024) {
        decoder->feed(std::string_view(wire).substr(at, 1024), events);
    }
    decoder->finish(events);
    return events.size();
}

Corpus load(const Case& item) {
    Corpus corpus;
    for (const auto& path : ullm::test::fixture_files(item.folder, ".json")) {
        auto body = ullm::test::read_file(path);
        if (decodes_body(*item.provider, body)) corpus.bodies.push_back(std::move(body));
    }
    for (const auto& path : ullm::test::fixture_files(item.folder, ".chunks.txt")) {
        const auto text = ullm::test::read_file(path);
        auto wire = ullm::test::looks_like_sse_wire(text)
                        ? text
                        : ullm::test::frame_chunks_as_sse(text, item.framing);
        try {
            (void)decode_stream(*item.provider, wire);
            corpus.streams.push_back(std::move(wire));
        } catch (const ullm::Error&) {
            // Recordings of failures are not part of the timing.
        }
    }
    return corpus;
}

}  // namespace

int main(int argc, char** argv) try {
    const int repetitions = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
    std::vector<Case> cases;
    cases.push_back({"openai-chat", "openai-compatible",
                     std::make_unique<ullm::OpenAiChatProvider>(),
                     ullm::test::Framing::chat_completions});
    cases.push_back({"openai-responses", "openai-responses",
                     std::make_unique<ullm::OpenAiResponsesProvider>(),
                     ullm::test::Framing::typed_events});
    cases.push_back({"anthropic", "anthropic", std::make_unique<ullm::AnthropicProvider>(),
                     ullm::test::Framing::typed_events});
    cases.push_back({"gemini", "gemini", std::make_unique<ullm::GeminiProvider>(),
                     ullm::test::Framing::data_only});

    fmt::print("{:<18} {:>7} {:>14} {:>8} {:>9} {:>12} {:>10}\n", "provider", "bodies",
               "us/response", "streams", "events", "ns/event", "MB/s");
    for (const auto& item : cases) {
        const Corpus corpus = load(item);
        auto start = Clock::now();
        for (int r = 0; r < repetitions; ++r) {
            for (const auto& body : corpus.bodies) (void)decodes_body(*item.provider, body);
        }
        const double body_seconds = std::chrono::duration<double>(Clock::now() - start).count();

        std::size_t events = 0;
        std::size_t stream_bytes = 0;
        start = Clock::now();
        for (int r = 0; r < repetitions; ++r) {
            for (const auto& wire : corpus.streams) {
                events += decode_stream(*item.provider, wire);
                stream_bytes += wire.size();
            }
        }
        const double stream_seconds = std::chrono::duration<double>(Clock::now() - start).count();

        const auto responses = static_cast<double>(corpus.bodies.size()) * repetitions;
        fmt::print(
            "{:<18} {:>7} {:>14.2f} {:>8} {:>9} {:>12.1f} {:>10.1f}\n", item.label,
            corpus.bodies.size(), responses > 0 ? body_seconds * 1e6 / responses : 0.0,
            corpus.streams.size(), events / static_cast<std::size_t>(repetitions),
            events > 0 ? stream_seconds * 1e9 / static_cast<double>(events) : 0.0,
            stream_seconds > 0 ? static_cast<double>(stream_bytes) / 1e6 / stream_seconds : 0.0);
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "ullm_bench_providers: %s\n", error.what());
    return 1;
}
