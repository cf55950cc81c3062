// ullm_bench_sse: throughput of the SSE parser and the NDJSON / JSON-array splitters over the
// recorded provider traffic, plus the two worst cases for an incremental parser (one huge
// event fed byte by byte, many tiny events in one write). Prints its figures; build it in
// Release.

#include <ullm/client/client.hpp>
#include <ullm/core/json.hpp>
#include <ullm/http/line_splitter.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/http/transport.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <fmt/core.h>

#include "support/fixtures.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// A transport whose every stream is one 200 response delivering `body` in a single read: a
// client's whole stream path without a socket.
class OneWriteTransport final : public ullm::Transport {
public:
    explicit OneWriteTransport(const std::string& body) : body_(body) {}

    ullm::HttpResponse send(const ullm::HttpRequest&, std::stop_token) override {
        throw std::runtime_error("not used");
    }

    std::unique_ptr<ullm::HttpStream> open_stream(const ullm::HttpRequest&,
                                                  std::stop_token) override {
        return std::make_unique<Stream>(body_);
    }

private:
    class Stream final : public ullm::HttpStream {
    public:
        explicit Stream(const std::string& body) : body_(body) { head_.status = 200; }
        const ullm::HttpResponseHead& head() override { return head_; }
        bool read(std::string& out) override {
            if (sent_) return false;
            sent_ = true;
            out.assign(body_);
            return true;
        }
        void cancel() noexcept override {}

    private:
        const std::string& body_;
        ullm::HttpResponseHead head_;
        bool sent_ = false;
    };

    const std::string& body_;
};

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Chunk sizes of 1 to 4 KiB, a fixed pseudo-random sequence (what a TLS socket delivers).
class ChunkSizes {
public:
    std::size_t next() {
        state_ = state_ * 1664525U + 1013904223U;
        return 1024 + (state_ >> 8) % 3073;
    }

private:
    std::uint32_t state_ = 12345;
};

/// Calls `feed(chunk)` over `text` in 1-4 KiB chunks, or whole when `whole`.
template <class Feed>
void feed_chunks(std::string_view text, bool whole, ChunkSizes& sizes, Feed&& feed) {
    if (whole) {
        feed(text);
        return;
    }
    for (std::size_t start = 0; start < text.size();) {
        const std::size_t size = sizes.next();
        feed(text.substr(start, size));
        start += size;
    }
}

struct Result {
    double seconds = 0;
    std::size_t bytes = 0;
    std::size_t items = 0;
};

void report(const char* what, const Result& r, const char* unit) {
    fmt::print("  {:<40} {:8.1f} MB/s  {:7.2f} M {}/s  ({:.0f} MB, {} {}, {:.2f} s)\n", what,
               static_cast<double>(r.bytes) / r.seconds / 1e6,
               static_cast<double>(r.items) / r.seconds / 1e6, unit,
               static_cast<double>(r.bytes) / 1e6, r.items, unit, r.seconds);
}

/// Repeats `pass()` (which returns bytes and items of one pass) for at least `min_seconds`.
template <class Pass>
Result repeat(double min_seconds, Pass&& pass) {
    Result total;
    const auto start = Clock::now();
    do {
        const Result one = pass();
        total.bytes += one.bytes;
        total.items += one.items;
        total.seconds = seconds_since(start);
    } while (total.seconds < min_seconds);
    return total;
}

Result sse_pass(const std::vector<ullm::test::RecordedStream>& streams, bool whole) {
    Result r;
    ChunkSizes sizes;
    for (const auto& stream : streams) {
        ullm::SseParser parser;
        feed_chunks(stream.wire, whole, sizes, [&](std::string_view chunk) {
            parser.feed(chunk, [&](ullm::SseEvent&&) { r.items += 1; });
        });
        (void)parser.finish();
        r.bytes += stream.wire.size();
    }
    return r;
}

}  // namespace

