#pragma once

/// Incremental splitters for the two streaming bodies that are not Server-Sent Events:
/// newline-delimited JSON (Ollama's native `/api/chat`) and a top-level JSON array whose
/// elements arrive over time (Gemini `streamGenerateContent` without `alt=sse`).

#include <ullm/core/error.hpp>
#include <ullm/detail/stream_start.hpp>

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ullm {

/// The default bound on one NDJSON line or one JSON array element: 64 MiB.
inline constexpr std::size_t stream_default_max_element_bytes = std::size_t{64} << 20;

/// Splits a byte stream into newline-delimited JSON lines, whatever the chunking.
///
/// Lines end with LF or CRLF (the CR is dropped); lines made only of spaces, tabs and CRs are
/// skipped; a UTF-8 BOM at the very start is skipped. Each other line is yielded as it is: the
/// splitter does not parse JSON. A final line without a newline is not yielded by `feed`; see
/// `finish()`. Work is linear in the input: only the current unterminated line is buffered.
///
/// Owns its buffer; not thread-safe (one splitter per stream). Copyable and movable.
class NdjsonSplitter {
public:
    /// Creates a splitter that throws `ProviderError(ErrorCode::invalid_provider_response, status
    /// 502)` when one line grows beyond `max_line_bytes`.
    explicit NdjsonSplitter(std::size_t max_line_bytes = stream_default_max_element_bytes) noexcept
        : max_line_bytes_(max_line_bytes) {}

    /// Feeds the next bytes and calls `on_line(std::string_view)` for each non-blank line they
    /// complete, in order; the view is valid only during the call. Throws `ProviderError`
    /// (`invalid_provider_response`) when a line exceeds the bound, and whatever `on_line`
    /// throws; after an exception the splitter should be discarded.
    template <class OnLine>
    void feed(std::string_view chunk, OnLine&& on_line) {
        const auto content = start_.take(chunk);
        if (!content.held.empty()) feed_content(content.held, on_line);
        feed_content(content.rest, on_line);
    }

    /// Feeds the next bytes and returns the non-blank lines they complete. Throws as the
    /// callback form does.
    std::vector<std::string> feed(std::string_view chunk) {
        std::vector<std::string> lines;
        feed(chunk, [&lines](std::string_view line) { lines.emplace_back(line); });
        return lines;
    }

    /// Ends the stream and returns the final line if it was not followed by a newline and is
    /// not blank, then resets the splitter for a new stream. NDJSON allows the last value to
    /// lack its newline, so the caller should treat the returned text as one more value when it
    /// parses as complete JSON (an object cut short never does), and as a truncated stream
    /// otherwise. Throws only `std::bad_alloc`.
    [[nodiscard]] std::optional<std::string> finish() {
        std::string line = take_line();
        start_.reset();
        const std::string_view text = strip(line);
        if (text.empty()) return std::nullopt;
        return std::string(text);
    }

    /// Whether non-blank bytes have arrived after the last newline. Never throws.
    [[nodiscard]] bool has_partial_line() const noexcept {
        return !line_.empty() && !strip(line_).empty();
    }

private:
    /// Splits bytes that follow the stream's BOM (if any). Every line is held to the bound,
    /// whether it arrived whole or in pieces.
    template <class OnLine>
    void feed_content(std::string_view chunk, OnLine& on_line) {
        std::size_t start = 0;
        if (!line_.empty()) {
            const std::size_t end = find_lf(chunk, 0);
            if (end == std::string_view::npos) {
                append_partial(chunk);
                return;
            }
            append_partial(chunk.substr(0, end));
            const std::string line = take_line();
            start = end + 1;
            if (const std::string_view text = strip(line); !text.empty()) on_line(text);
        }
        while (start < chunk.size()) {
            const std::size_t end = find_lf(chunk, start);
            if (end == std::string_view::npos) {
                append_partial(chunk.substr(start));
                return;
            }
            const std::string_view line = chunk.substr(start, end - start);
            if (line.size() > max_line_bytes_) too_long();
            const std::string_view text = strip(line);
            start = end + 1;
            if (!text.empty()) on_line(text);
        }
    }

    static std::size_t find_lf(std::string_view text, std::size_t from) noexcept {
        if (from >= text.size()) return std::string_view::npos;
        const void* hit = std::memchr(text.data() + from, '\n', text.size() - from);
        return hit == nullptr
                   ? std::string_view::npos
                   : static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
    }

    /// The line without a trailing CR, or empty when the line is blank.
    static std::string_view strip(std::string_view line) noexcept {
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        for (const char c : line) {
            if (c != ' ' && c != '\t' && c != '\r') return line;
        }
        return {};
    }

    [[noreturn]] void too_long() const {
        throw ProviderError(ErrorCode::invalid_provider_response,
                            "NDJSON line longer than " + std::to_string(max_line_bytes_) + " bytes",
                            502, false);
    }

    void append_partial(std::string_view bytes) {
        if (bytes.size() > max_line_bytes_ - line_.size()) too_long();
        line_.append(bytes);
    }

    std::string take_line() noexcept {
        std::string line = std::move(line_);
        line_.clear();
        return line;
    }

    std::size_t max_line_bytes_;
    std::string line_;           // the current unterminated line
    detail::StreamStart start_;  // the BOM at the stream's start, never counted or yielded
};

/// Splits a streamed top-level JSON array, `[{...},\n{...}]`, into the text of its elements as
/// each one completes, whatever the chunking.
///
/// Tracks strings, escapes and bracket nesting so that commas and brackets inside strings do
/// not confuse it; whitespace between elements is skipped, whitespace inside an element is
/// kept; a UTF-8 BOM before the `[` is skipped. Elements are usually objects; strings and bare
/// scalars (numbers, `true`, `false`, `null`) are also yielded. The splitter checks the array's
/// structure (brackets, commas) but not the elements' JSON grammar: parse each element.
/// Work is linear in the input; only the current unfinished element is buffered.
///
/// Owns its buffers; not thread-safe (one splitter per stream). Copyable and movable.
class JsonArrayStreamSplitter {
public:
    /// Creates a splitter that throws `ProviderError(ErrorCode::invalid_provider_response, status
    /// 502)` when one element grows beyond `max_element_bytes`.
    explicit JsonArrayStreamSplitter(
        std::size_t max_element_bytes = stream_default_max_element_bytes) noexcept
        : max_element_bytes_(max_element_bytes) {}

    /// Feeds the next bytes and calls `on_element(std::string_view)` with the text of each
    /// top-level element they complete, in order; the view is valid only during the call.
    /// Throws `ProviderError` (`invalid_provider_response`, status 502) when the body is not a
    /// JSON array (no `[`, missing or doubled commas, mismatched brackets, bytes after the
    /// closing `]`) or an element exceeds the bound, and whatever `on_element` throws; after an
    /// exception the splitter should be discarded.
    template <class OnElement>
    void feed(std::string_view chunk, OnElement&& on_element) {
        std::size_t i = 0;
        std::size_t element_start = 0;  // where the current element's bytes in `chunk` begin
        while (i < chunk.size()) {
            if (in_element_) {
                // Only the bytes the bound still allows (and one more, the delimiter of a
                // scalar) are scanned, so that an element over the bound is refused the same
                // way, with the same error, whether it arrives whole or in pieces.
                const std::size_t room = max_element_bytes_ - element_.size();
                const std::size_t window =
                    room < chunk.size() - element_start ? element_start + room + 1 : chunk.size();
                const std::size_t end = scan_element(chunk.substr(0, window), i);
                if (end == std::string_view::npos) {
                    if (window < chunk.size()) too_long();
                    break;
                }
                if (end - element_start > room) too_long();
                i = end;
                in_element_ = false;
                state_ = State::after_element;
                const std::string_view part = chunk.substr(element_start, end - element_start);
                if (element_.empty()) {
                    on_element(part);
                } else {
                    append_element(part);
                    const std::string element = take_element();
                    on_element(std::string_view(element));
                }
                continue;
            }
            i = step_between_elements(chunk, i);
            element_start = i;
        }
        if (in_element_) append_element(chunk.substr(element_start));
    }

    /// Feeds the next bytes and returns the text of the elements they complete. Throws as the
    /// callback form does.
    std::vector<std::string> feed(std::string_view chunk) {
        std::vector<std::string> elements;
        feed(chunk, [&elements](std::string_view element) { elements.emplace_back(element); });
        return elements;
    }

    /// Ends the stream: returns whether the closing `]` was seen (a false result means the
    /// stream was truncated), then resets the splitter for a new stream. Never throws.
    [[nodiscard]] bool finish() noexcept {
        const bool complete = state_ == State::done;
        *this = JsonArrayStreamSplitter(max_element_bytes_);
        return complete;
    }

    /// Whether the closing `]` of the array has been seen. Never throws.
    [[nodiscard]] bool complete() const noexcept { return state_ == State::done; }

private:
    enum class State {
        before_array,          // expecting an optional BOM, whitespace, then '['
        first_element_or_end,  // after '[': an element or ']'
        element_required,      // after ',': an element
        after_element,         // ',' or ']'
        done,                  // after the closing ']': only whitespace
    };
    enum class Kind { container, string, scalar };

    static bool is_space(char c) noexcept {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
    }
    static bool is_scalar_char(char c) noexcept {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '-' || c == '+' || c == '.';
    }

    [[noreturn]] static void malformed(const std::string& what) {
        throw ProviderError(ErrorCode::invalid_provider_response,
                            "malformed streamed JSON array: " + what, 502, false);
    }

    /// Consumes one byte outside any element; when it starts an element, sets in_element_ and
    /// returns the element's first index (so the caller records it) without consuming it.
    std::size_t step_between_elements(std::string_view chunk, std::size_t i) {
        const char c = chunk[i];
        if (state_ == State::before_array && bom_seen_ < bom.size() && c == bom[bom_seen_] &&
            (bom_seen_ > 0 || !saw_space_)) {
            ++bom_seen_;
            return i + 1;
        }
        if (state_ == State::before_array && bom_seen_ > 0 && bom_seen_ < bom.size()) {
            malformed("truncated byte order mark");
        }
        if (is_space(c)) {
            saw_space_ = true;
            return i + 1;
        }
        switch (state_) {
            case State::before_array:
                if (c != '[') malformed("the body does not start with '['");
                state_ = State::first_element_or_end;
                return i + 1;
            case State::first_element_or_end:
                if (c == ']') {
                    state_ = State::done;
                    return i + 1;
                }
                begin_element(c);
                return i;
            case State::element_required:
                begin_element(c);
                return i;
            case State::after_element:
                if (c == ',') {
                    state_ = State::element_required;
                } else if (c == ']') {
                    state_ = State::done;
                } else {
                    malformed(std::string("expected ',' or ']' after an element, found '") + c +
                              "'");
                }
                return i + 1;
            case State::done:
                break;
        }
        malformed("data after the closing ']'");
    }

    void begin_element(char c) {
        if (c == '{' || c == '[') {
            kind_ = Kind::container;
        } else if (c == '"') {
            kind_ = Kind::string;
        } else if (is_scalar_char(c)) {
            kind_ = Kind::scalar;
        } else {
            malformed(std::string("expected an element, found '") + c + "'");
        }
        in_element_ = true;
        in_string_ = false;
        escaped_ = false;
        closers_.clear();
    }

    /// Scans element bytes from `i`; returns the index just past the element's end, or npos
    /// when the chunk ends first.
    std::size_t scan_element(std::string_view chunk, std::size_t i) {
        const char* p = chunk.data();
        const std::size_t n = chunk.size();
        if (kind_ == Kind::scalar) {
            for (; i < n; ++i) {
                const char c = p[i];
                if (is_scalar_char(c)) continue;
                if (is_space(c) || c == ',' || c == ']') return i;  // the delimiter is not ours
                malformed(std::string("unexpected '") + c + "' in a scalar element");
            }
            return std::string_view::npos;
        }
        constexpr std::size_t npos = std::string_view::npos;
        std::size_t next_quote = npos;  // while in a string: the next '"' at or after i, or n
        for (; i < n; ++i) {
            if (in_string_) {
                if (escaped_) {
                    escaped_ = false;
                    continue;
                }
                // Most bytes are string contents: jump to the next quote or backslash. The
                // quote found is remembered until passed, so many escapes stay linear.
                if (next_quote == npos || next_quote < i) {
                    const void* quote = std::memchr(p + i, '"', n - i);
                    next_quote = quote == nullptr ? n : offset_of(quote, p);
                }
                const void* backslash = std::memchr(p + i, '\\', next_quote - i);
                if (backslash != nullptr) {
                    i = offset_of(backslash, p);
                    escaped_ = true;
                    continue;
                }
                i = next_quote;
                if (i == n) return npos;
                in_string_ = false;
                if (closers_.empty()) return i + 1;  // a top-level string element
                continue;
            }
            const char c = p[i];
            switch (c) {
                case '"':
                    in_string_ = true;
                    break;
                case '{':
                    closers_.push_back('}');
                    break;
                case '[':
                    closers_.push_back(']');
                    break;
                case '}':
                case ']':
                    if (closers_.empty() || closers_.back() != c) {
                        malformed(std::string("mismatched '") + c + "'");
                    }
                    closers_.pop_back();
                    if (closers_.empty()) return i + 1;
                    break;
                default:
                    break;
            }
        }
        return std::string_view::npos;
    }

    static std::size_t offset_of(const void* hit, const char* base) noexcept {
        return static_cast<std::size_t>(static_cast<const char*>(hit) - base);
    }

    [[noreturn]] void too_long() const {
        throw ProviderError(ErrorCode::invalid_provider_response,
                            "streamed JSON array element longer than " +
                                std::to_string(max_element_bytes_) + " bytes",
                            502, false);
    }

    void append_element(std::string_view bytes) {
        if (bytes.size() > max_element_bytes_ - element_.size()) too_long();
        element_.append(bytes);
    }

    std::string take_element() noexcept {
        std::string element = std::move(element_);
        element_.clear();
        return element;
    }

    static constexpr std::string_view bom{"\xEF\xBB\xBF"};

    std::size_t max_element_bytes_;
    std::string element_;  // bytes of the current element from earlier chunks
    std::string closers_;  // the closing brackets the current element still needs
    State state_ = State::before_array;
    Kind kind_ = Kind::container;
    std::size_t bom_seen_ = 0;
    bool saw_space_ = false;
    bool in_element_ = false;
    bool in_string_ = false;
    bool escaped_ = false;
};

}  // namespace ullm
