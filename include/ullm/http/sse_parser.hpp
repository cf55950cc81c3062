#pragma once

/// An incremental Server-Sent Events parser that follows the WHATWG HTML "event stream
/// interpretation" rules, for the streaming endpoints of OpenAI, Anthropic and Gemini.

#include <ullm/core/error.hpp>
#include <ullm/detail/stream_start.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm {

/// One dispatched Server-Sent Event.
struct SseEvent {
    /// The event type: the value of the last `event:` field of the block, or "message".
    std::string event;
    /// The `data:` field values of the block joined with "\n".
    std::string data;
    /// The last event id in effect when the event was dispatched (ids persist across events).
    std::string id;
    /// The value of a valid `retry:` field that appeared in this event's block, if any.
    std::optional<std::int64_t> retry_ms;

    /// Member-wise equality.
    friend bool operator==(const SseEvent&, const SseEvent&) = default;
};

/// What was left undispatched when a stream ended; see `SseParser::finish()`.
struct SseStreamEnd {
    /// Bytes arrived after the last line terminator (an unterminated line; never processed).
    bool partial_line = false;
    /// Fields arrived after the last blank line and were never dispatched.
    bool partial_event = false;

    /// Whether the stream ended exactly at an event boundary.
    [[nodiscard]] bool clean() const noexcept { return !partial_line && !partial_event; }

    /// Member-wise equality.
    friend bool operator==(const SseStreamEnd&, const SseStreamEnd&) = default;
};

/// The default bound on one event's size (its data plus any single line): 64 MiB.
inline constexpr std::size_t sse_default_max_event_bytes = std::size_t{64} << 20;

/// Splits a byte stream into Server-Sent Events, whatever the chunking.
///
/// Rules (WHATWG HTML, "Interpreting an event stream"): lines end with CR, LF or CRLF (a CRLF
/// split across two chunks counts once); a UTF-8 BOM at the very start is skipped; a line that
/// starts with `:` is a comment; `field:value` drops one space after the colon; a line without a
/// colon is a field with an empty value; `data` lines are joined with "\n"; `event` sets the
/// type (default "message"); `id` sets the last event id unless it contains NUL, and the id
/// persists across events; `retry` sets the reconnection time when it is only ASCII digits;
/// unknown fields are ignored; a blank line dispatches the event unless no `data` field was
/// seen. Bytes are passed through unchanged (no UTF-8 validation or replacement).
///
/// Work is linear in the input whatever the chunking: only the current unterminated line is
/// buffered, and each byte is examined a bounded number of times.
///
/// Owns its buffers; not thread-safe (one parser per stream, used by one thread at a time).
/// Copyable and movable.
class SseParser {
public:
    /// Creates a parser that throws `ProviderError(ErrorCode::invalid_provider_response, status
    /// 502)` when one event's data, or any single line, grows beyond `max_event_bytes`.
    explicit SseParser(std::size_t max_event_bytes = sse_default_max_event_bytes) noexcept
        : max_event_bytes_(max_event_bytes) {}

    /// Feeds the next bytes of the stream and calls `on_event(SseEvent&&)` for each event
    /// completed by them, in order. Throws `ProviderError` (`invalid_provider_response`) when
    /// the size bound is exceeded, and whatever `on_event` throws; after an exception the rest
    /// of the chunk is dropped and the parser should be discarded.
    template <class OnEvent>
    void feed(std::string_view chunk, OnEvent&& on_event) {
        if (!line_.empty() && chunk.size() <= short_chunk && !has_line_end(chunk)) {
            // A few more bytes of a long line (a stream arriving a byte or two per read),
            // taken before any set-up of the general path: the memchr set-up of its finder
            // would cost more than the bytes, and a call into libstdc++ for `append` more than
            // `push_back`, which inlines. (A held line means the stream's start is decided
            // and no CR awaits its LF.)
            if (chunk.size() > max_event_bytes_ - line_.size()) too_large();
            for (const char c : chunk) line_.push_back(c);
            return;
        }
        const auto content = start_.take(chunk);
        if (!content.held.empty()) feed_content(content.held, on_event);
        feed_content(content.rest, on_event);
    }

    /// Feeds the next bytes of the stream and returns the events they completed. Throws as the
    /// callback form does.
    std::vector<SseEvent> feed(std::string_view chunk) {
        std::vector<SseEvent> events;
        feed(chunk, [&events](SseEvent&& event) { events.push_back(std::move(event)); });
        return events;
    }

