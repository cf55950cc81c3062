// Prints what decoding costs per provider: per response (whole bodies through decode()) and
// per event (recorded streams through the stream decoder), over the recorded fixtures. Beside
// each stream figure, the floor for the same bytes: a minimal SSE splitter and nlohmann's parse
// of every data line (what the raw libcurl + nlohmann driver of ../shared/perf does with a
// stream, less libcurl), as a ratio, the median of 5 interleaved rounds.
// Usage: ullm_bench_providers [repetitions]

#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
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

// The floor: lines split at LF (a CR before it dropped), `data:` lines joined, and each event's
// data parsed into a tree by nlohmann, read in the same 1 KiB pieces as `decode_stream`. Returns
// the number of values parsed, so that the work cannot be left out.
std::size_t floor_stream(const std::string& wire) {
    std::string buffer;
    std::string data;
    bool has_data = false;
    std::size_t parsed = 0;
    const auto dispatch = [&] {
        if (!has_data) return;
        has_data = false;
        if (data != "[DONE]") {
            const auto value = nlohmann::json::parse(data, nullptr, false);
            parsed += value.is_discarded() ? 0 : value.size();
        }
        data.clear();
    };
    for (std::size_t at = 0; at < wire.size(); at += 1024) {
        buffer.append(std::string_view(wire).substr(at, 1024));
        std::size_t pos = 0;
        for (std::size_t lf; (lf = buffer.find('\n', pos)) != std::string::npos; pos = lf + 1) {
            std::size_t end = lf;
            if (end > pos && buffer[end - 1] == '\r') --end;
            if (end == pos) {
                dispatch();
            } else if (buffer.compare(pos, 5, "data:") == 0) {
                std::size_t value = pos + 5;
                if (value < end && buffer[value] == ' ') ++value;
                if (has_data) data += '\n';
                data.append(buffer, value, end - value);
                has_data = true;
            }
        }
        buffer.erase(0, pos);
    }
    dispatch();
    return parsed;
}

// ullm's decoder over CPU time of the floor for the same streams: median, least and most of 5
// interleaved rounds.
struct Ratio {
    double median = 0;
    double least = 0;
    double most = 0;
};

Ratio ratio_to_floor(const ullm::Provider& provider, const std::vector<std::string>& streams,
                     int repetitions) {
    std::vector<double> ratios;
    std::size_t floor_values = 0;
    const auto timed = [&](auto&& decode) {
        const auto begin = Clock::now();
        for (int r = 0; r < repetitions; ++r) {
            for (const auto& wire : streams) decode(wire);
        }
        return std::chrono::duration<double>(Clock::now() - begin).count();
    };
    for (int round = 0; round < 5; ++round) {
        const double ours =
            timed([&](const std::string& wire) { (void)decode_stream(provider, wire); });
        const double floor =
            timed([&](const std::string& wire) { floor_values += floor_stream(wire); });
        ratios.push_back(floor > 0 ? ours / floor : 0.0);
    }
    if (floor_values == 0) throw std::runtime_error("the floor parsed nothing");
    std::sort(ratios.begin(), ratios.end());
    return {ratios[2], ratios.front(), ratios.back()};
}

// The text streams of the perf harness's scenarios, 200 words each, for all four providers:
// the usual shape of each provider's streamed answer of text, with its usage and end.
std::vector<std::string> words() {
    std::vector<std::string> out;
    for (int i = 0; i < 200; ++i) out.push_back(" word" + std::to_string(i));
    return out;
}

std::string sse(std::string_view event, const nlohmann::json& data, const char* end = "\n\n") {
    std::string out;
    if (!event.empty()) out.append("event: ").append(event).append("\n");
    return out.append("data: ").append(data.dump()).append(end);
}

