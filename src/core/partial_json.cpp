#include <ullm/core/partial_json.hpp>

#include "text.hpp"

#include <string>
#include <utility>

namespace ullm {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_number_char(char c) {
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// A byte that can go into a string as it is, with nothing to look at: printable ASCII other
// than the quote and the backslash.
bool plain_byte(char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte >= 0x20 && byte < 0x80 && c != '"' && c != '\\';
}

bool literal_prefix(std::string_view token) {
    for (const std::string_view literal : {"true", "false", "null"}) {
        if (literal.substr(0, token.size()) == token) return true;
    }
    return false;
}

}  // namespace

PartialJsonParser::PartialJsonParser(std::size_t max_depth) : max_depth_(max_depth) {}

bool PartialJsonParser::feed(std::string_view text) {
    changed_ = false;
    for (std::size_t i = 0; i < text.size() && error_.empty(); ++i) {
        // Runs of plain string bytes go in at once.
        if ((scalar_ == Scalar::string || scalar_ == Scalar::key) && escape_ == 0 &&
            pending_need_ == 0 && high_surrogate_ == 0 && plain_byte(text[i])) {
            std::size_t end = i + 1;
            while (end < text.size() && plain_byte(text[end])) ++end;
            append_bytes(text.substr(i, end - i));
            offset_ += end - i;
            i = end - 1;
            continue;
        }
        step(text[i]);
        ++offset_;
    }
    if (changed_) ++revision_;
    return changed_;
}

bool PartialJsonParser::finish() {
    if (!error_.empty()) return false;
    if (scalar_ == Scalar::number && stack_.empty()) end_number();
    if (!error_.empty()) return false;
    if (!complete_) {
        fail("the text ended before the JSON value did");
        return false;
    }
    return true;
}

void PartialJsonParser::fail(std::string_view reason) {
    error_ = std::string(reason) + " at byte " + std::to_string(offset_);
}

void PartialJsonParser::step(char c) {
    if (fence_) {
        if (c == '\n') fence_ = false;
        return;
    }
    switch (scalar_) {
        case Scalar::string:
        case Scalar::key:
            string_char(c);
            return;
        case Scalar::number:
            if (is_number_char(c)) {
                token_ += c;
                return;
            }
            end_number();
            if (!error_.empty()) return;
            break;
        case Scalar::literal:
            if (c >= 'a' && c <= 'z') {
                token_ += c;
                if (!literal_prefix(token_)) fail("invalid literal");
                return;
            }
            if (token_ != "true" && token_ != "false" && token_ != "null") {
                fail("invalid literal");
                return;
            }
            scalar_ = Scalar::none;
            (void)place(token_ == "null" ? json(nullptr) : json(token_ == "true"));
            token_.clear();
            end_value();
            break;
        case Scalar::none:
            break;
    }
    if (is_space(c)) return;
    switch (expect_) {
        case Expect::done:
            if (c == '`') {
                fence_close_ = true;
                return;
            }
            fail(fence_close_ ? "text after the closing fence" : "text after the JSON value");
            return;
        case Expect::value:
            if (c == '`' && stack_.empty()) {
                fence_ = true;
                return;
            }
            begin_value(c);
            return;
        case Expect::value_or_end:
            if (c == ']') {
                stack_.pop_back();
                end_value();
                return;
            }
            begin_value(c);
            return;
        case Expect::key_or_end:
            if (c == '}') {
                stack_.pop_back();
                end_value();
                return;
            }
            [[fallthrough]];
        case Expect::key:
            if (c != '"') {
                fail("expected an object key");
                return;
            }
            scalar_ = Scalar::key;
            key_.clear();
            return;
        case Expect::colon:
            if (c != ':') {
                fail("expected ':' after an object key");
                return;
            }
            expect_ = Expect::value;
            return;
        case Expect::comma_or_end: {
            const bool object = stack_.back().object;
            if (c == ',') {
                expect_ = object ? Expect::key : Expect::value;
            } else if (c == (object ? '}' : ']')) {
                stack_.pop_back();
                end_value();
            } else {
                fail(object ? "expected ',' or '}'" : "expected ',' or ']'");
            }
            return;
        }
    }
}

void PartialJsonParser::begin_value(char c) {
    if (c == '{' || c == '[') {
        if (stack_.size() >= max_depth_) {
            fail("nesting deeper than " + std::to_string(max_depth_) + " levels");
            return;
        }
        const bool object = c == '{';
        json* container = place(object ? json::object() : json::array());
        stack_.push_back({container, object});
        expect_ = object ? Expect::key_or_end : Expect::value_or_end;
    } else if (c == '"') {
        leaf_ = place(json(std::string()));
        scalar_ = Scalar::string;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        scalar_ = Scalar::number;
        token_.assign(1, c);
    } else if (c == 't' || c == 'f' || c == 'n') {
        scalar_ = Scalar::literal;
        token_.assign(1, c);
    } else {
        fail("expected a JSON value");
    }
}

json* PartialJsonParser::place(json value) {
    changed_ = true;
    if (stack_.empty()) {
        root_ = std::move(value);
        return &root_;
    }
    json& container = *stack_.back().container;
    if (stack_.back().object) {
        // A repeated key keeps the last value, as json::parse does.
        json& slot = container[key_];
        slot = std::move(value);
        return &slot;
    }
    // Only the innermost container grows, so the pointers in the stack stay valid.
    container.push_back(std::move(value));
    return &container.back();
}

void PartialJsonParser::end_value() {
    if (stack_.empty()) {
        expect_ = Expect::done;
        complete_ = true;
        changed_ = true;
    } else {
        expect_ = Expect::comma_or_end;
    }
}

void PartialJsonParser::end_number() {
    scalar_ = Scalar::none;
    json number = json::parse(std::string_view(token_), nullptr, false);
    if (number.is_discarded() || !number.is_number()) {
        fail("invalid number");
        return;
    }
    token_.clear();
    (void)place(std::move(number));
    end_value();
}

void PartialJsonParser::append_bytes(std::string_view bytes) {
    if (scalar_ == Scalar::key) {
        key_ += bytes;
        return;
    }
    leaf_->get_ref<std::string&>() += bytes;
    changed_ = true;
}

void PartialJsonParser::append_code_point(std::uint32_t code_point) {
    std::string bytes;
    detail::append_utf8(bytes, code_point);
    append_bytes(bytes);
}

void PartialJsonParser::string_char(char c) {
    const auto byte = static_cast<unsigned char>(c);
    if (escape_ == 1) {
        if (high_surrogate_ != 0 && c != 'u') {
            fail("a high surrogate escape not followed by a low one");
            return;
        }
        escape_ = 0;
        switch (c) {
            case '"':
            case '\\':
            case '/':
                append_bytes(std::string_view(&c, 1));
                return;
            case 'b':
                append_bytes("\b");
                return;
            case 'f':
                append_bytes("\f");
                return;
            case 'n':
                append_bytes("\n");
                return;
            case 'r':
                append_bytes("\r");
                return;
            case 't':
                append_bytes("\t");
                return;
            case 'u':
                escape_ = 2;
                unicode_ = 0;
                return;
            default:
                fail("invalid escape in a string");
                return;
        }
    }
    if (escape_ >= 2) {
        const int digit = detail::hex_digit_value(c);
        if (digit < 0) {
            fail("invalid \\u escape in a string");
            return;
        }
        unicode_ = unicode_ * 16 + static_cast<std::uint32_t>(digit);
        if (++escape_ < 6) return;
        escape_ = 0;
        if (high_surrogate_ != 0) {
            if (unicode_ < 0xDC00 || unicode_ > 0xDFFF) {
                fail("a high surrogate escape not followed by a low one");
                return;
            }
            const std::uint32_t code_point =
                0x10000 + ((high_surrogate_ - 0xD800) << 10) + (unicode_ - 0xDC00);
            high_surrogate_ = 0;
            append_code_point(code_point);
        } else if (unicode_ >= 0xD800 && unicode_ <= 0xDBFF) {
            high_surrogate_ = unicode_;
        } else if (unicode_ >= 0xDC00 && unicode_ <= 0xDFFF) {
            fail("a low surrogate escape without a high one");
        } else {
            append_code_point(unicode_);
        }
        return;
    }
    if (high_surrogate_ != 0 && c != '\\') {
        fail("a high surrogate escape not followed by a low one");
        return;
    }
    if (pending_need_ > 0) {
        if ((byte & 0xC0) != 0x80) {
            fail("invalid UTF-8 in a string");
            return;
        }
        pending_ += c;
        if (--pending_need_ > 0) return;
        // The code point must not be overlong, a surrogate or past U+10FFFF.
        const auto lead = static_cast<unsigned char>(pending_[0]);
        std::uint32_t code_point = lead & (pending_.size() == 3 ? 0x0F : 0x07);
        for (std::size_t i = 1; i < pending_.size(); ++i) {
            code_point = (code_point << 6) | (static_cast<unsigned char>(pending_[i]) & 0x3F);
        }
        const bool valid =
            pending_.size() == 2 ||
            (pending_.size() == 3 && code_point >= 0x800 &&
             (code_point < 0xD800 || code_point > 0xDFFF)) ||
            (pending_.size() == 4 && code_point >= 0x10000 && code_point <= 0x10FFFF);
        if (!valid) {
            fail("invalid UTF-8 in a string");
            return;
        }
        append_bytes(pending_);
        pending_.clear();
        return;
    }
    if (c == '"') {
        if (scalar_ == Scalar::key) {
            scalar_ = Scalar::none;
            expect_ = Expect::colon;
            return;
        }
        scalar_ = Scalar::none;
        leaf_ = nullptr;
        end_value();
        return;
    }
    if (c == '\\') {
        escape_ = 1;
        return;
    }
    if (byte < 0x20) {
        fail("a control character in a string");
        return;
    }
    if (byte < 0x80) {
        append_bytes(std::string_view(&c, 1));
        return;
    }
    if (byte >= 0xC2 && byte <= 0xDF) {
        pending_need_ = 1;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
        pending_need_ = 2;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
        pending_need_ = 3;
    } else {
        fail("invalid UTF-8 in a string");
        return;
    }
    pending_.assign(1, c);
}

}  // namespace ullm
