// ullm quick start: send one prompt, print the answer, its tokens and what it cost.
//
// A real program gets its key from the environment and talks to api.openai.com. This one runs
// offline: an in-process HTTP server on 127.0.0.1 plays the OpenAI Chat Completions API, and
// the program points OPENAI_BASE_URL at it. Everything else is what a real call does: the
// request is encoded and sent through libcurl, the answer decoded, and its cost priced from
// the price table shipped with ullm.

#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/message.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "support/test_server.hpp"

int main() try {
    // The stand-in for api.openai.com, with one answer to give.
    ullm::test::TestServer server;
    server.enqueue(ullm::test::ScriptedResponse::json(200, R"({
        "id": "chatcmpl-quick-start", "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "The capital of France is Paris."}}],
        "usage": {"prompt_tokens": 24, "completion_tokens": 8}})"));

    // What you would export in your shell: OPENAI_API_KEY (and OPENAI_BASE_URL only to reach
    // another server).
    ::setenv("OPENAI_API_KEY", "sk-offline-example", 1);
    ::setenv("OPENAI_BASE_URL", (server.base_url() + "/v1").c_str(), 1);

    // 1. A client configured from the environment. With OPENAI_API_KEY set, `gpt-*` models
    //    route to OpenAI; ANTHROPIC_API_KEY and GEMINI_API_KEY do the same for theirs.
    const auto client = ullm::Client::from_env();

    // 2. A request: the model, an optional system prompt, the messages and an output limit.
    ullm::ChatRequest request;
    request.model = "gpt-4o-mini";
    request.system = "Answer in one sentence.";
    request.messages = {ullm::Message::user("What is the capital of France?")};
    request.max_tokens = 100;

    // What it may cost at most, before anything is sent (about 4 characters per token).
    const auto estimate = client.estimate(request);
    fmt::print("estimate: ~{} tokens in, at most {} out, at most ${:.6f}\n", estimate.input_tokens,
               estimate.max_output_tokens, estimate.max_cost_usd);

    // 3. Send it and wait for the answer. Failures throw an `ullm::Error` with a stable code.
    const auto response = client.complete(request);

    fmt::print("answer: {}\n", response.text);
    fmt::print("model: {} ({}), finish reason: {}\n", response.model, response.provider,
               ullm::to_string(response.finish_reason));
    // `cost_usd` is set when the price table knows the model: gpt-4o-mini costs $0.15 per
    // million tokens in and $0.60 out.
    fmt::print("tokens: {} in, {} out; cost: ${:.7f}\n", response.usage.input_tokens,
               response.usage.output_tokens, response.usage.cost_usd.value_or(0.0));

    // What went over the wire.
    const auto sent = server.requests().at(0);
    fmt::print("sent: {} {} with \"Authorization: {}...\"\n", sent.method, sent.target,
               sent.header("authorization").substr(0, 10));
    return 0;
} catch (const ullm::Error& error) {
    // e.g. [ullm.authentication_failed] ..., [ullm.rate_limited] ...
    std::fprintf(stderr, "request failed (%s): %s\n", error.code().c_str(), error.what());
    return 1;
} catch (const std::exception& error) {
    std::fprintf(stderr, "quick start failed: %s\n", error.what());
    return 1;
}
