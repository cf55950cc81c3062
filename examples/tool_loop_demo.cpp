// ullm foundation demo: a tool-calling exchange with an OpenAI-compatible server, end to end
// through the real libcurl transport, with no network and no API key.
//
// An in-process HTTP server on 127.0.0.1 plays a model that first streams a call to the
// `lookup_weather` tool, then (after the tool result arrives) streams its answer. The program
// encodes each request with the Chat Completions adapter, streams the reply through
// CurlTransport, decodes the SSE events, validates the model's arguments against the tool's
// schema and runs the tool, then shows what a model is told when its arguments are invalid.

#include <ullm/core/error.hpp>
#include <ullm/http/curl_transport.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/tool_registry.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/test_server.hpp"

namespace {

// What the scripted model sends: Chat Completions chunks as a real server frames them.
std::string sse(const std::vector<std::string>& payloads) {
    std::string wire;
    for (const auto& payload : payloads) wire += "data: " + payload + "\n\n";
    return wire + "data: [DONE]\n\n";
}

const std::string tool_call_round = sse({
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check. "}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup_weather","arguments":""}}]}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Ber"}}]}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"lin\"}"}}]}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
    R"({"model":"demo-model","choices":[],"usage":{"prompt_tokens":82,"completion_tokens":17}})",
});

const std::string answer_round = sse({
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"content":"It is sunny in Berlin"}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{"content":", 24 °C."}}]})",
    R"({"model":"demo-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})",
    R"({"model":"demo-model","choices":[],"usage":{"prompt_tokens":120,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":64}}})",
});

// Streams one model round and returns the final canonical response.
ullm::ChatResponse stream_round(ullm::Transport& transport, const ullm::Provider& provider,
                                const ullm::ChatRequest& request) {
    auto stream = transport.open_stream(provider.encode(request, true));
    if (stream->head().status != 200) {
        throw std::runtime_error(fmt::format("HTTP {}", stream->head().status));
    }
    auto decoder = provider.stream_decoder(request);
    std::vector<ullm::StreamEvent> events;
    std::string bytes;
    std::optional<ullm::ChatResponse> final_response;
    auto handle = [&] {
        for (auto& event : events) {
            using Type = ullm::StreamEvent::Type;
            if (event.type == Type::text_delta) {
                fmt::print("{}", event.delta);
                std::fflush(stdout);
            } else if (event.type == Type::tool_call_end) {
                fmt::print("\n  [model calls {}({})]\n", event.tool_call->name,
                           event.tool_call->arguments.dump());
            } else if (event.type == Type::done) {
                final_response = std::move(event.response);
            }
        }
        events.clear();
    };
    while (stream->read(bytes)) {
        decoder->feed(bytes, events);
        handle();
    }
    decoder->finish(events);
    handle();
    return *final_response;
}

}  // namespace

int main() {
    try {
        ullm::test::TestServer server;
        server.enqueue(ullm::test::ScriptedResponse::sse(tool_call_round, 24));
        server.enqueue(ullm::test::ScriptedResponse::sse(answer_round, 16));

        const auto weather = ullm::define_tool(
            {.name = "lookup_weather",
             .description = "Look up the current weather by city name",
             .parameters = ullm::schema::object(
                 {{"city", ullm::schema::string("The city to look up", {.min_length = 1})},
                  {"unit", ullm::schema::enumeration({"c", "f"}, "Temperature unit")}},
                 {"city"}),
             .execute = [](const ullm::json& args, ullm::ToolContext&) -> ullm::json {
                 return {{"city", args["city"]}, {"forecast", "Sunny"}, {"temperature_c", 24}};
             }});
        const ullm::ToolRegistry tools({weather});

        ullm::CurlTransport transport;
        const ullm::OpenAiChatProvider provider(
            {.base_url = server.base_url() + "/v1", .provider_name = "local"});

        ullm::ChatRequest request;
        request.model = "demo-model";
        request.system = "You are a concise weather assistant.";
        request.messages = {ullm::Message::user("What is the weather in Berlin?")};
        for (const auto& tool : tools.tools()) request.tools.push_back(tool.declaration());

        fmt::print("user> What is the weather in Berlin?\nassistant> ");
        auto first = stream_round(transport, provider, request);
        request.messages.push_back(first.message);

        std::vector<ullm::ToolResultPart> results;
        for (const auto& call : first.tool_calls) {
            ullm::ToolContext context;
            const auto outcome = tools.run(call.name, call.arguments, context);
            fmt::print("  [tool {} returned {}]\n", call.name, outcome.result.dump());
            results.push_back({call.id, call.name, outcome.result, outcome.is_error});
        }
        request.messages.push_back(ullm::Message::tool_results(results));

        fmt::print("assistant> ");
        const auto second = stream_round(transport, provider, request);
        const ullm::Usage total = [&] {
            ullm::Usage sum = first.usage;
            sum += second.usage;
            return sum;
        }();
        fmt::print(
            "\n\nfinish: {}; tokens: {} in ({} cached), {} out; {} requests on {} connection\n",
            ullm::to_string(second.finish_reason), total.input_tokens, total.cached_read_tokens,
            total.output_tokens, server.request_count(), server.connections_accepted());

        // What the model is told when its arguments break the schema.
        ullm::ToolContext context;
        const auto rejected = tools.run("lookup_weather", {{"cty", "Berlin"}}, context);
        fmt::print("\ninvalid arguments {{\"cty\":\"Berlin\"}} -> {} ({})\n",
                   rejected.result.get<std::string>(), rejected.error_code);

        const auto sent = server.requests();
        fmt::print("second request replayed the tool result: {}\n",
                   sent.size() == 2 && sent[1].body.find("\"role\":\"tool\"") != std::string::npos
                       ? "yes"
                       : "no");
        return 0;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "demo failed: %s\n", error.what());
        return 1;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "demo failed: %s\n", error.what());
        return 1;
    }
}