    /// Ends the current stream: reports what was left undispatched, then discards it (the spec
    /// discards an incomplete event at end of file; callers typically raise
    /// `StreamTruncatedError` when the result is not `clean()` or no terminal event arrived).
    /// The last event id and reconnection time are kept, so the parser can then be fed a
    /// reconnected stream, which may start with its own BOM; the new stream's events keep the
    /// previous id until it sends a new one. Throws only `std::bad_alloc`.
    [[nodiscard]] SseStreamEnd finish() {
        const SseStreamEnd end{has_partial_line(), has_partial_event()};
        line_.clear();
        data_.clear();
        event_type_.clear();
        id_buffer_ = last_event_id_;
        block_retry_.reset();
        has_data_ = false;
        block_has_fields_ = false;
        skip_lf_ = false;
        start_.reset();
        return end;
    }

    /// Whether bytes have arrived after the last line terminator. Never throws.
    /// A stream that so far holds only (part of) a BOM has no line yet.
    [[nodiscard]] bool has_partial_line() const noexcept { return !line_.empty(); }

    /// Whether fields have arrived since the last blank line without being dispatched.
    /// Comment lines do not count. Never throws.
    [[nodiscard]] bool has_partial_event() const noexcept { return block_has_fields_; }

    /// The id the last dispatch left in effect (the value a reconnection sends as
    /// `Last-Event-ID`); empty when none. Never throws.
    [[nodiscard]] const std::string& last_event_id() const noexcept { return last_event_id_; }

    /// The reconnection time the server last asked for with `retry:`, in milliseconds; empty
    /// when it never did. Never throws.
    [[nodiscard]] std::optional<std::int64_t> reconnection_time_ms() const noexcept {
        return reconnection_time_ms_;
    }

private:
    /// Parses bytes that follow the stream's BOM (if any).
    template <class OnEvent>
    void feed_content(std::string_view chunk, OnEvent& on_event) {
        if (chunk.empty()) return;
        if (skip_lf_) {
            // The previous chunk ended with CR; an LF now completes that CRLF.
            skip_lf_ = false;
            if (chunk.front() == '\n') chunk.remove_prefix(1);
        }
        LineEndFinder finder(chunk);
        std::size_t start = 0;
        if (!line_.empty()) {
            const std::size_t end = finder.next(0);
            if (end == std::string_view::npos) {
                append_partial(chunk);
                return;
            }
            append_partial(chunk.substr(0, end));
            const bool ready = process_line(line_, &line_);
            release(line_);
            start = consume_terminator(chunk, end);
            if (ready) on_event(std::move(ready_));
        }
        while (start < chunk.size()) {
            const std::size_t end = finder.next(start);
            if (end == std::string_view::npos) {
                append_partial(chunk.substr(start));
                return;
            }
            const bool ready = process_line(chunk.substr(start, end - start));
            start = consume_terminator(chunk, end);
            if (ready) on_event(std::move(ready_));
        }
    }

    static constexpr std::size_t short_chunk = 16;
    /// A buffered line longer than this that starts an event's data is taken over, not copied.
    static constexpr std::size_t long_line = std::size_t{64} << 10;

    static bool has_line_end(std::string_view chunk) noexcept {
        for (const char c : chunk) {
            if (c == '\n' || c == '\r') return true;
        }
        return false;
    }

    /// Finds line terminators (CR or LF) in one chunk; amortised linear over increasing
    /// positions because each cached hit is only recomputed once passed.
    class LineEndFinder {
    public:
        explicit LineEndFinder(std::string_view text) noexcept
            : text_(text), next_lf_(find(text, '\n', 0)), next_cr_(find(text, '\r', 0)) {}

        /// The first CR or LF at or after `from`, or npos.
        std::size_t next(std::size_t from) noexcept {
            if (next_lf_ < from) next_lf_ = find(text_, '\n', from);
            if (next_cr_ < from) next_cr_ = find(text_, '\r', from);
            return next_lf_ < next_cr_ ? next_lf_ : next_cr_;
        }

    private:
        static std::size_t find(std::string_view text, char c, std::size_t from) noexcept {
            if (from >= text.size()) return std::string_view::npos;
            const void* hit = std::memchr(text.data() + from, c, text.size() - from);
            return hit == nullptr
                       ? std::string_view::npos
                       : static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
        }

        std::string_view text_;
        std::size_t next_lf_;
        std::size_t next_cr_;
    };

    [[noreturn]] void too_large() const {
        throw ProviderError(
            ErrorCode::invalid_provider_response,
            "server-sent event larger than " + std::to_string(max_event_bytes_) + " bytes", 502,
            false);
    }

