#include "tool_sequence.hpp"

#include <ullm/detail/json_checks.hpp>

#include <set>
#include <variant>

namespace ullm::detail {

namespace {

std::string part_pointer(std::size_t part, const char* field = nullptr) {
    std::string out = pointer_append("/parts", part);
    if (field != nullptr) out = pointer_append(out, field);
    return out;
}

std::string quoted(const std::string& text) {
    return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The first call of `message` (at `index`) whose id is not in `answered`.
std::optional<ToolSequenceViolation> first_unanswered(const Message& message, std::size_t index,
                                                      const std::set<std::string>& answered) {
    for (std::size_t part = 0; part < message.parts.size(); ++part) {
        const auto* call = std::get_if<ToolCallPart>(&message.parts[part]);
        if (call != nullptr && answered.count(call->id) == 0) {
            return ToolSequenceViolation{
                index, part_pointer(part),
                "tool call " + quoted(call->id) +
                    " is not answered by the tool messages that follow it (only the last "
                    "message may hold unanswered tool calls)"};
        }
    }
    return std::nullopt;
}

}  // namespace

std::optional<ToolSequenceViolation> check_tool_sequence(const std::vector<Message>& messages) {
    // The calls of the assistant message that the current run of tool messages answers.
    std::set<std::string> calls;
    std::set<std::string> answered;
    std::size_t caller = 0;  // Index of that assistant message.
    const auto end_of_run = [&]() -> std::optional<ToolSequenceViolation> {
        if (calls.empty()) return std::nullopt;
        auto unanswered = first_unanswered(messages[caller], caller, answered);
        calls.clear();
        return unanswered;
    };
    for (std::size_t index = 0; index < messages.size(); ++index) {
        const Message& message = messages[index];
        if (message.role != Role::tool) {
            // A run of tool messages ends here; so does an assistant's chance to be answered.
            if (auto unanswered = end_of_run()) return unanswered;
        }
        if (message.role == Role::assistant) {
            std::set<std::string> ids;
            for (std::size_t part = 0; part < message.parts.size(); ++part) {
                const auto* call = std::get_if<ToolCallPart>(&message.parts[part]);
                if (call != nullptr && !ids.insert(call->id).second) {
                    return ToolSequenceViolation{
                        index, part_pointer(part, "id"),
                        "repeats the tool call id " + quoted(call->id) + " of the same message"};
                }
            }
            // The calls of the last message may still await their results.
            if (index + 1 < messages.size()) {
                calls = std::move(ids);
                answered.clear();
                caller = index;
            }
            continue;
        }
        if (message.role != Role::tool) continue;

        if (calls.empty()) {
            return ToolSequenceViolation{
                index, "",
                "a tool message must directly follow the assistant message whose tool calls it "
                "answers (or another tool message answering it)"};
        }
        for (std::size_t part = 0; part < message.parts.size(); ++part) {
            const auto* result = std::get_if<ToolResultPart>(&message.parts[part]);
            if (result == nullptr) continue;
            if (calls.count(result->tool_call_id) == 0) {
                return ToolSequenceViolation{
                    index, part_pointer(part, "tool_call_id"),
                    "answers no tool call of the preceding assistant message (" +
                        quoted(result->tool_call_id) + ")"};
            }
            if (!answered.insert(result->tool_call_id).second) {
                return ToolSequenceViolation{
                    index, part_pointer(part, "tool_call_id"),
                    "answers tool call " + quoted(result->tool_call_id) + " a second time"};
            }
        }
    }
    return end_of_run();
}

}  // namespace ullm::detail
