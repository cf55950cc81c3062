#include "response_checks.hpp"

#include <ullm/providers/provider_errors.hpp>

#include <vector>

namespace ullm::detail {

namespace {

// The calls of a response: its message's tool-call parts and its `tool_calls` list.
void check_calls(const std::vector<ToolCallPart>& calls, const ErrorOrigin& origin) {
    std::set<std::string, std::less<>> ids;
    for (std::size_t i = 0; i < calls.size(); ++i) {
        const ToolCallPart& call = calls[i];
        if (call.id.empty()) {
            throw_invalid_response("tool call " + std::to_string(i) + " has no id", origin);
        }
        if (call.name.empty()) {
            throw_invalid_response("tool call \"" + call.id + "\" has no name", origin);
        }
        if (!ids.insert(call.id).second) {
            throw_invalid_response("two tool calls share the id \"" + call.id + "\"", origin);
        }
    }
}

}  // namespace

void check_response(const ChatResponse& response, const ErrorOrigin& origin) {
    check_calls(response.message.tool_calls(), origin);
    check_calls(response.tool_calls, origin);
}

void StreamEventChecker::refuse(const std::string& what) const {
    throw_invalid_response("the stream " + what, origin_);
}

void StreamEventChecker::check(const StreamEvent& event) {
    using Type = StreamEvent::Type;
    switch (event.type) {
        case Type::tool_call_start:
            if (event.tool_call_id.empty() || event.tool_name.empty()) {
                refuse("started a tool call without an id or a name");
            }
            if (open_.count(event.tool_call_id) != 0 || ended_.count(event.tool_call_id) != 0) {
                refuse("started tool call \"" + event.tool_call_id + "\" twice");
            }
            open_.emplace(event.tool_call_id, event.tool_name);
            return;
        case Type::tool_call_delta:
            if (open_.count(event.tool_call_id) == 0) {
                refuse("sent arguments for tool call \"" + event.tool_call_id +
                       "\", which is not open");
            }
            return;
        case Type::tool_call_end: {
            const auto open = open_.find(event.tool_call_id);
            if (open == open_.end()) {
                refuse("ended tool call \"" + event.tool_call_id + "\", which is not open");
            }
            if (!event.tool_call || event.tool_call->id != event.tool_call_id ||
                event.tool_call->name != open->second) {
                refuse("ended tool call \"" + event.tool_call_id + "\" as a call of another tool");
            }
            ended_.insert(open_.extract(open));
            return;
        }
        case Type::tool_call_result:
            refuse("carried a tool result; results come from the tool loop, never a provider");
        case Type::done: {
            if (!open_.empty()) {
                refuse("ended with tool call \"" + open_.begin()->first + "\" still open");
            }
            if (!event.response) return;
            check_response(*event.response, origin_);
            const std::vector<ToolCallPart> calls = event.response->message.tool_calls();
            bool same = calls.size() == ended_.size();
            for (const auto& call : calls) {
                const auto ended = ended_.find(call.id);
                same = same && ended != ended_.end() && ended->second == call.name;
            }
            if (!same) refuse("ended with tool calls other than the ones it streamed");
            return;
        }
        case Type::text_delta:
        case Type::reasoning_delta:
        case Type::usage_update:
        case Type::retry:
            return;
    }
}

}  // namespace ullm::detail
