#include "gemini_internal.hpp"

#include <cstdint>
#include <utility>
#include <variant>

#include "../json_readers.hpp"

namespace ullm::detail::gemini {

json layout_to_json(const std::vector<LayoutEntry>& layout) {
    json parts = json::array();
    for (const auto& entry : layout) {
        json out = json::object();
        if (entry.part) {
            out["part"] = *entry.part;
        } else {
            out["raw"] = entry.raw;
        }
        if (!entry.signature.empty()) out["thoughtSignature"] = entry.signature;
        if (!entry.provider_id.empty()) out["id"] = entry.provider_id;
        parts.push_back(std::move(out));
    }
    return {{"parts", std::move(parts)}};
}

// The layout in `data` when it matches `message` exactly; nullopt otherwise (then the message
// goes out without replay state).
std::optional<std::vector<LayoutEntry>> layout_from_json(const json& data, const Message& message) {
    if (!data.is_object()) return std::nullopt;
    const auto parts = data.find("parts");
    if (parts == data.end() || !parts->is_array()) return std::nullopt;
    std::vector<LayoutEntry> layout;
    std::size_t next_part = 0;
    for (const auto& item : *parts) {
        if (!item.is_object()) return std::nullopt;
        LayoutEntry entry;
        const auto part = item.find("part");
        const auto raw = item.find("raw");
        if ((part == item.end()) == (raw == item.end())) return std::nullopt;
        if (part != item.end()) {
            if (!part->is_number_unsigned() || part->get<std::uint64_t>() != next_part ||
                next_part >= message.parts.size()) {
                return std::nullopt;
            }
            entry.part = next_part++;
        } else {
            if (!raw->is_object()) return std::nullopt;
            entry.raw = *raw;
        }
        for (const auto& [key, value] : item.items()) {
            if (key == "part" || key == "raw") continue;
            if (!value.is_string() || (key != "thoughtSignature" && key != "id")) {
                return std::nullopt;
            }
        }
        entry.signature = string_field(item, "thoughtSignature");
        entry.provider_id = string_field(item, "id");
        if (!entry.provider_id.empty() &&
            (!entry.part || !std::holds_alternative<ToolCallPart>(message.parts[*entry.part]))) {
            return std::nullopt;
        }
        layout.push_back(std::move(entry));
    }
    if (next_part != message.parts.size()) return std::nullopt;
    return layout;
}

}  // namespace ullm::detail::gemini