    void append_partial(std::string_view bytes) {
        if (bytes.size() > max_event_bytes_ - line_.size()) too_large();
        line_.append(bytes);
    }

    // Empties a buffer, keeping a modest one for reuse but returning the memory of an unusually
    // long line or event.
    static void release(std::string& buffer) noexcept {
        if (buffer.capacity() > (std::size_t{64} << 10)) {
            std::string().swap(buffer);
        } else {
            buffer.clear();
        }
    }

    /// Returns the index just past the terminator at `end` (CR, LF or CRLF).
    std::size_t consume_terminator(std::string_view chunk, std::size_t end) noexcept {
        if (chunk[end] == '\r') {
            if (end + 1 == chunk.size()) {
                skip_lf_ = true;
                return end + 1;
            }
            if (chunk[end + 1] == '\n') return end + 2;
        }
        return end + 1;
    }

    /// Interprets one complete line; returns true when it completed an event (then in ready_).
    /// `held` is the buffer `line` lies in, when the parser may take it over.
    bool process_line(std::string_view line, std::string* held = nullptr) {
        if (line.size() > max_event_bytes_) too_large();
        if (line.empty()) return dispatch();
        if (line.front() == ':') return false;

        std::string_view field = line;
        std::string_view value;
        if (const std::size_t colon = line.find(':'); colon != std::string_view::npos) {
            field = line.substr(0, colon);
            value = line.substr(colon + 1);
            if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        }
        block_has_fields_ = true;

        if (field == "data") {
            const std::size_t added = value.size() + (has_data_ ? 1 : 0);
            if (added > max_event_bytes_ - data_.size()) too_large();
            if (held != nullptr && !has_data_ && held->size() > long_line) {
                // A long line that starts an event's data becomes that data where it lies,
                // instead of being copied once more.
                const auto skip = static_cast<std::size_t>(value.data() - held->data());
                data_.swap(*held);
                data_.erase(0, skip);
            } else {
                if (has_data_) data_.push_back('\n');
                data_.append(value);
            }
            has_data_ = true;
        } else if (field == "event") {
            event_type_.assign(value);
        } else if (field == "id") {
            if (value.find('\0') == std::string_view::npos) id_buffer_.assign(value);
        } else if (field == "retry") {
            if (const auto ms = parse_digits(value)) {
                reconnection_time_ms_ = ms;
                block_retry_ = ms;
            }
        }
        return false;
    }

    /// Parses a non-empty string of ASCII digits; empty on any other character or overflow.
    static std::optional<std::int64_t> parse_digits(std::string_view text) noexcept {
        if (text.empty()) return std::nullopt;
        constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
        std::int64_t value = 0;
        for (const char c : text) {
            if (c < '0' || c > '9') return std::nullopt;
            const int digit = c - '0';
            if (value > (max - digit) / 10) return std::nullopt;
            value = value * 10 + digit;
        }
        return value;
    }

    bool dispatch() {
        last_event_id_ = id_buffer_;
        block_has_fields_ = false;
        if (!has_data_) {
            event_type_.clear();
            block_retry_.reset();
            return false;
        }
        // Swapped rather than moved, so that a callback that only reads the event leaves every
        // buffer's storage in place for the next one: no allocation per event.
        if (event_type_.empty()) {
            ready_.event.assign("message");
        } else {
            ready_.event.swap(event_type_);
        }
        ready_.data.swap(data_);
        ready_.id.assign(last_event_id_);
        ready_.retry_ms = block_retry_;
        event_type_.clear();
        release(data_);  // the buffer of the event before
        has_data_ = false;
        block_retry_.reset();
        return true;
    }

    std::size_t max_event_bytes_;
    std::string line_;        // the current unterminated line (never holds a terminator)
    std::string data_;        // data buffer, without the spec's trailing LF
    std::string event_type_;  // event type buffer
    std::string id_buffer_;   // last event ID buffer (persists across events)
    std::string last_event_id_;
    std::optional<std::int64_t> reconnection_time_ms_;
    std::optional<std::int64_t> block_retry_;
    SseEvent ready_;         // the event being handed out: callbacks receive it, and may move it
    bool has_data_ = false;  // a data field was seen since the last dispatch
    bool block_has_fields_ = false;  // a field line was seen since the last blank line
    bool skip_lf_ = false;           // the last chunk ended with CR
    detail::StreamStart start_;      // the BOM at the stream's start, never counted or parsed
};

}  // namespace ullm
