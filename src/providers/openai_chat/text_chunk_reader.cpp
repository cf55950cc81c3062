#include "openai_chat_internal.hpp"

#include "../json_readers.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ullm::detail::openai_chat {

namespace {

// Accepts only the shape of a plain text delta (see read_text_chunk); refuses anything else.
class TextChunkHandler : public RefusingSaxReader {
public:
    explicit TextChunkHandler(TextChunk& out) : out_(out) {}

    bool null() {
        switch (key_) {
            case Key::system_fingerprint:
            case Key::service_tier:
            case Key::usage:
            case Key::content:
            case Key::refusal:
            case Key::logprobs:
            case Key::finish_reason:
                return true;
            default:
                return false;
        }
    }

    bool number_integer(number_integer_t /*value*/) { return key_ == Key::created; }

    bool number_unsigned(number_unsigned_t value) {
        return key_ == Key::created || (key_ == Key::index && value == 0);
    }

    bool number_float(number_float_t /*value*/, const string_t& /*text*/) {
        return key_ == Key::created;
    }

    bool string(string_t& value) {
        switch (key_) {
            case Key::id:
                out_.id = std::move(value);
                return true;
            case Key::model:
                out_.model = std::move(value);
                return true;
            case Key::content:
                out_.content = std::move(value);
                return true;
            case Key::object:
            case Key::system_fingerprint:
            case Key::service_tier:
            case Key::obfuscation:
            case Key::role:
                return true;
            default:
                return false;
        }
    }

    bool start_object(std::size_t /*size*/) {
        Level next;
        if (levels_.empty()) {
            next = Level::top;
        } else if (levels_.back() == Level::choices && !choice_seen_) {
            choice_seen_ = true;
            next = Level::choice;
        } else if (key_ == Key::delta) {
            next = Level::delta;
        } else {
            return false;
        }
        levels_.push_back(next);
        seen_.push_back(0);
        key_ = Key::none;
        return true;
    }

    bool end_object() {
        levels_.pop_back();
        seen_.pop_back();
        key_ = Key::none;
        return true;
    }

    bool start_array(std::size_t /*size*/) {
        if (key_ != Key::choices) return false;
        levels_.push_back(Level::choices);
        seen_.push_back(0);
        key_ = Key::none;
        return true;
    }

    bool end_array() { return end_object(); }

    bool key(string_t& name) {
        key_ = key_of(levels_.back(), name);
        if (key_ == Key::none) return false;
        // A repeated key: the DOM keeps the last value, which this reader would not follow.
        const auto bit = std::uint32_t{1} << static_cast<unsigned>(key_);
        if ((seen_.back() & bit) != 0) return false;
        seen_.back() |= bit;
        return true;
    }

private:
    enum class Level { top, choices, choice, delta };
    enum class Key : unsigned {
        none,
        id,
        object,
        created,
        model,
        system_fingerprint,
        service_tier,
        obfuscation,
        usage,
        choices,
        index,
        delta,
        logprobs,
        finish_reason,
        content,
        role,
        refusal,
    };

    static Key key_of(Level level, std::string_view name) {
        switch (level) {
            case Level::top:
                if (name == "id") return Key::id;
                if (name == "object") return Key::object;
                if (name == "created") return Key::created;
                if (name == "model") return Key::model;
                if (name == "system_fingerprint") return Key::system_fingerprint;
                if (name == "service_tier") return Key::service_tier;
                if (name == "obfuscation") return Key::obfuscation;
                if (name == "usage") return Key::usage;
                if (name == "choices") return Key::choices;
                return Key::none;
            case Level::choice:
                if (name == "index") return Key::index;
                if (name == "delta") return Key::delta;
                if (name == "logprobs") return Key::logprobs;
                if (name == "finish_reason") return Key::finish_reason;
                return Key::none;
            case Level::delta:
                if (name == "content") return Key::content;
                if (name == "role") return Key::role;
                if (name == "refusal") return Key::refusal;
                return Key::none;
            case Level::choices:
                return Key::none;
        }
        return Key::none;
    }

    TextChunk& out_;
    std::vector<Level> levels_;
    std::vector<std::uint32_t> seen_;  ///< The keys met in each open object.
    Key key_ = Key::none;
    bool choice_seen_ = false;
};

}  // namespace

bool read_text_chunk(std::string_view data, TextChunk& out) {
    out.id.clear();
    out.model.clear();
    out.content.clear();
    TextChunkHandler handler(out);
    return read_with(data, handler);
}

}  // namespace ullm::detail::openai_chat
