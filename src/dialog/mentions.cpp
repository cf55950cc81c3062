#include "mentions.hpp"

#include <string_view>
#include <variant>
#include <vector>

namespace ullm::detail {

namespace {

constexpr std::string_view link_prefix = "/of:";

bool ends_id(unsigned char c) {
    return c == '/' || c <= 0x20 || c == 0x7F;
}

}  // namespace

void for_each_mention(std::string_view text, const std::function<void(std::string_view)>& visit) {
    std::size_t at = 0;
    while ((at = text.find(link_prefix, at)) != std::string_view::npos) {
        const std::size_t start = at + link_prefix.size();
        std::size_t end = start;
        while (end < text.size() && !ends_id(static_cast<unsigned char>(text[end]))) ++end;
        const std::string_view run = text.substr(start, end - start);
        if (!run.empty()) {
            visit(run);
            // A link quoted in prose or in JSON text: `"/of:<id>"`, `(/of:<id>)`, `/of:<id>.`
            std::string_view inner = run.substr(0, run.find_first_of("\"'`\\<>(){}[],;"));
            if (!inner.empty() && inner.size() != run.size()) visit(inner);
            std::string_view trimmed = inner;
            while (!trimmed.empty() &&
                   std::string_view(".:!?*").find(trimmed.back()) != std::string_view::npos) {
                trimmed.remove_suffix(1);
            }
            if (!trimmed.empty() && trimmed.size() != inner.size()) visit(trimmed);
        }
        at = end;
    }
}

void for_each_mention(const json& value, const std::function<void(std::string_view)>& visit) {
    std::vector<const json*> pending{&value};
    while (!pending.empty()) {
        const json* node = pending.back();
        pending.pop_back();
        if (node->is_string()) {
            for_each_mention(std::string_view(node->get_ref<const std::string&>()), visit);
        } else if (node->is_structured()) {
            for (const auto& member : *node) pending.push_back(&member);
        }
    }
}

void for_each_mention(const std::vector<Message>& messages,
                      const std::function<void(std::string_view)>& visit) {
    for (const auto& message : messages) {
        for (const auto& part : message.parts) {
            if (const auto* text = std::get_if<TextPart>(&part)) {
                for_each_mention(std::string_view(text->text), visit);
            } else if (const auto* reasoning = std::get_if<ReasoningPart>(&part)) {
                for_each_mention(std::string_view(reasoning->text), visit);
            } else if (const auto* call = std::get_if<ToolCallPart>(&part)) {
                for_each_mention(call->arguments, visit);
            } else if (const auto* result = std::get_if<ToolResultPart>(&part)) {
                for_each_mention(result->result, visit);
            }
        }
    }
}

}  // namespace ullm::detail
