#pragma once

// Chat Completions answers for tests that script the in-process server (one choice, 10 input
// and 5 output tokens), and a client pointed at it.

#include <ullm/client/client.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/openai_chat.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "support/test_server.hpp"

namespace ullm::test {

inline json chat_completion_body(const json& message, const std::string& finish = "stop") {
    return {
        {"id", "chatcmpl-1"},
        {"object", "chat.completion"},
        {"model", "gpt-4o-mini"},
        {"choices", json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}})},
        {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}, {"total_tokens", 15}}}};
}

/// An assistant answer with `content` as its text.
inline ScriptedResponse chat_completion_reply(const std::string& content,
                                              const std::string& finish = "stop") {
    return ScriptedResponse::json(
        200, chat_completion_body({{"role", "assistant"}, {"content", content}}, finish).dump());
}

/// A client's options with one OpenAI Chat Completions provider on `server` and a 10 ms first
/// retry backoff.
inline ClientOptions chat_completion_client_options(const TestServer& server) {
    ClientOptions options;
    options.retry.initial_backoff = std::chrono::milliseconds(10);
    options.providers = {std::make_shared<OpenAiChatProvider>(
        OpenAiChatOptions{.api_key = "sk-test-secret", .base_url = server.base_url() + "/v1"})};
    return options;
}

}  // namespace ullm::test
