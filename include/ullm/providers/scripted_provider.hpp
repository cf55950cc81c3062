#pragma once

/// An offline provider that plays queued answers: for users' own tests, the demo and the
/// command line's `--offline` mode.

#include <ullm/providers/provider.hpp>

#include <chrono>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

namespace ullm {

/// One queued answer: a whole response (served to `complete`, or split into events for
/// `stream`), an explicit list of stream events, or an error to throw.
struct ScriptedTurn {
    std::variant<ChatResponse, std::vector<StreamEvent>, std::exception_ptr> answer;
};

/// Plays queued answers in order, one per request, and records every request it receives.
/// Streams yield text in word-sized deltas, `chunk_delay` apart. An exhausted queue throws
/// `Error` `mock_queue_exhausted`. Thread-safe.
class ScriptedProvider final : public Provider {
public:
    /// A provider called `name` whose streams wait `chunk_delay` between events.
    explicit ScriptedProvider(std::string name = "scripted",
                              std::chrono::milliseconds chunk_delay = {});

    /// Queues a whole response.
    void push(ChatResponse response);
    /// Queues a text answer with the given usage.
    void push_text(const std::string& text, Usage usage = {});
    /// Queues an answer that calls one tool (`id` generated when empty), after optional text.
    void push_tool_call(std::string name, json arguments, const std::string& text = {},
                        std::string id = {}, Usage usage = {});
    /// Queues explicit stream events (a `done` is added when missing).
    void push_events(std::vector<StreamEvent> events);
    /// Queues an error: the request that takes it throws `error`.
    void push_error(std::exception_ptr error);

    /// Copies of every request received, in order.
    [[nodiscard]] std::vector<ChatRequest> requests() const;
    /// How many queued answers are left.
    [[nodiscard]] std::size_t remaining() const;

    [[nodiscard]] std::string_view name() const noexcept override { return name_; }
    [[nodiscard]] ProviderCapabilities capabilities(std::string_view model) const override;
    /// Scripted providers do not speak HTTP: encode, decode and stream_decoder throw
    /// `ProviderCapabilityError` (`offline_provider`).
    [[nodiscard]] HttpRequest encode(const ChatRequest& request, bool stream) const override;
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;

    [[nodiscard]] bool offline() const noexcept override { return true; }
    [[nodiscard]] ChatResponse respond(const ChatRequest& request,
                                       std::stop_token stop) const override;
    [[nodiscard]] std::unique_ptr<EventSource> respond_stream(const ChatRequest& request,
                                                              std::stop_token stop) const override;

    /// The events a stream of `response` yields: word-sized text deltas, reasoning, tool
    /// call start/delta/end, a usage update and `done`.
    [[nodiscard]] static std::vector<StreamEvent> events_of(const ChatResponse& response);

private:
    ScriptedTurn take(const ChatRequest& request) const;

    std::string name_;
    std::chrono::milliseconds chunk_delay_;
    mutable std::mutex mutex_;
    mutable std::deque<ScriptedTurn> queue_;
    mutable std::vector<ChatRequest> requests_;
    mutable std::size_t next_call_id_ = 1;
};

}  // namespace ullm
