#pragma once

/// A streamed model response, pulled event by event.

#include <ullm/detail/pull_iterator.hpp>
#include <ullm/providers/chat.hpp>

#include <memory>
#include <optional>

namespace ullm {

namespace detail {
class ChatStreamState;
}

/// The events of one streamed response, pulled by the consumer (`next()` or a range-for).
/// Nothing is sent before the first pull. Retries happen only before the first visible event
/// and are announced with a `retry` event, except that the stream of a response running in the
/// background (OpenAI Responses `background: true`) that loses its connection is resumed where
/// it broke off, announced with a `retry` event whose `resumed` is true, without repeating or
/// losing an event. Exactly one `done` event ends a successful stream.
/// Owned by one consumer thread; `cancel()` may be called from any thread. Destroying the
/// stream before it ends cancels it.
class ChatStream {
public:
    /// An input iterator over the events; reaching the end means the stream completed.
    using iterator = detail::PullIterator<ChatStream>;

    explicit ChatStream(std::unique_ptr<detail::ChatStreamState> state);
    ChatStream(ChatStream&&) noexcept;
    ChatStream& operator=(ChatStream&&) noexcept;
    ~ChatStream();

    /// Waits for the next event; nullopt once the stream has ended. Throws the mapped `Error`
    /// when the stream fails (after retries), `CancelledError` after `cancel()`.
    std::optional<StreamEvent> next();

    /// Aborts the transfer; a waiting or later `next()` throws `CancelledError`. Thread-safe.
    void cancel() noexcept;

    /// The final response, once the `done` event has been pulled.
    [[nodiscard]] const std::optional<ChatResponse>& response() const noexcept;

    /// Where `Client::resume_stream` would go on after the events pulled so far: set for the
    /// stream of a response running in the background once the response has told its id, until
    /// `done`; nullopt for any other stream.
    [[nodiscard]] std::optional<StreamPosition> resume_position() const;

    iterator begin() { return iterator(this); }
    std::default_sentinel_t end() { return {}; }

private:
    std::unique_ptr<detail::ChatStreamState> state_;
};

}  // namespace ullm
