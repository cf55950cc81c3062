#pragma once

// Internal: the model calls of a conversation. Its tools were validated once, by the
// `ToolRegistry` made with the conversation, so its requests are checked as `Client` checks
// every request except for the tools' definitions, which are not validated again each round.

#include <ullm/client/chat_stream.hpp>
#include <ullm/client/client.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>

namespace ullm::detail {

class ThreadPool;
class WorkThread;

// `lane` is the conversation's lane in its provider's queue (`ProviderLimits`).
struct ConversationCalls {
    [[nodiscard]] static ChatResponse complete(const Client& client, ChatRequest request,
                                               std::stop_token stop, std::uint64_t lane);
    [[nodiscard]] static ChatStream stream(const Client& client, ChatRequest request,
                                           std::stop_token stop, std::uint64_t lane);
    /// As `Client::complete_async` and `Client::stream_async` (the lane in `options`).
    static void complete_async(const Client& client, ChatRequest request, AsyncOptions options,
                               std::function<void(Result<ChatResponse>)> on_done);
    static void stream_async(const Client& client, ChatRequest request, AsyncOptions options,
                             StreamCallbacks callbacks);
    /// The pool the conversation's tool callbacks run on.
    [[nodiscard]] static ThreadPool& tool_pool(const Client& client);
    /// The client's callback thread: where async turns run without an executor of their own,
    /// and where tool deadlines are timed. It shares the client's state.
    [[nodiscard]] static std::shared_ptr<WorkThread> callbacks(const Client& client);
};

}  // namespace ullm::detail
