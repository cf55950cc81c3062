// A body is parsed whole: bytes after a NUL are not ignored. `{}` NUL `junk` is refused exactly
// as `{}junk` is, by every provider's decoder, stream decoder and tool-argument reader.

#include <ullm/core/error.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>

#include <memory>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace trailing_bytes_test {

using ullm::test::error_code_of;

namespace {

struct Body {
    std::shared_ptr<const ullm::Provider> provider;
    std::string model;
    std::string body;   // a valid, complete response body
    std::string event;  // one valid stream event's data
};

std::vector<Body> bodies() {
    return {
        {std::make_shared<ullm::OpenAiChatProvider>(ullm::OpenAiChatOptions{.api_key = "k"}),
         "gpt-4o",
         R"({"id":"c1","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]})",
         R"({"id":"c1","choices":[{"index":0,"delta":{"content":"hi"}}]})"},
        {std::make_shared<ullm::OpenAiResponsesProvider>(
             ullm::OpenAiResponsesOptions{.api_key = "k"}),
         "gpt-5-mini",
         R"({"id":"r1","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}]})",
         R"({"type":"response.created","response":{"id":"r1"}})"},
        {std::make_shared<ullm::AnthropicProvider>(ullm::AnthropicOptions{.api_key = "k"}),
         "claude-sonnet-4-5",
         R"({"id":"m1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}})",
         R"({"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":0}}})"},
        {std::make_shared<ullm::GeminiProvider>(ullm::GeminiOptions{.api_key = "k"}),
         "gemini-2.5-flash",
         R"({"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]})",
         R"({"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]}}]})"},
    };
}

ullm::HttpResponse ok(std::string body) {
    ullm::HttpResponse response;
    response.status = 200;
    response.body = std::move(body);
    return response;
}

}  // namespace

TEST_CASE("every provider refuses a body with a NUL byte and junk after it",
          "[providers][trailing]") {
    const std::string nul(1, '\0');
    for (const auto& sample : bodies()) {
        INFO(sample.provider->name());
        ullm::ChatRequest request;
        request.model = sample.model;
        // The body itself decodes: what follows is what is refused.
        CHECK(error_code_of([&] { (void)sample.provider->decode(ok(sample.body), request); }) ==
              "no error");
        for (const auto& tail : {std::string("junk"), nul + "junk", nul}) {
            INFO("tail of " << tail.size() << " bytes");
            CHECK(error_code_of([&] {
                      (void)sample.provider->decode(ok(sample.body + tail), request);
                  }) == "invalid_provider_response");
            auto decoder = sample.provider->stream_decoder(request);
            std::vector<ullm::StreamEvent> events;
            CHECK(error_code_of([&] {
                      decoder->feed("data: " + sample.event + tail + "\n\n", events);
                  }) == "invalid_provider_response");
        }
    }
}

}  // namespace trailing_bytes_test
