#pragma once

/// Internal: drops a UTF-8 byte order mark at the very start of a stream, whatever the
/// chunking, so that the stream parsers see the same bytes however they arrive.

#include <cstddef>
#include <string_view>

namespace ullm::detail {

/// Watches the first bytes of a stream for a UTF-8 BOM (EF BB BF). Only the stream's first
/// three bytes can form it; a BOM anywhere later is content. Not thread-safe; copyable.
class StreamStart {
public:
    /// What follows the BOM in `chunk`: `held` is a part of a BOM that earlier chunks began
    /// and this one proved not to be one (a view of static storage, to be parsed before
    /// `rest`); `rest` is the rest of the chunk. Both are content.
    struct Content {
        std::string_view held;
        std::string_view rest;
    };

    /// Consumes the BOM's bytes from the front of `chunk` while the stream's start is still
    /// undecided; returns the content to parse.
    Content take(std::string_view chunk) noexcept {
        if (decided_) return {{}, chunk};
        while (matched_ < bom.size() && !chunk.empty() && chunk.front() == bom[matched_]) {
            ++matched_;
            chunk.remove_prefix(1);
        }
        if (matched_ == bom.size()) {
            decided_ = true;
            return {{}, chunk};
        }
        if (chunk.empty()) return {};  // still undecided: all bytes so far match the BOM
        decided_ = true;
        return {bom.substr(0, matched_), chunk};
    }

    /// The bytes held back because they may begin a BOM (the stream ended after them): they
    /// are content. Empty once the start is decided.
    [[nodiscard]] std::string_view pending() const noexcept {
        return decided_ ? std::string_view() : bom.substr(0, matched_);
    }

    /// Starts watching a new stream.
    void reset() noexcept {
        matched_ = 0;
        decided_ = false;
    }

private:
    static constexpr std::string_view bom{"\xEF\xBB\xBF"};
    std::size_t matched_ = 0;
    bool decided_ = false;
};

}  // namespace ullm::detail