int main() try {
    const auto streams = ullm::test::recorded_sse_streams();
    std::size_t corpus_bytes = 0;
    for (const auto& stream : streams) corpus_bytes += stream.wire.size();
    fmt::print("ullm_bench_sse: {} recorded SSE streams, {:.2f} MB\n", streams.size(),
               static_cast<double>(corpus_bytes) / 1e6);

    fmt::print("SseParser\n");
    report("recorded streams, 1-4 KiB chunks",
           repeat(1.0, [&] { return sse_pass(streams, false); }), "events");
    report("recorded streams, one feed each", repeat(1.0, [&] { return sse_pass(streams, true); }),
           "events");

    {
        const std::size_t size = std::size_t{1} << 20;
        std::string wire = "data: " + std::string(size, 'x') + "\n\n";
        ullm::SseParser parser;
        std::size_t got = 0;
        const auto start = Clock::now();
        for (std::size_t i = 0; i < wire.size(); ++i) {
            parser.feed(std::string_view(wire).substr(i, 1),
                        [&](ullm::SseEvent&& event) { got += event.data.size(); });
        }
        const double elapsed = seconds_since(start);
        fmt::print("  {:<40} {:8.1f} ms     ({:.1f} ns/byte, data {} bytes)\n",
                   "one 1 MiB event fed one byte at a time", elapsed * 1e3,
                   elapsed * 1e9 / static_cast<double>(wire.size()), got);
    }
    {
        std::string wire;
        for (int i = 0; i < 100000; ++i) wire += "data: {\"i\":" + std::to_string(i) + "}\n\n";
        const Result r = repeat(0.5, [&] {
            ullm::SseParser parser;
            Result one;
            parser.feed(wire, [&](ullm::SseEvent&&) { one.items += 1; });
            one.bytes = wire.size();
            return one;
        });
        const double per_write = r.seconds / (static_cast<double>(r.items) / 100000.0);
        fmt::print("  {:<40} {:8.1f} ms     ({:.2f} M events/s)\n",
                   "100000 small events in one write", per_write * 1e3,
                   static_cast<double>(r.items) / r.seconds / 1e6);
    }

    // The same two worst cases through a provider's whole stream decoder (SSE, JSON, events),
    // as a stream of Chat Completions chunks: the figures issue 13 sets (8 MiB one byte per
    // write under 100 ms; many events in one write in linear time).
    fmt::print("OpenAI Chat Completions stream decoder\n");
    const ullm::OpenAiChatProvider provider;
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    const auto chat_chunk = [](std::string_view text) {
        return "data: {\"id\":\"c\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
               "\"delta\":{\"content\":\"" +
               std::string(text) + "\"}}]}\n\n";
    };
    {
        // The first pass runs on memory the process has never touched (page faults included),
        // the later ones on memory the allocator kept: both are quoted.
        const std::string wire =
            chat_chunk(std::string(std::size_t{8} << 20, 'x')) + "data: [DONE]\n\n";
        std::vector<double> passes;
        std::size_t text = 0;
        for (int pass = 0; pass < 5; ++pass) {
            const auto decoder = provider.stream_decoder(request);
            std::vector<ullm::StreamEvent> events;
            text = 0;
            const auto start = Clock::now();
            for (std::size_t i = 0; i < wire.size(); ++i) {
                decoder->feed(std::string_view(wire).substr(i, 1), events);
                for (const auto& event : events) text += event.delta.size();
                events.clear();
            }
            decoder->finish(events);
            for (const auto& event : events) {
                if (event.response && event.response->text.size() != text) text = 0;
            }
            passes.push_back(seconds_since(start));
        }
        const double first = passes.front();
        std::sort(passes.begin() + 1, passes.end());
        const double warm = passes[3];  // the upper median of the four later passes
        fmt::print(
            "  {:<40} {:8.1f} ms     (first pass; later passes {:.1f} ms, {:.1f} ns/byte; "
            "text {} bytes)\n",
            "one 8 MiB event fed one byte at a time", first * 1e3, warm * 1e3,
            warm * 1e9 / static_cast<double>(wire.size()), text);
    }
    for (const int count : {1000, 10000, 100000}) {
        std::string wire;
        for (int i = 0; i < count; ++i) wire += chat_chunk("w" + std::to_string(i));
        wire += "data: [DONE]\n\n";
        ullm::ClientOptions options;
        options.transport = std::make_shared<OneWriteTransport>(wire);
        options.providers.push_back(std::make_shared<ullm::OpenAiChatProvider>(
            ullm::OpenAiChatOptions{.api_key = "sk-bench"}));
        options.default_model = "openai/gpt-4o";
        const ullm::Client client(options);
        const Result r = repeat(0.5, [&] {
            ullm::ChatRequest one_request;
            one_request.messages.push_back(ullm::Message::user("hi"));
            Result one;
            for (const auto& event : client.stream(std::move(one_request))) {
                if (event.text_delta() != nullptr) one.items += 1;
            }
            one.bytes = wire.size();
            return one;
        });
        const double per_write = r.seconds / (static_cast<double>(r.items) / count);
        fmt::print(
            "  {:>6} events in one read (ChatStream){:<4} {:8.2f} ms     ({:.0f} ns/event)\n",
            count, "", per_write * 1e3, per_write * 1e9 / count);
    }

    // The NDJSON and JSON-array corpora: every recorded payload line that is valid JSON.
    std::string ndjson;
    std::string array = "[";
    std::size_t values = 0;
    for (const auto& file : ullm::test::fixture_files("", ".chunks.txt")) {
        const std::string text = ullm::test::read_file(file);
        if (ullm::test::looks_like_sse_wire(text)) continue;
        for (const auto line : ullm::test::chunk_lines(text)) {
            if (!ullm::json::accept(line)) continue;
            ndjson.append(line).append("\n");
            if (values++ > 0) array += "\n,\r\n";
            array.append(line);
        }
    }
    array += "\n]";

    fmt::print("NdjsonSplitter ({} lines, {:.2f} MB)\n", values,
               static_cast<double>(ndjson.size()) / 1e6);
    for (const bool whole : {false, true}) {
        const Result r = repeat(1.0, [&] {
            ullm::NdjsonSplitter splitter;
            ChunkSizes sizes;
            Result one;
            feed_chunks(ndjson, whole, sizes, [&](std::string_view chunk) {
                splitter.feed(chunk, [&](std::string_view) { one.items += 1; });
            });
            (void)splitter.finish();
            one.bytes = ndjson.size();
            return one;
        });
        report(whole ? "one feed" : "1-4 KiB chunks", r, "lines");
    }

    fmt::print("JsonArrayStreamSplitter ({} elements, {:.2f} MB)\n", values,
               static_cast<double>(array.size()) / 1e6);
    for (const bool whole : {false, true}) {
        const Result r = repeat(1.0, [&] {
            ullm::JsonArrayStreamSplitter splitter;
            ChunkSizes sizes;
            Result one;
            feed_chunks(array, whole, sizes, [&](std::string_view chunk) {
                splitter.feed(chunk, [&](std::string_view) { one.items += 1; });
            });
            if (!splitter.finish()) throw std::runtime_error("array not complete");
            one.bytes = array.size();
            return one;
        });
        report(whole ? "one feed" : "1-4 KiB chunks", r, "elements");
    }
    return 0;
} catch (const std::exception& error) {
    fmt::print(stderr, "ullm_bench_sse: {}\n", error.what());
    return 1;
}
