#pragma once

/// A provider that plays queued answers in-process, with no network: for users' own tests, the
/// demo and the command line's `--offline` mode.

#include <ullm/http/retry_policy.hpp>
#include <ullm/providers/provider.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace ullm {

/// One queued answer: a whole response (served to `complete`, or split into events for
/// `stream`), an explicit list of stream events, or an error to throw.
struct ScriptedTurn {
    std::variant<ChatResponse, std::vector<StreamEvent>, std::exception_ptr> answer;
};

namespace detail {
class ScriptQueue;
class ScriptedTransport;
}  // namespace detail

/// Plays queued answers in order, one per request, and records the requests it receives.
/// Streams yield text in word-sized deltas, `chunk_delay` apart. An exhausted queue throws
/// `Error` `mock_queue_exhausted`. Thread-safe: its queue is the one thing that changes.
///
/// It is a codec like any provider: the client sends what it encodes through the provider's own
/// in-process transport (`transport()`), under the provider's limits, and decodes the answer;
/// each attempt takes the next queued answer when it is decoded.
class ScriptedProvider final : public Provider {
public:
    /// A provider called `name` whose streams wait `chunk_delay` between events. Its requests
    /// are retried as `retry` says: by default never, so that a queued error is what the
    /// request throws; with retries, a retried attempt takes the next queued answer, as a
    /// server would give one.
    explicit ScriptedProvider(std::string name = "scripted",
                              std::chrono::milliseconds chunk_delay = {},
                              RetryPolicy retry = RetryPolicy{.max_attempts = 1});
    ~ScriptedProvider() override;
    ScriptedProvider(const ScriptedProvider&) = delete;
    ScriptedProvider& operator=(const ScriptedProvider&) = delete;

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

    /// Decides an answer from the request: rules, a fake model.
    using Responder = std::function<ScriptedTurn(const ChatRequest& request)>;
    /// Answers the requests that find the queue empty with `responder` instead of
    /// `mock_queue_exhausted` (null goes back to that). It runs on the thread that decodes the
    /// answer, outside the provider's lock, so it may queue answers; what it throws is the
    /// request's error. Such requests are recorded too.
    void answer_with(Responder responder);

    /// Copies of the requests received and kept (every one, unless `keep_requests` said
    /// otherwise), oldest first.
    [[nodiscard]] std::vector<ChatRequest> requests() const;
    /// How many requests were received, kept or not.
    [[nodiscard]] std::size_t request_count() const;
    /// Keeps copies of only the `count` most recent requests from now on, dropping older ones
    /// at once; 0 keeps none. Each request holds the whole history sent, so a long-running
    /// user of the provider (a load test, the command line's offline mode) keeps few or none.
    void keep_requests(std::size_t count);
    /// How many queued answers are left.
    [[nodiscard]] std::size_t remaining() const;

    [[nodiscard]] std::string_view name() const noexcept override { return name_; }
    [[nodiscard]] ProviderCapabilities capabilities(std::string_view model) const override;
    /// A request to `scripted://NAME` for the provider's own transport.
    [[nodiscard]] HttpRequest encode(const ChatRequest& request, bool stream) const override;
    /// Takes the next queued answer for `request` (recording it): its response, with the
    /// request's model when it names none, or its error thrown. An answer the provider's
    /// transport did not give throws `ProviderError` `invalid_provider_response`.
    [[nodiscard]] ChatResponse decode(const HttpResponse& response,
                                      const ChatRequest& request) const override;
    /// Takes the next queued answer for `request` (recording it) and plays it as the
    /// transport's lines arrive; a queued error is thrown by the first bytes.
    [[nodiscard]] std::unique_ptr<StreamDecoder> stream_decoder(
        const ChatRequest& request) const override;
    /// The in-process transport that answers this provider's requests.
    [[nodiscard]] Transport* transport() const noexcept override;
    /// The policy given to the constructor.
    [[nodiscard]] const RetryPolicy* retry_policy() const noexcept override { return &retry_; }

    /// The events a stream of `response` yields: word-sized text deltas, reasoning, tool
    /// call start/delta/end, a usage update and `done`.
    [[nodiscard]] static std::vector<StreamEvent> events_of(const ChatResponse& response);

private:
    std::string name_;
    RetryPolicy retry_;
    std::unique_ptr<detail::ScriptQueue> queue_;
    std::unique_ptr<detail::ScriptedTransport> transport_;
};

}  // namespace ullm
