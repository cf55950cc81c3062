// `ullm`: the command-line face of the library. For now one subcommand:
//
//   ullm decode --provider NAME [--status N] FILE
//
// reads a recorded response body, SSE transcript or `*.chunks.txt` recording (one payload per
// line) and prints the canonical events as JSON lines, then the final canonical response as
// one JSON object on the last line. Exit status 0 when the file decoded (an error the provider
// reported is part of the output), 2 when it is not a valid transcript, 64 for bad usage.

#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/testing/replay.hpp>
#include <ullm/version.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using ullm::json;
// Output keeps keys in the order written: "type" first, then the rest.
using out_json = ullm::ordered_json;

constexpr int exit_invalid = 2;
constexpr int exit_usage = 64;

const char* const usage_text =
    "usage: ullm decode --provider NAME [--status N] FILE\n"
    "       ullm version\n"
    "\n"
    "decode prints the canonical events of a recorded response as JSON lines, then the final\n"
    "response. NAME: openai, openai-responses, anthropic, gemini, or an OpenAI-compatible server "
    "(ollama, groq, deepseek, "
    "mistral,\n"
    "xai, together, openrouter, vllm, llamacpp, ...). FILE: a response body (--status gives its\n"
    "HTTP status, 200 by default), an SSE transcript, or a *.chunks.txt recording.\n";

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

out_json usage_json(const ullm::Usage& usage) {
    return {{"input_tokens", usage.input_tokens},
            {"output_tokens", usage.output_tokens},
            {"cached_read_tokens", usage.cached_read_tokens},
            {"cached_write_tokens", usage.cached_write_tokens},
            {"reasoning_tokens", usage.reasoning_tokens},
            {"cost_usd", usage.cost_usd ? out_json(*usage.cost_usd) : out_json(nullptr)}};
}

out_json event_json(const ullm::StreamEvent& event) {
    out_json out = {{"type", ullm::to_string(event.type)}};
    using Type = ullm::StreamEvent::Type;
    switch (event.type) {
        case Type::text_delta:
        case Type::reasoning_delta:
            out["delta"] = event.delta;
            break;
        case Type::tool_call_start:
            out["id"] = event.tool_call_id;
            out["name"] = event.tool_name;
            break;
        case Type::tool_call_delta:
            out["id"] = event.tool_call_id;
            out["delta"] = event.delta;
            break;
        case Type::tool_call_end:
            out["id"] = event.tool_call_id;
            out["name"] = event.tool_name;
            if (event.tool_call) out["arguments"] = event.tool_call->arguments;
            break;
        case Type::usage_update:
            if (event.usage) out["usage"] = usage_json(*event.usage);
            break;
        case Type::retry:
            out["attempt"] = event.attempt;
            out["delay_ms"] = event.delay.count();
            out["error_code"] = event.error_code;
            break;
        case Type::tool_call_result:
            break;
        case Type::done:
            if (event.response)
                out["finish_reason"] = ullm::to_string(event.response->finish_reason);
            break;
    }
    return out;
}

out_json response_json(const ullm::ChatResponse& response) {
    out_json calls = out_json::array();
    for (const auto& call : response.tool_calls) {
        calls.push_back({{"id", call.id}, {"name", call.name}, {"arguments", call.arguments}});
    }
    return {{"text", response.text},
            {"reasoning_text", response.reasoning_text},
            {"tool_calls", calls},
            {"finish_reason", ullm::to_string(response.finish_reason)},
            {"usage", usage_json(response.usage)},
            {"model", response.model},
            {"provider", response.provider},
            {"request_id", response.request_id},
            {"refusal", response.refusal ? out_json(*response.refusal) : out_json(nullptr)}};
}

out_json error_json(const ullm::Error& error) {
    return {{"error",
             {{"code", error.code()}, {"status", error.status()}, {"message", error.message()}}}};
}

void print_line(const out_json& value) {
    const std::string line = value.dump(-1, ' ', false, out_json::error_handler_t::replace);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
}

// Errors that mean the file is not a transcript, rather than a transcript of a failure.
bool is_invalid_transcript(const ullm::Error& error) {
    return error.code() == "invalid_provider_response" || error.code() == "stream_truncated";
}

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

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::fputs(usage_text, args.empty() ? stderr : stdout);
        return args.empty() ? exit_usage : 0;
    }
    if (args[0] == "version" || args[0] == "--version") {
        fmt::print("ullm {}\n", ullm::version());
        return 0;
    }
    if (args[0] != "decode") {
        std::fprintf(stderr, "ullm: unknown command \"%s\" (try ullm help)\n", args[0].c_str());
        return exit_usage;
    }
    std::string provider;
    std::string path;
    int status = 200;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& arg = args[i];
        if ((arg == "--provider" || arg == "--status") && i + 1 < args.size()) {
            const auto& value = args[++i];
            if (arg == "--provider") {
                provider = value;
                continue;
            }
            try {
                std::size_t used = 0;
                status = std::stoi(value, &used);
                if (used != value.size() || status < 100 || status > 599)
                    throw std::out_of_range("");
            } catch (const std::exception&) {
                std::fprintf(stderr, "ullm decode: --status needs an HTTP status, got \"%s\"\n",
                             value.c_str());
                return exit_usage;
            }
        } else if (!arg.empty() && arg[0] == '-') {
            std::fprintf(stderr, "ullm decode: unknown option \"%s\"\n", arg.c_str());
            return exit_usage;
        } else if (path.empty()) {
            path = arg;
        } else {
            std::fprintf(stderr, "ullm decode: one FILE only\n");
            return exit_usage;
        }
    }
    if (provider.empty() || path.empty()) {
        std::fputs(usage_text, stderr);
        return exit_usage;
    }
    return decode(provider, status, path);
}
