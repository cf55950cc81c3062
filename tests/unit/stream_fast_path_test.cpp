// The stream decoders' fast paths read the usual chunk without a JSON DOM. They must change
// nothing but speed: every recorded stream, and every chunk of a corpus of near misses, decodes
// to the same events, or fails with the same error, with the fast paths on and off, whether
// the bytes arrive whole or a byte at a time.

#include <ullm/core/error.hpp>
#include <ullm/detail/stream_fast_path.hpp>
#include <ullm/providers/openai_chat.hpp>

#include "support/catch.hpp"
#include "support/fixtures.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace {

std::string render(const ullm::Usage& usage) {
    return std::to_string(usage.input_tokens) + "/" + std::to_string(usage.output_tokens) + "/" +
           std::to_string(usage.cached_read_tokens) + "/" +
           std::to_string(usage.cached_write_tokens) + "/" + std::to_string(usage.reasoning_tokens);
}

std::string render(const ullm::StreamEvent& event) {
    std::string out = "[" + std::string(ullm::to_string(event.type)) + "|" + event.delta + "|" +
                      event.tool_call_id + "|" + event.tool_name;
    if (event.tool_call) out += "|call " + event.tool_call->arguments.dump();
    if (event.usage) out += "|usage " + render(*event.usage);
    if (event.response) {
        const auto& response = *event.response;
        out += "|done " + response.text + "|" + response.reasoning_text + "|" +
               response.raw_finish_reason + "|" + response.model + "|" + response.request_id + "|" +
               response.refusal.value_or("-") + "|" + render(response.usage);
        for (const auto& call : response.tool_calls) {
            out += "|" + call.id + " " + call.name + " " + call.arguments.dump();
        }
    }
    return out + "]";
}

// What an OpenAI Chat Completions stream decoder makes of `wire`, fed whole or a byte at a
// time, as one comparable text (events, then the error if any).
std::string decode(std::string_view wire, bool fast, bool bytewise) {
    ullm::detail::set_stream_fast_paths(fast);
    const ullm::OpenAiChatProvider provider;
    ullm::ChatRequest request;
    request.model = "gpt-4o";
    const auto decoder = provider.stream_decoder(request);
    ullm::detail::set_stream_fast_paths(true);
    std::vector<ullm::StreamEvent> events;
    std::string out;
    try {
        if (bytewise) {
            for (std::size_t i = 0; i < wire.size(); ++i) decoder->feed(wire.substr(i, 1), events);
        } else {
            decoder->feed(wire, events);
        }
        decoder->finish(events);
    } catch (const ullm::Error& error) {
        out += "error " + std::string(error.what());
    }
    for (const auto& event : events) out = render(event) + out;
    return out;
}

void check_same(std::string_view wire) {
    INFO(wire);
    const std::string general = decode(wire, false, false);
    CHECK(decode(wire, true, false) == general);
    CHECK(decode(wire, true, true) == general);
}

}  // namespace

TEST_CASE("fast path: every recorded Chat Completions stream decodes as without it",
          "[fast_path][fixtures]") {
    std::size_t checked = 0;
    for (const auto& stream : ullm::test::recorded_sse_streams()) {
        const bool chat = stream.framing == ullm::test::Framing::chat_completions ||
                          stream.name.find("openai-chat") != std::string::npos;
        if (!chat) continue;
        INFO(stream.name);
        const std::string general = decode(stream.wire, false, false);
        CHECK(decode(stream.wire, true, false) == general);
        ++checked;
    }
    CHECK(checked > 10);
}

TEST_CASE("fast path: chunks near the usual shape decode as without it", "[fast_path]") {
    const std::string usual =
        R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",)"
        R"("system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"Hi"},)"
        R"("logprobs":null,"finish_reason":null}]})";
    const std::vector<std::string> chunks = {
        usual,
        R"({"id":"a","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
        R"({"id":"a","model":"m","choices":[{"index":0,"delta":{"content":null,"refusal":null}}]})",
        R"({"id":"a","model":"m","choices":[{"index":0,"delta":{"content":"x","content":"y"}}]})",
        R"({"id":"a","id":"b","choices":[{"index":0,"delta":{"content":"x"}}]})",
        R"({"id":"a","choices":[{"index":1,"delta":{"content":"other choice"}}]})",
        R"({"id":"a","choices":[{"index":-1,"delta":{"content":"x"}}]})",
        R"({"id":"a","choices":[{"index":0.0,"delta":{"content":"x"}}]})",
        R"({"id":"a","choices":[{"delta":{"content":"no index"}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}},{"index":1,"delta":{}}]})",
        R"({"id":"a","choices":[]})",
        R"({"id":"a","choices":[1]})",
        R"({"id":"a","choices":{}})",
        R"({"id":7,"choices":[{"index":0,"delta":{"content":"id not a string"}}]})",
        R"({"id":"a","model":["m"],"choices":[{"index":0,"delta":{"content":"x"}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":["a"]}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":[{"type":"text","text":"t"}]}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x","reasoning_content":"r"}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x","refusal":"no"}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}],"usage":null})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":4}})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"},"usage":{"prompt_tokens":1}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}],"x_groq":{"usage":{"prompt_tokens":2}}})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}],"error":{"message":"boom"}})",
        R"({"error":{"message":"overloaded","type":"server_error"}})",
        R"({"id":"a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"\u00e9\ud83d\ude00 \"q\" \\ \n"}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"\u0000nul"}}]})",
        R"({"id":"a","created":true,"choices":[{"index":0,"delta":{"content":"x"}}]})",
        R"({"id":"a","created":-5,"choices":[{"index":0,"delta":{"content":"x"}}]})",
        R"({"id":"a","created":1.5e9,"choices":[{"index":0,"delta":{"content":"x"}}]})",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]} )",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}]}])",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x"}}])",
        R"({"id":"a","choices":[{"index":0,"delta":{"content":"x\xff"}}]})",
        R"({})",
        R"([])",
        R"("text")",
        R"(null)",
        "",
    };
    const std::string nul(1, '\0');
    check_same("data: " + usual + nul + "junk\n\ndata: [DONE]\n\n");
    check_same("data: " + usual + nul + "\n\ndata: [DONE]\n\n");
    for (const auto& chunk : chunks) {
        // Each alone, and each after a usual chunk (so that id and model are already known).
        check_same("data: " + chunk + "\n\ndata: [DONE]\n\n");
        check_same("data: " + usual + "\n\ndata: " + chunk + "\n\ndata: [DONE]\n\n");
    }
    // A usage reported inside a choice is carried to the next chunk (Moonshot): that chunk is
    // read the general way even when it is a usual one.
    check_same(
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},"
        "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}]}\n\ndata: " +
        usual + "\n\ndata: [DONE]\n\n");
}
