#include <ullm/conversation/markdown.hpp>

#include <algorithm>
#include <cstdio>
#include <variant>

namespace ullm {

namespace {

// A fence of backticks longer than any run of backticks in `text` (at least three).
std::string fence_for(const std::string& text) {
    std::size_t longest = 0;
    std::size_t run = 0;
    for (const char c : text) {
        run = c == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
    }
    return std::string(std::max<std::size_t>(3, longest + 1), '`');
}

void code_block(std::string& out, const std::string& language, const std::string& text) {
    const std::string fence = fence_for(text);
    out += fence + language + "\n" + text + "\n" + fence + "\n\n";
}

// A table cell: pipes escaped, line breaks flattened.
std::string cell(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '|') {
            out += "\\|";
        } else if (c == '\n' || c == '\r') {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out.empty() ? "—" : out;
}

std::string pretty(const json& value) {
    return value.dump(2, ' ', false, json::error_handler_t::replace);
}

// Where an image or document comes from: its URL, or the size of its inline data.
template <class Media>
std::string source(const Media& media) {
    if (!media.url.empty()) return "<" + media.url + ">";
    return media.media_type + ", " + std::to_string(media.data.size()) + " base64 characters";
}

std::string heading(Role role) {
    switch (role) {
        case Role::system:
            return "System";
        case Role::user:
            return "User";
        case Role::assistant:
            return "Assistant";
        case Role::tool:
            return "Tool";
    }
    return "Message";
}

void render_part(std::string& out, const Part& part) {
    std::visit(
        [&](const auto& value) {
            using T = std::decay_t<decltype(value)>;
            if constexpr (std::is_same_v<T, TextPart>) {
                out += value.text + "\n\n";
            } else if constexpr (std::is_same_v<T, ReasoningPart>) {
                out += "> **Reasoning**\n";
                std::size_t start = 0;
                while (start <= value.text.size()) {
                    const auto end = value.text.find('\n', start);
                    const auto line = value.text.substr(
                        start, end == std::string::npos ? std::string::npos : end - start);
                    out += "> " + line + "\n";
                    if (end == std::string::npos) break;
                    start = end + 1;
                }
                out += "\n";
            } else if constexpr (std::is_same_v<T, ImagePart>) {
                out += "*Image*: " + source(value) + "\n\n";
            } else if constexpr (std::is_same_v<T, DocumentPart>) {
                out += "*Document*" + (value.name.empty() ? "" : " `" + value.name + "`") + ": " +
                       source(value) + "\n\n";
            } else if constexpr (std::is_same_v<T, ToolCallPart>) {
                out += "**Tool call** `" + value.name + "` (id `" + value.id + "`)\n\n";
                code_block(out, "json", pretty(value.arguments));
            } else if constexpr (std::is_same_v<T, ToolResultPart>) {
                out += std::string(value.is_error ? "**Tool error**" : "**Tool result**") + " `" +
                       value.name + "` (id `" + value.tool_call_id + "`)\n\n";
                if (value.result.is_string()) {
                    code_block(out, "text", value.result.template get<std::string>());
                } else {
                    code_block(out, "json", pretty(value.result));
                }
            }
        },
        part);
}

}  // namespace

std::string render_markdown(const std::vector<Message>& messages, const MarkdownHeader& header) {
    const auto& totals = header.totals;
    char cost[64];
    std::snprintf(cost, sizeof cost, "$%.6f", totals.cost_usd);
    std::string out = "# Conversation " + cell(header.session_id) + "\n\n";
    out += "| Field | Value |\n|---|---|\n";
    out += "| Session | " + cell(header.session_id) + " |\n";
    if (!header.tenant.empty()) out += "| Tenant | " + cell(header.tenant) + " |\n";
    out += "| Provider | " + cell(header.provider) + " |\n";
    out += "| Model | " + cell(header.model) + " |\n";
    out += "| Messages | " + std::to_string(messages.size()) + " |\n";
    out += "| Model rounds | " + std::to_string(totals.rounds) + " |\n";
    out += "| Input tokens | " + std::to_string(totals.input_tokens) + " |\n";
    out += "| Output tokens | " + std::to_string(totals.output_tokens) + " |\n";
    out += "| Reasoning tokens | " + std::to_string(totals.reasoning_tokens) + " |\n";
    out += "| Cached tokens (read / write) | " + std::to_string(totals.cached_read_tokens) + " / " +
           std::to_string(totals.cached_write_tokens) + " |\n";
    out += "| Cost (USD) | " + std::string(cost) + " |\n\n";
    for (const auto& message : messages) {
        out += "## " + heading(message.role) + "\n\n";
        if (message.parts.empty()) out += "*(empty)*\n\n";
        for (const auto& part : message.parts) render_part(out, part);
    }
    while (out.size() >= 2 && out.ends_with("\n\n")) out.pop_back();
    return out;
}

}  // namespace ullm
