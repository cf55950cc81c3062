#include <ullm/detail/json_checks.hpp>

#include <ullm/core/error.hpp>

#include "fast_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ullm::detail {

JsonSafetyViolation check_json_safe(const json& value, const std::string& path,
                                    std::size_t max_depth) {
    struct Item {
        const json* value;
        std::string path;
        std::size_t depth;
    };
    std::vector<Item> pending{{&value, path, 0}};
    while (!pending.empty()) {
        Item item = std::move(pending.back());
        pending.pop_back();
        const json& current = *item.value;
        if (current.is_number_float() && !std::isfinite(current.get<double>())) {
            return {item.path.empty() ? "/" : item.path, "must be a finite number"};
        }
        if (!current.is_structured()) continue;
        if (item.depth >= max_depth) {
            return {item.path.empty() ? "/" : item.path,
                    "nests deeper than " + std::to_string(max_depth) + " levels"};
        }
        if (current.is_object()) {
            for (auto it = current.begin(); it != current.end(); ++it) {
                pending.push_back(
                    {&it.value(), pointer_append(item.path, it.key()), item.depth + 1});
            }
        } else {
            std::size_t index = 0;
            for (const auto& element : current) {
                pending.push_back({&element, pointer_append(item.path, index++), item.depth + 1});
            }
        }
    }
    return {};
}

namespace {

// The length of the well-formed UTF-8 sequence at `i` (1 to 4), or 0 when the bytes there are
// not one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) return 1;
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
        code = lead & 0x1Fu;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        code = lead & 0x0Fu;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        code = lead & 0x07u;
    } else {
        return 0;  // a continuation byte, an overlong lead (C0, C1) or past F4
    }
    if (text.size() - i < length) return 0;
    for (std::size_t k = 1; k < length; ++k) {
        const auto next = static_cast<unsigned char>(text[i + k]);
        if ((next & 0xC0u) != 0x80u) return 0;
        code = (code << 6) | (next & 0x3Fu);
    }
    if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000) ||
        (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) {
        return 0;
    }
    return length;
}

}  // namespace

bool is_valid_utf8(std::string_view text) noexcept {
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t length = utf8_sequence_length(text, i);
        if (length == 0) return false;
        i += length;
    }
    return true;
}

std::string valid_utf8(std::string text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const std::size_t length = utf8_sequence_length(text, i);
        if (length == 0) break;
        i += length;
    }
    if (i == text.size()) return text;
    std::string out = text.substr(0, i);
    while (i < text.size()) {
        const std::size_t length = utf8_sequence_length(text, i);
        if (length == 0) {
            out += "\xEF\xBF\xBD";  // U+FFFD for each byte that starts no valid sequence
            ++i;
        } else {
            out.append(text, i, length);
            i += length;
        }
    }
    return out;
}

json parse_json_exact(std::string_view text) {
    if (text.find('\0') != std::string_view::npos) return json(json::value_t::discarded);
    if (auto fast = parse_json_fast(text)) return std::move(*fast);
    return json::parse(text, nullptr, false);
}

bool is_prototype_sensitive_key(std::string_view key) noexcept {
    return key == "__proto__" || key == "constructor" || key == "prototype";
}

std::string render_bounded(const json& value, std::size_t limit) {
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > limit) {
        text.resize(limit);
        text += "...";
    }
    return text;
}

std::string quote(std::string_view text, std::size_t limit) {
    return render_bounded(json(std::string(text)), limit);
}

JsonSafetyViolation check_json_rules(const json& value, const std::string& path,
                                     const JsonRules& rules, std::size_t depth) {
    struct Item {
        const json* value;
        std::string path;
        std::size_t depth;
    };
    std::vector<Item> pending{{&value, path, depth}};
    while (!pending.empty()) {
        Item item = std::move(pending.back());
        pending.pop_back();
        const json& current = *item.value;
        if (current.is_number_float() && !std::isfinite(current.get<double>())) {
            return {item.path, "must be a finite number"};
        }
        if (rules.utf8 && current.is_string() &&
            !is_valid_utf8(current.get_ref<const std::string&>())) {
            return {item.path, "must be valid UTF-8 text"};
        }
        if (!current.is_structured()) continue;
        if (item.depth >= rules.max_depth) {
            return {item.path, "nests deeper than " + std::to_string(rules.max_depth) + " levels"};
        }
        const std::size_t first_child = pending.size();
        if (current.is_object()) {
            for (auto it = current.begin(); it != current.end(); ++it) {
                if (rules.utf8 && !is_valid_utf8(it.key())) {
                    return {item.path, "has a key that is not valid UTF-8"};
                }
                if ((rules.no_prototype_keys && is_prototype_sensitive_key(it.key())) ||
                    (rules.no_proto_key && it.key() == "__proto__")) {
                    return {pointer_append(item.path, it.key()),
                            "is an unsafe key (\"" + it.key() +
                                "\" is prototype-sensitive and never accepted)"};
                }
                pending.push_back(
                    {&it.value(), pointer_append(item.path, it.key()), item.depth + 1});
            }
        } else {
            std::size_t index = 0;
            for (const auto& element : current) {
                pending.push_back({&element, pointer_append(item.path, index++), item.depth + 1});
            }
        }
        // Children were pushed in document order; reverse them so they pop in that order.
        std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(first_child), pending.end());
    }
    return {};
}

}  // namespace ullm::detail