std::string chat_text_stream() {
    using nlohmann::json;
    const auto chunk = [](json delta, json finish, json usage) {
        return json{{"id", "chatcmpl-1"},
                    {"object", "chat.completion.chunk"},
                    {"created", 1780315200},
                    {"model", "gpt-4o-mini"},
                    {"system_fingerprint", "fp_1"},
                    {"choices", json::array({{{"index", 0},
                                              {"delta", std::move(delta)},
                                              {"logprobs", nullptr},
                                              {"finish_reason", std::move(finish)}}})},
                    {"usage", std::move(usage)}};
    };
    std::string wire = sse("", chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
    for (const auto& word : words()) wire += sse("", chunk({{"content", word}}, nullptr, nullptr));
    wire += sse("", chunk(json::object(), "stop", nullptr));
    wire +=
        sse("", chunk(json::object(), nullptr,
                      {{"prompt_tokens", 42}, {"completion_tokens", 200}, {"total_tokens", 242}}));
    return wire + "data: [DONE]\n\n";
}

std::string anthropic_text_stream() {
    using nlohmann::json;
    std::string wire =
        sse("message_start", {{"type", "message_start"},
                              {"message",
                               {{"id", "msg_1"},
                                {"type", "message"},
                                {"role", "assistant"},
                                {"model", "claude-sonnet-4-20250514"},
                                {"content", json::array()},
                                {"stop_reason", nullptr},
                                {"usage", {{"input_tokens", 42}, {"output_tokens", 1}}}}}});
    wire += sse("content_block_start", {{"type", "content_block_start"},
                                        {"index", 0},
                                        {"content_block", {{"type", "text"}, {"text", ""}}}});
    for (const auto& word : words()) {
        wire += sse("content_block_delta", {{"type", "content_block_delta"},
                                            {"index", 0},
                                            {"delta", {{"type", "text_delta"}, {"text", word}}}});
    }
    wire += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
    wire += sse("message_delta", {{"type", "message_delta"},
                                  {"delta", {{"stop_reason", "end_turn"}}},
                                  {"usage", {{"output_tokens", 200}}}});
    return wire + sse("message_stop", {{"type", "message_stop"}});
}

std::string gemini_text_stream() {
    using nlohmann::json;
    const auto all = words();
    std::string wire;
    for (std::size_t i = 0; i < all.size(); ++i) {
        json candidate = {
            {"content", {{"parts", json::array({{{"text", all[i]}}})}, {"role", "model"}}},
            {"index", 0}};
        if (i + 1 == all.size()) candidate["finishReason"] = "STOP";
        wire += sse("",
                    {{"candidates", json::array({candidate})},
                     {"usageMetadata",
                      {{"promptTokenCount", 9},
                       {"candidatesTokenCount", i + 1},
                       {"totalTokenCount", 10 + i}}},
                     {"modelVersion", "gemini-2.5-flash"},
                     {"responseId", "bH6LaZW8Fp_3nsEPqtaSwQ4"}},
                    "\r\n\r\n");
    }
    return wire;
}

std::string responses_text_stream() {
    using nlohmann::json;
    std::string text;
    for (const auto& word : words()) text += word;
    const json part = {{"type", "output_text"},
                       {"annotations", json::array()},
                       {"logprobs", json::array()},
                       {"text", text}};
    const json item = {{"id", "msg_1"},
                       {"type", "message"},
                       {"status", "completed"},
                       {"content", json::array({part})},
                       {"role", "assistant"}};
    const auto response = [](const char* status, json output, json usage) {
        return json{{"id", "resp_1"},           {"object", "response"},
                    {"created_at", 1772062745}, {"status", status},
                    {"model", "gpt-5"},         {"output", std::move(output)},
                    {"usage", std::move(usage)}};
    };
    int sequence = 0;
    std::string wire =
        sse("response.created", {{"type", "response.created"},
                                 {"response", response("in_progress", json::array(), nullptr)},
                                 {"sequence_number", sequence++}});
    json added = item;
    added["status"] = "in_progress";
    added["content"] = json::array();
    wire += sse("response.output_item.added", {{"type", "response.output_item.added"},
                                               {"item", added},
                                               {"output_index", 0},
                                               {"sequence_number", sequence++}});
    json empty = part;
    empty["text"] = "";
    wire += sse("response.content_part.added", {{"type", "response.content_part.added"},
                                                {"content_index", 0},
                                                {"item_id", "msg_1"},
                                                {"output_index", 0},
                                                {"part", empty},
                                                {"sequence_number", sequence++}});
    for (const auto& word : words()) {
        wire += sse("response.output_text.delta", {{"type", "response.output_text.delta"},
                                                   {"content_index", 0},
                                                   {"delta", word},
                                                   {"item_id", "msg_1"},
                                                   {"logprobs", json::array()},
                                                   {"obfuscation", "Zk2q"},
                                                   {"output_index", 0},
                                                   {"sequence_number", sequence++}});
    }
    wire += sse("response.output_text.done", {{"type", "response.output_text.done"},
                                              {"content_index", 0},
                                              {"item_id", "msg_1"},
                                              {"logprobs", json::array()},
                                              {"output_index", 0},
                                              {"sequence_number", sequence++},
                                              {"text", text}});
    wire += sse("response.content_part.done", {{"type", "response.content_part.done"},
                                               {"content_index", 0},
                                               {"item_id", "msg_1"},
                                               {"output_index", 0},
                                               {"part", part},
                                               {"sequence_number", sequence++}});
    wire += sse("response.output_item.done", {{"type", "response.output_item.done"},
                                              {"item", item},
                                              {"output_index", 0},
                                              {"sequence_number", sequence++}});
    return wire +
           sse("response.completed",
               {{"type", "response.completed"},
                {"response",
                 response("completed", json::array({item}),
                          {{"input_tokens", 9}, {"output_tokens", 200}, {"total_tokens", 209}})},
                {"sequence_number", sequence++}});
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

    fmt::print("{:<18} {:>7} {:>14} {:>8} {:>9} {:>12} {:>10} {:>14}\n", "provider", "bodies",
               "us/response", "streams", "events", "ns/event", "MB/s", "x floor [min-max]");
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

        const Ratio ratio = ratio_to_floor(*item.provider, corpus.streams, repetitions);

        const auto responses = static_cast<double>(corpus.bodies.size()) * repetitions;
        fmt::print(
            "{:<18} {:>7} {:>14.2f} {:>8} {:>9} {:>12.1f} {:>10.1f} {:>6.2f}x [{:.2f}-{:.2f}]\n",
            item.label, corpus.bodies.size(), responses > 0 ? body_seconds * 1e6 / responses : 0.0,
            corpus.streams.size(), events / static_cast<std::size_t>(repetitions),
            events > 0 ? stream_seconds * 1e9 / static_cast<double>(events) : 0.0,
            stream_seconds > 0 ? static_cast<double>(stream_bytes) / 1e6 / stream_seconds : 0.0,
            ratio.median, ratio.least, ratio.most);
    }

    // The perf harness's text streams, for the two providers its mock does not serve too.
    fmt::print("\n{:<18} {:>9} {:>12} {:>14}\n", "text stream", "events", "ns/event",
               "x floor [min-max]");
    std::string expected;
    for (const auto& word : words()) expected += word;
    const std::pair<const char*, std::string> texts[] = {
        {"openai-chat", chat_text_stream()},
        {"openai-responses", responses_text_stream()},
        {"anthropic", anthropic_text_stream()},
        {"gemini", gemini_text_stream()}};
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto& [label, wire] = texts[i];
        const ullm::Provider& provider = *cases[i].provider;
        // Every word must come through, or the figure would be of an error.
        auto decoder = provider.stream_decoder(ullm::ChatRequest{.model = "bench"});
        std::vector<ullm::StreamEvent> events;
        decoder->feed(wire, events);
        decoder->finish(events);
        std::string text;
        for (const auto& event : events) {
            if (const auto* delta = event.text_delta()) text += *delta;
        }
        if (text != expected) throw std::runtime_error(std::string(label) + ": wrong text");
        const int rounds = repetitions * 50;
        const auto begin = Clock::now();
        for (int r = 0; r < rounds; ++r) (void)decode_stream(provider, wire);
        const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
        const Ratio ratio = ratio_to_floor(provider, {wire}, rounds);
        fmt::print("{:<18} {:>9} {:>12.1f} {:>6.2f}x [{:.2f}-{:.2f}]\n", label, events.size(),
                   seconds * 1e9 / (static_cast<double>(events.size()) * rounds), ratio.median,
                   ratio.least, ratio.most);
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "ullm_bench_providers: %s\n", error.what());
    return 1;
}
