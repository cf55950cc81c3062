#pragma once

// The provider adapters the provider targets fuzz, and the comparisons and checks they share.
// A target is compiled once per adapter, with one of ULLM_FUZZ_OPENAI_CHAT,
// ULLM_FUZZ_OPENAI_RESPONSES, ULLM_FUZZ_ANTHROPIC or ULLM_FUZZ_GEMINI defined.

#include <ullm/core/message.hpp>
#include <ullm/http/http_types.hpp>
#include <ullm/providers/anthropic.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/gemini.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/providers/openai_responses.hpp>
#include <ullm/providers/provider.hpp>

#include "fuzz_support.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm::fuzz {

/// The adapter under test; `variant` picks among provider names that change its behaviour.
inline std::unique_ptr<Provider> make_provider(unsigned variant) {
#if defined(ULLM_FUZZ_OPENAI_CHAT)
    // xai keeps reasoning apart; the others are plain OpenAI-compatible servers.
    static const char* const names[] = {"openai", "xai", "groq", "ollama"};
    return std::make_unique<OpenAiChatProvider>(
        OpenAiChatOptions{.provider_name = names[variant % 4]});
#elif defined(ULLM_FUZZ_OPENAI_RESPONSES)
    return std::make_unique<OpenAiResponsesProvider>(
        OpenAiResponsesOptions{.include_encrypted_reasoning = (variant % 2) == 0});
#elif defined(ULLM_FUZZ_ANTHROPIC)
    (void)variant;
    return std::make_unique<AnthropicProvider>();
#elif defined(ULLM_FUZZ_GEMINI)
    (void)variant;
    return std::make_unique<GeminiProvider>();
#else
#error \
    "define ULLM_FUZZ_OPENAI_CHAT, ULLM_FUZZ_OPENAI_RESPONSES, ULLM_FUZZ_ANTHROPIC or ULLM_FUZZ_GEMINI"
#endif
}

/// The request the response answers; `variant` picks the model (priced or not). For
/// Anthropic, variant 3 asks an older Claude model for structured output, whose answer comes
/// through a tool named like the one the recorded traffic calls most (`get_weather`).
inline ChatRequest make_request(unsigned variant) {
#if defined(ULLM_FUZZ_ANTHROPIC)
    static const char* const last_model = "claude-3-5-haiku-20241022";
#else
    static const char* const last_model = "gemini-2.5-flash";
#endif
    static const char* const models[] = {"recorded", "gpt-4o", "claude-sonnet-4-5", last_model};
    ChatRequest request;
    request.model = models[variant % 4];
    request.messages.push_back(Message::user("Hello"));
#if defined(ULLM_FUZZ_ANTHROPIC)
    if (variant % 4 == 3) {
        request.response_format = ResponseFormat{"get_weather", {{"type", "object"}}, false};
    }
#endif
    return request;
}

/// One provider and request for the options byte: bits 0-1 the model, bits 2-3 the variant.
struct Subject {
    std::unique_ptr<Provider> provider;
    ChatRequest request;
};

inline Subject make_subject(std::uint8_t options) {
    return {make_provider((options >> 2) & 3u), make_request(options & 3u)};
}

inline std::string describe(const ChatResponse& response) {
    std::string text = "response " + show(message_to_json(response.message)) + " text " +
                       quote(response.text) + " reasoning " + quote(response.reasoning_text) +
                       " finish " + std::string(to_string(response.finish_reason)) + " raw " +
                       quote(response.raw_finish_reason) + " usage " +
                       show(usage_to_json(response.usage)) + " model " + quote(response.model) +
                       " provider " + quote(response.provider) + " request_id " +
                       quote(response.request_id);
    if (response.refusal) text += " refusal " + quote(*response.refusal);
    for (const auto& call : response.tool_calls) {
        text += " call " + quote(call.id) + " " + quote(call.name) + " " + show(call.arguments);
    }
    return text;
}

inline std::string describe(const StreamEvent& event) {
    std::string text = std::string(to_string(event.type));
    if (!event.delta.empty()) text += " delta " + quote(event.delta);
    if (!event.tool_call_id.empty()) text += " id " + quote(event.tool_call_id);
    if (!event.tool_name.empty()) text += " name " + quote(event.tool_name);
    if (event.tool_call) {
        text += " call " + quote(event.tool_call->id) + " " + quote(event.tool_call->name) + " " +
                show(event.tool_call->arguments);
    }
    if (event.usage) text += " usage " + show(usage_to_json(*event.usage));
    if (event.response) text += " " + describe(*event.response);
    return text;
}

