#include "openai_chat_internal.hpp"

#include <algorithm>
#include <utility>

#include "../json_readers.hpp"

namespace ullm::detail::openai_chat {

FinishReason map_finish(std::string_view reason) {
    if (reason == "length") return FinishReason::length;
    if (reason == "tool_calls" || reason == "function_call") return FinishReason::tool_call;
    if (reason == "content_filter") return FinishReason::content_filter;
    if (reason == "error") return FinishReason::error;
    return FinishReason::stop;
}

// Usage in Chat Completions and in the dialects of compatible servers. `reasoning_apart`:
// the server counts reasoning outside completion_tokens (xAI), so output adds it back.
Usage decode_usage(const json& usage, bool reasoning_apart) {
    Usage out;
    if (!usage.is_object()) return out;
    out.input_tokens = count_field(usage, "prompt_tokens");
    out.output_tokens = count_field(usage, "completion_tokens");
    if (const auto details = usage.find("prompt_tokens_details");
        details != usage.end() && details->is_object()) {
        out.cached_read_tokens = count_field(*details, "cached_tokens");
        out.cached_write_tokens = count_field(*details, "cache_write_tokens");
    }
    if (out.cached_read_tokens == 0) {
        // DeepSeek reports cache hits beside the prompt; Moonshot at the top level.
        out.cached_read_tokens = std::max(count_field(usage, "prompt_cache_hit_tokens"),
                                          count_field(usage, "cached_tokens"));
    }
    if (const auto details = usage.find("completion_tokens_details");
        details != usage.end() && details->is_object()) {
        out.reasoning_tokens = count_field(*details, "reasoning_tokens");
    }
    // Canonical output includes reasoning. A reasoning count above the completion count can
    // only mean the server left reasoning out of it.
    if (reasoning_apart || out.reasoning_tokens > out.output_tokens) {
        out.output_tokens += out.reasoning_tokens;
    }
    return out;
}

// Text and reasoning of a `content` value: a string, or (Mistral) an array of chunks such as
// {"type":"text"} and {"type":"thinking","thinking":[{"type":"text",…}]}.
void decode_content(const json& content, std::string& text, std::string& reasoning) {
    if (content.is_string()) {
        text += content.get_ref<const std::string&>();
        return;
    }
    if (!content.is_array()) return;
    for (const auto& chunk : content) {
        const std::string type = string_field(chunk, "type");
        if (type == "text") {
            text += string_field(chunk, "text");
        } else if (type == "thinking") {
            const auto thinking = chunk.find("thinking");
            if (thinking == chunk.end()) continue;
            if (thinking->is_string()) {
                reasoning += thinking->get<std::string>();
            } else if (thinking->is_array()) {
                for (const auto& piece : *thinking) reasoning += string_field(piece, "text");
            }
        }
    }
}

// Visible reasoning as compatible servers send it: `reasoning_content` (DeepSeek, vLLM,
// llama.cpp, Qwen) or `reasoning` (OpenRouter, Groq, Ollama).
std::string decode_reasoning(const json& message) {
    std::string reasoning = string_field(message, "reasoning_content");
    if (reasoning.empty()) reasoning = string_field(message, "reasoning");
    return reasoning;
}

ErrorOrigin origin_of(std::string_view provider, const std::string& model,
                      const HttpResponseHead* head, std::string request_id) {
    if (head != nullptr && request_id.empty()) {
        request_id = head->header("x-request-id").value_or("");
    }
    return {std::string(provider), model, std::move(request_id)};
}

}  // namespace ullm::detail::openai_chat
