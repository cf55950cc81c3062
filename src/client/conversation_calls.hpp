#pragma once

// Internal: the model calls of a conversation. Its tools were validated once, by the
// `ToolRegistry` made with the conversation, so its requests are checked as `Client` checks
// every request except for the tools' definitions, which are not validated again each round.

#include <ullm/client/chat_stream.hpp>
#include <ullm/client/client.hpp>

#include <cstdint>
#include <stop_token>

namespace ullm::detail {

class ThreadPool;

// `lane` is the conversation's lane in its provider's queue (`ProviderLimits`).
struct ConversationCalls {
    [[nodiscard]] static ChatResponse complete(const Client& client, ChatRequest request,
                                               std::stop_token stop, std::uint64_t lane);
    [[nodiscard]] static ChatStream stream(const Client& client, ChatRequest request,
                                           std::stop_token stop, std::uint64_t lane);
    /// The pool the conversation's tool callbacks run on.
    [[nodiscard]] static ThreadPool& tool_pool(const Client& client);
};

}  // namespace ullm::detail
