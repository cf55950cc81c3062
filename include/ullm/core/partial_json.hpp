#pragma once

/// `PartialJsonParser`: the value of JSON text that is still arriving, for structured output
/// that streams (`Client::stream_object`). Text is fed in pieces split anywhere; after each piece
/// `value()` is the value as far as the text goes, with open strings, arrays and objects taken
/// as closed, and a number, `true` / `false` / `null` or object key that has not ended left
/// out. The value is built in place, so feeding and reading cost time linear in the text however
/// it is split; the same text gives the same value at its end however it was split, and for
/// complete, valid JSON that value equals `json::parse` of the text.

#include <ullm/core/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// Parses JSON text incrementally and tolerantly (see the top of this header). Before the value
/// it skips whitespace and a Markdown code fence line (```` ```json ````); after it, whitespace
/// and a closing fence. The first syntax error stops it: `failed()` is then true and `error()`
/// says what and where, and the value stays as it was. A value type; not thread-safe.
class PartialJsonParser {
public:
    /// A parser that accepts nesting (arrays and objects inside each other) up to `max_depth`.
    explicit PartialJsonParser(std::size_t max_depth = 64);

    PartialJsonParser(const PartialJsonParser&) = delete;
    PartialJsonParser& operator=(const PartialJsonParser&) = delete;
    PartialJsonParser(PartialJsonParser&&) noexcept = default;
    PartialJsonParser& operator=(PartialJsonParser&&) noexcept = default;
    ~PartialJsonParser() = default;

    /// Feeds the next piece of text. Returns whether `value()` changed. Does nothing once the
    /// parser failed. Throws only `bad_alloc`.
    bool feed(std::string_view text);

    /// Ends the text: a number at the top level is complete now. Returns whether the text held
    /// exactly one complete JSON value (with the fences and whitespace allowed around it); when
    /// it did not and no syntax error came first, `error()` says the text ended early.
    bool finish();

    /// The value so far: null before any of it arrived. Stays valid (and is updated in place)
    /// until the parser is moved or destroyed. Does not throw.
    [[nodiscard]] const json& value() const noexcept { return root_; }

    /// Incremented whenever `value()` changes, so that a reader can tell a new state cheaply.
    [[nodiscard]] std::uint64_t revision() const noexcept { return revision_; }

    /// Whether the top-level value has ended (its closing bracket, brace or quote arrived).
    [[nodiscard]] bool complete() const noexcept { return complete_; }

    /// Whether the text broke the JSON grammar (or the depth limit).
    [[nodiscard]] bool failed() const noexcept { return !error_.empty(); }

    /// What went wrong and at which byte offset; empty while nothing did.
    [[nodiscard]] const std::string& error() const noexcept { return error_; }

    /// Bytes fed so far.
    [[nodiscard]] std::size_t bytes() const noexcept { return offset_; }

private:
    enum class Expect : std::uint8_t {
        value,         // a value (top level, array element, object member value)
        value_or_end,  // just after `[`
        key_or_end,    // just after `{`
        key,           // after `,` in an object
        colon,         // after a key
        comma_or_end,  // after a value inside a container
        done,          // after the top-level value
    };
    enum class Scalar : std::uint8_t { none, string, key, number, literal };
    struct Frame {
        json* container;
        bool object;
    };

    void step(char c);
    void begin_value(char c);
    void end_value();
    json* place(json value);
    void string_char(char c);
    void append_bytes(std::string_view bytes);
    void append_code_point(std::uint32_t code_point);
    void end_number();
    void fail(std::string_view reason);

    json root_;
    std::vector<Frame> stack_;
    std::size_t max_depth_;
    Expect expect_ = Expect::value;
    Scalar scalar_ = Scalar::none;
    json* leaf_ = nullptr;           // the string being filled, once it is in the tree
    std::string key_;                // the member name being read, or the last one read
    std::string token_;              // a number or literal being read
    std::string pending_;            // bytes of a UTF-8 sequence not yet complete
    std::uint8_t pending_need_ = 0;  // continuation bytes still missing from `pending_`
    std::uint8_t escape_ = 0;        // 0 none, 1 after `\`, 2..5 reading \u hex digits
    std::uint32_t unicode_ = 0;      // the \u escape being read
    std::uint32_t high_surrogate_ = 0;
    bool fence_ = false;        // inside the opening fence line
    bool fence_close_ = false;  // reading the closing fence
    bool complete_ = false;
    bool changed_ = false;
    std::uint64_t revision_ = 0;
    std::size_t offset_ = 0;
    std::string error_;
};

}  // namespace ullm
