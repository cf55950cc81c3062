#include "anthropic_internal.hpp"

#include "../json_readers.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace ullm::detail::anthropic {

namespace {

// Accepts only {"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":
// "…"}} (keys in any order, none twice); refuses anything else.
class TextDeltaHandler : public RefusingSaxReader {
public:
    explicit TextDeltaHandler(TextDelta& out) : out_(out) {}

    bool number_unsigned(number_unsigned_t value) {
        if (key_ != Key::index ||
            value > static_cast<number_unsigned_t>(std::numeric_limits<std::int64_t>::max())) {
            return false;
        }
        out_.index = static_cast<std::int64_t>(value);
        return take(Key::index);
    }

    bool string(string_t& value) {
        if (key_ == Key::type) {
            return value == (depth_ == 1 ? "content_block_delta" : "text_delta") &&
                   take(depth_ == 1 ? Key::type : Key::delta_type);
        }
        if (key_ != Key::text) return false;
        out_.text = std::move(value);
        return take(Key::text);
    }

    bool start_object(std::size_t /*size*/) {
        if (depth_ == 0 || (depth_ == 1 && key_ == Key::delta)) {
            ++depth_;
            key_ = Key::none;
            return true;
        }
        return false;
    }

    bool end_object() {
        // Every field must have come: the delta's type and text, the event's type and index.
        const std::uint32_t need = depth_ == 2 ? bit(Key::delta_type) | bit(Key::text)
                                               : bit(Key::type) | bit(Key::index) | bit(Key::delta);
        if ((seen_ & need) != need) return false;
        if (depth_ == 2) seen_ |= bit(Key::delta);
        --depth_;
        key_ = Key::none;
        return true;
    }

    bool key(string_t& name) {
        if (depth_ == 1) {
            key_ = name == "type"    ? Key::type
                   : name == "index" ? Key::index
                   : name == "delta" ? Key::delta
                                     : Key::none;
        } else {
            key_ = name == "type" ? Key::type : name == "text" ? Key::text : Key::none;
        }
        // A repeated key: the DOM keeps the last value, which this reader would not follow.
        const Key field = depth_ == 2 && key_ == Key::type ? Key::delta_type : key_;
        return key_ != Key::none && (seen_ & bit(field)) == 0;
    }

private:
    enum class Key : unsigned { none, type, index, delta, delta_type, text };

    static std::uint32_t bit(Key key) { return std::uint32_t{1} << static_cast<unsigned>(key); }

    bool take(Key field) {
        seen_ |= bit(field);
        return true;
    }

    TextDelta& out_;
    int depth_ = 0;
    Key key_ = Key::none;
    std::uint32_t seen_ = 0;  ///< The fields met so far.
};

}  // namespace

bool read_text_delta(std::string_view data, TextDelta& out) {
    out.index = -1;
    out.text.clear();
    TextDeltaHandler handler(out);
    return read_with(data, handler);
}

}  // namespace ullm::detail::anthropic
