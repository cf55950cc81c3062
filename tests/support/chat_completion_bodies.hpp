#pragma once

// Chat Completions answers for tests that script the in-process server: one choice, 10 input
// and 5 output tokens.

#include <ullm/core/json.hpp>

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

}  // namespace ullm::test
