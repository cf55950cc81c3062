#include <ullm/providers/chat.hpp>

namespace ullm {

std::string_view to_string(FinishReason reason) noexcept {
    switch (reason) {
        case FinishReason::stop:
            return "stop";
        case FinishReason::length:
            return "length";
        case FinishReason::tool_call:
            return "tool_call";
        case FinishReason::content_filter:
            return "content_filter";
        case FinishReason::error:
            return "error";
    }
    return "stop";
}

std::string_view to_string(StreamEvent::Type type) noexcept {
    switch (type) {
        case StreamEvent::Type::text_delta:
            return "text-delta";
        case StreamEvent::Type::reasoning_delta:
            return "reasoning-delta";
        case StreamEvent::Type::tool_call_start:
            return "tool-call-start";
        case StreamEvent::Type::tool_call_delta:
            return "tool-call-delta";
        case StreamEvent::Type::tool_call_end:
            return "tool-call-end";
        case StreamEvent::Type::usage_update:
            return "usage-update";
        case StreamEvent::Type::retry:
            return "retry";
        case StreamEvent::Type::tool_call_result:
            return "tool-call-result";
        case StreamEvent::Type::done:
            return "done";
    }
    return "done";
}

}  // namespace ullm
