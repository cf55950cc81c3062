// The stream decoders' fast paths read the usual chunk without a JSON DOM. They must change
// nothing but speed: every recorded stream, and every chunk of a corpus of near misses, decodes
// to the same events, or fails with the same error, with the fast paths on and off, whether
// the bytes arrive whole or a byte at a time.

#include <ullm/core/error.hpp>
#include <ullm/detail/stream_fast_path.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/openai_chat.hpp>

#include "support/catch.hpp"
#include "support/fixtures.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace stream_fast_path_test {

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

// What a stream decoder of `provider` makes of `wire`, fed whole or a byte at a time, as one
// comparable text (events, then the error if any).
std::string decode(const ullm::Provider& provider, std::string_view wire, bool fast,
                   bool bytewise) {
    ullm::detail::set_stream_fast_paths(fast);
    ullm::ChatRequest request;
    request.model = provider.name() == "anthropic" ? "claude-sonnet-4-5" : "gpt-4o";
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

void check_same(const ullm::Provider& provider, std::string_view wire) {
    INFO(wire);
    const std::string general = decode(provider, wire, false, false);
    CHECK(decode(provider, wire, true, false) == general);
    CHECK(decode(provider, wire, true, true) == general);
}

const ullm::OpenAiChatProvider openai;
const ullm::AnthropicProvider anthropic;

}  // namespace

TEST_CASE("fast path: every recorded Chat Completions and Messages stream decodes as without it",
          "[fast_path][fixtures]") {
    std::size_t chat_streams = 0;
    std::size_t message_streams = 0;
    for (const auto& stream : ullm::test::recorded_sse_streams()) {
        const bool chat = stream.framing == ullm::test::Framing::chat_completions ||
                          stream.name.find("openai-chat") != std::string::npos;
        const bool messages = !chat && stream.name.find("anthropic") != std::string::npos;
        if (!chat && !messages) continue;
        INFO(stream.name);
        const ullm::Provider& provider =
            chat ? static_cast<const ullm::Provider&>(openai) : anthropic;
        const std::string general = decode(provider, stream.wire, false, false);
        CHECK(decode(provider, stream.wire, true, false) == general);
        ++(chat ? chat_streams : message_streams);
    }
    CHECK(chat_streams > 10);
    CHECK(message_streams > 10);
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
    check_same(openai, "data: " + usual + nul + "junk\n\ndata: [DONE]\n\n");
    check_same(openai, "data: " + usual + nul + "\n\ndata: [DONE]\n\n");
    for (const auto& chunk : chunks) {
        // Each alone, and each after a usual chunk (so that id and model are already known).
        check_same(openai, "data: " + chunk + "\n\ndata: [DONE]\n\n");
        check_same(openai, "data: " + usual + "\n\ndata: " + chunk + "\n\ndata: [DONE]\n\n");
    }
    // A usage reported inside a choice is carried to the next chunk (Moonshot): that chunk is
    // read the general way even when it is a usual one.
    check_same(openai,
               "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},"
               "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2}}]}\n\ndata: " +
                   usual + "\n\ndata: [DONE]\n\n");
}

TEST_CASE("fast path: Messages events near a text delta decode as without it", "[fast_path]") {
    const std::string start =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
        "\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-"
        "4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,"
        "\"output_tokens\":1}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n";
    const std::string end =
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
        "\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    const std::string usual =
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}})";
    const std::vector<std::string> events = {
        usual,
        R"({"delta":{"text":"Hi","type":"text_delta"},"index":0,"type":"content_block_delta"})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}})",
        R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"x"}})",
        R"({"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"x"}})",
        R"({"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}})",
        R"({"type":"content_block_delta","index":0.0,"delta":{"type":"text_delta","text":"x"}})",
        R"({"type":"content_block_delta","index":18446744073709551615,"delta":{"type":"text_delta","text":"x"}})",
        R"({"type":"content_block_delta","delta":{"type":"text_delta","text":"no index"}})",
        R"({"type":"content_block_delta","index":0})",
        R"({"type":"content_block_delta","index":0,"delta":"text"})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"text":"no type"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}})",
        R"({"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"a"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"},"delta":{"type":"text_delta","text":"b"}})",
        R"({"type":"content_block_delta","type":"ping","index":0,"delta":{"type":"text_delta","text":"a"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x","extra":1}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"},"extra":1})",
        R"({"type":"ping"})",
        R"({"index":0,"delta":{"type":"text_delta","text":"type from the event line"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\u00e9\ud83d\ude00 \"q\""}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x\xff"}})",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}} x)",
        R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"})",
        R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})",
        R"([])",
        "",
    };
    const std::string nul(1, '\0');
    for (const auto& event : events) {
        const std::string line = "event: content_block_delta\ndata: " + event + "\n\n";
        check_same(anthropic, start + line + end);
        // After the block stopped, and before any message started.
        check_same(anthropic, start + end.substr(0, end.find("event: message_delta")) + line);
        check_same(anthropic, line + start + end);
    }
    check_same(anthropic,
               start + "event: content_block_delta\ndata: " + usual + nul + "junk\n\n" + end);
}

}  // namespace stream_fast_path_test