inline std::string describe(const std::vector<StreamEvent>& events,
                            const std::optional<Failure>& failure) {
    std::string text;
    for (const auto& event : events) text += "  " + describe(event) + "\n";
    return text + "  " + describe(failure) + "\n";
}

inline bool same_response(const ChatResponse& a, const ChatResponse& b) {
    return a.message == b.message && a.text == b.text && a.reasoning_text == b.reasoning_text &&
           a.tool_calls == b.tool_calls && a.finish_reason == b.finish_reason &&
           a.raw_finish_reason == b.raw_finish_reason && a.usage == b.usage && a.model == b.model &&
           a.provider == b.provider && a.request_id == b.request_id && a.refusal == b.refusal;
}

inline bool same_event(const StreamEvent& a, const StreamEvent& b) {
    if (a.response.has_value() != b.response.has_value()) return false;
    if (a.response && !same_response(*a.response, *b.response)) return false;
    return a.type == b.type && a.delta == b.delta && a.tool_call_id == b.tool_call_id &&
           a.tool_name == b.tool_name && a.tool_call == b.tool_call &&
           a.tool_result == b.tool_result && a.usage == b.usage && a.attempt == b.attempt &&
           a.delay == b.delay && a.error_code == b.error_code;
}

inline bool same_events(const std::vector<StreamEvent>& a, const std::vector<StreamEvent>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!same_event(a[i], b[i])) return false;
    }
    return true;
}

/// The same calls in any order. A decoder may end a call after later ones (Anthropic ends a
/// block that never stopped, and code execution's calls, at message_stop) while the response
/// keeps the order of the content; the client's StreamEventChecker asks no more either.
inline bool same_calls(std::vector<ToolCallPart> a, std::vector<ToolCallPart> b) {
    const auto by_id = [](const ToolCallPart& x, const ToolCallPart& y) { return x.id < y.id; };
    std::sort(a.begin(), a.end(), by_id);
    std::sort(b.begin(), b.end(), by_id);
    return a == b;
}

/// Checks what docs/streaming.md promises of a decoded stream: at most one `done`, and nothing
/// after it; exactly one when the stream succeeded; a tool call's deltas and end come after
/// its start, under the id and name the start announced; the final response holds exactly the
/// ended calls (see `same_calls`). Returns the broken rule, or empty.
inline std::string stream_rule_broken(const std::vector<StreamEvent>& events, bool succeeded) {
    std::map<std::string, std::string> started;  // id -> name
    std::vector<ToolCallPart> ended;
    std::size_t done = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
        const StreamEvent& event = events[i];
        const std::string at = "event " + std::to_string(i) + ": ";
        if (done > 0) return at + "an event after done";
        switch (event.type) {
            case StreamEvent::Type::tool_call_start:
                if (event.tool_call_id.empty()) return at + "a tool call starts without an id";
                if (event.tool_name.empty()) return at + "a tool call starts without a name";
                if (started.count(event.tool_call_id) != 0) {
                    return at + "a second start for tool call id " + quote(event.tool_call_id);
                }
                started[event.tool_call_id] = event.tool_name;
                break;
            case StreamEvent::Type::tool_call_delta:
                if (started.count(event.tool_call_id) == 0) {
                    return at + "an argument delta for tool call id " + quote(event.tool_call_id) +
                           ", which never started";
                }
                break;
            case StreamEvent::Type::tool_call_end: {
                const auto it = started.find(event.tool_call_id);
                if (it == started.end()) {
                    return at + "the end of tool call id " + quote(event.tool_call_id) +
                           ", which never started";
                }
                if (!event.tool_call) return at + "a tool call end without its call";
                if (event.tool_call->id != event.tool_call_id ||
                    event.tool_call->name != it->second) {
                    return at + "a tool call ends under another id or name than it started";
                }
                ended.push_back(*event.tool_call);
                break;
            }
            case StreamEvent::Type::usage_update:
                if (!event.usage) return at + "a usage update without usage";
                break;
            case StreamEvent::Type::done:
                ++done;
                if (!event.response) return at + "done without a response";
                if (!same_calls(event.response->tool_calls, ended)) {
                    return at + "the final response's tool calls are not the ended calls";
                }
                break;
            default:
                break;
        }
    }
    if (succeeded && done != 1) return "a successful stream without its done event";
    return {};
}

}  // namespace ullm::fuzz
