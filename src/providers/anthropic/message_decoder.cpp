#include "anthropic_internal.hpp"

#include <ullm/core/error.hpp>

#include <algorithm>
#include <utility>

#include "../../core/arithmetic.hpp"
#include "../json_readers.hpp"

namespace ullm::detail::anthropic {

namespace {

FinishReason map_stop_reason(std::string_view reason) {
    if (reason == "max_tokens" || reason == "model_context_window_exceeded") {
        return FinishReason::length;
    }
    if (reason == "tool_use") return FinishReason::tool_call;
    if (reason == "refusal") return FinishReason::content_filter;
    return FinishReason::stop;  // end_turn, stop_sequence, pause_turn, unknown
}

std::string refusal_text(const json& stop_details) {
    std::string explanation = string_field(stop_details, "explanation");
    if (!explanation.empty()) return explanation;
    return "The model declined to respond (stop_reason \"refusal\").";
}

}  // namespace

void RawUsage::update(const json& usage) {
    if (!usage.is_object()) return;
    if (usage.contains("input_tokens")) input = count_field(usage, "input_tokens");
    if (usage.contains("cache_read_input_tokens")) {
        cache_read = count_field(usage, "cache_read_input_tokens");
    }
    if (usage.contains("cache_creation_input_tokens")) {
        cache_write = count_field(usage, "cache_creation_input_tokens");
    }
    if (usage.contains("output_tokens")) output = count_field(usage, "output_tokens");
    if (const auto details = usage.find("output_tokens_details");
        details != usage.end() && details->is_object() && details->contains("thinking_tokens")) {
        thinking = count_field(*details, "thinking_tokens");
    }
}

Usage RawUsage::canonical() const {
    Usage out;
    out.input_tokens =
        detail::saturating_add(detail::saturating_add(input, cache_read), cache_write);
    out.output_tokens = output;
    out.cached_read_tokens = cache_read;
    out.cached_write_tokens = cache_write;
    out.reasoning_tokens = std::min(thinking, output);
    return out;
}

bool takes_input(const json& block) {
    return block.contains("input") || ends_with(string_field(block, "type"), "tool_use");
}

// A tool_use block called from code execution rather than directly by the model.
bool is_programmatic(const json& block) {
    const auto caller = block.find("caller");
    if (caller == block.end() || !caller->is_object()) return false;
    const std::string type = string_field(*caller, "type");
    return !type.empty() && type != "direct";
}

ToolCallPart tool_call_from_block(const json& block, std::size_t index, const ErrorOrigin& origin) {
    ToolCallPart call;
    call.id = string_field(block, "id");
    call.name = string_field(block, "name");
    if (call.id.empty() || call.name.empty()) {
        throw_invalid_response("tool_use block " + std::to_string(index) + " has no id or name",
                               origin);
    }
    const auto input = block.find("input");
    if (input == block.end() || input->is_null()) {
        call.arguments = json::object();
    } else if (input->is_object()) {
        call.arguments = *input;
    } else if (input->is_string()) {
        call.arguments = detail::parse_tool_arguments(input->get<std::string>());
    } else {
        call.arguments = json(input->dump());
    }
    return call;
}

// Adds the visible parts of `content` to `builder`, in order. Shared by the body decoder, the
// stream decoder (on the blocks it assembled) and the replay check, so all three agree.
bool calls_result_tool(const json& block, std::string_view result_tool) {
    return !result_tool.empty() && block.is_object() && string_field(block, "type") == "tool_use" &&
           string_field(block, "name") == result_tool && !is_programmatic(block);
}

// The reply a result tool's input stands for: streamed text verbatim, an object as JSON.
std::string result_text(const json& block) {
    const auto input = block.find("input");
    if (input == block.end() || input->is_null()) return "{}";
    return input->is_string() ? input->get<std::string>() : input->dump();
}

Projection project_content(const json& content, std::string_view stop_reason,
                           const ErrorOrigin& origin, detail::ResponseBuilder& builder,
                           std::string_view result_tool) {
    Projection projection;
    // With a result tool call, the reply is its input: text beside it is not the answer.
    const bool answered = std::any_of(content.begin(), content.end(), [&](const json& block) {
        return calls_result_tool(block, result_tool);
    });
    for (std::size_t i = 0; i < content.size(); ++i) {
        const json& block = content[i];
        if (!block.is_object()) {
            throw_invalid_response("content block " + std::to_string(i) + " is not an object",
                                   origin);
        }
        const std::string type = string_field(block, "type");
        if (type.empty()) {
            throw_invalid_response("content block " + std::to_string(i) + " has no type", origin);
        }
        if (type == "fallback") {
            // Which model answered; not conversation content, so not replayed.
            const auto to = block.find("to");
            if (to != block.end()) {
                const std::string model = string_field(*to, "model");
                if (!model.empty()) projection.answered_model = model;
            }
            continue;
        }
        if (answered && calls_result_tool(block, result_tool)) {
            if (projection.answered_by_result_tool) continue;  // the first call is the answer
            projection.answered_by_result_tool = true;
            (void)tool_call_from_block(block, i, origin);  // the same checks as any call
            const std::string text = result_text(block);
            builder.add_text(text);
            // Replayed as what it stands for, so that no call is left without a result.
            projection.replay_blocks.push_back(text_block(text));
            continue;
        }
        if (type == "text" && answered) continue;  // not the answer, so neither shown nor replayed
        projection.replay_blocks.push_back(block);
        if (type == "text") {
            builder.add_text(string_field(block, "text"));
        } else if (type == "thinking") {
            builder.add_reasoning(string_field(block, "thinking"));
            projection.needs_replay = true;
        } else if (type == "tool_use") {
            if (is_programmatic(block) && stop_reason != "tool_use") {
                // Called from code execution and already answered there.
                projection.needs_replay = true;
                continue;
            }
            builder.add_tool_call(tool_call_from_block(block, i, origin));
            projection.other_tool_calls = true;
        } else {
            // redacted_thinking, server tools and their results, MCP, compaction, unknown.
            projection.needs_replay = true;
        }
    }
    return projection;
}

ChatResponse finish_response(detail::ResponseBuilder& builder, const Projection& projection,
                             const MessageSummary& summary, const std::string& provider) {
    FinishReason reason = map_stop_reason(summary.stop_reason);
    // The result tool's call is the answer, not a call for the caller to run.
    if (reason == FinishReason::tool_call && projection.answered_by_result_tool &&
        !projection.other_tool_calls) {
        reason = FinishReason::stop;
    }
    builder.set_finish(reason, summary.stop_reason);
    if (summary.stop_reason == "refusal") builder.add_refusal(refusal_text(summary.stop_details));
    builder.usage() = summary.usage.canonical();
    builder.set_model(projection.answered_model.empty() ? summary.model
                                                        : projection.answered_model);
    builder.set_request_id(summary.request_id);
    if (projection.needs_replay) {
        builder.set_replay(ReplayState{
            provider, summary.replay_model,
            json{{"content", projection.replay_blocks}, {"stop_reason", summary.stop_reason}}});
    }
    return std::move(builder).build(provider);
}

}  // namespace ullm::detail::anthropic
