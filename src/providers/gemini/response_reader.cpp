#include "gemini_internal.hpp"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>
#include <variant>

#include "../../core/arithmetic.hpp"
#include "../json_readers.hpp"

namespace ullm::detail::gemini {

namespace {

FinishReason map_finish(std::string_view reason) {
    if (reason == "STOP") return FinishReason::stop;
    if (reason == "MAX_TOKENS") return FinishReason::length;
    static const std::set<std::string_view> filtered = {"SAFETY",
                                                        "RECITATION",
                                                        "BLOCKLIST",
                                                        "PROHIBITED_CONTENT",
                                                        "SPII",
                                                        "LANGUAGE",
                                                        "IMAGE_SAFETY",
                                                        "IMAGE_PROHIBITED_CONTENT",
                                                        "IMAGE_RECITATION"};
    if (filtered.count(reason) != 0) return FinishReason::content_filter;
    return FinishReason::error;  // MALFORMED_FUNCTION_CALL, OTHER, and reasons added later
}

bool has_token_counts(const json& usage) {
    static constexpr std::string_view keys[] = {"promptTokenCount", "candidatesTokenCount",
                                                "thoughtsTokenCount", "cachedContentTokenCount",
                                                "toolUsePromptTokenCount"};
    if (!usage.is_object()) return false;
    return std::any_of(std::begin(keys), std::end(keys), [&](std::string_view key) {
        const auto it = usage.find(key);
        return it != usage.end() && it->is_number();
    });
}

Usage decode_usage(const json& usage) {
    Usage out;
    out.input_tokens = detail::saturating_add(count_field(usage, "promptTokenCount"),
                                              count_field(usage, "toolUsePromptTokenCount"));
    out.cached_read_tokens = count_field(usage, "cachedContentTokenCount");
    out.reasoning_tokens = count_field(usage, "thoughtsTokenCount");
    out.output_tokens =
        detail::saturating_add(count_field(usage, "candidatesTokenCount"), out.reasoning_tokens);
    return out;
}

}  // namespace

void ResponseReader::read(const json& chunk, bool whole, const EventSink& sink) {
    if (!chunk.is_object()) {
        throw_invalid_response(whole ? "the response body is not a JSON object"
                                     : "a stream chunk is not a JSON object",
                               origin());
    }
    if (const json* error = error_of(chunk)) {
        throw_provider_failure(failure_from_error(*error, 200, nullptr), origin());
    }
    const auto candidates = chunk.find("candidates");
    const auto feedback = chunk.find("promptFeedback");
    const auto usage = chunk.find("usageMetadata");
    const bool has_candidates = candidates != chunk.end() && candidates->is_array();
    const bool has_feedback = feedback != chunk.end() && feedback->is_object();
    const bool has_usage = usage != chunk.end() && usage->is_object();
    if (candidates != chunk.end() && !has_candidates && !candidates->is_null()) {
        throw_invalid_response("\"candidates\" is not an array", origin());
    }
    if (whole ? !((has_candidates && !candidates->empty()) || has_feedback)
              : !(has_candidates || has_feedback || has_usage)) {
        throw_invalid_response(
            std::string(whole ? "the response body" : "a stream chunk") +
                " is not a Gemini GenerateContentResponse (no candidates, promptFeedback or "
                "usageMetadata)",
            origin());
    }
    if (const auto id = string_field(chunk, "responseId"); !id.empty()) {
        if (origin_.request_id.empty()) origin_.request_id = id;
        assembler_.set_response_id(id);
    }
    if (const auto version = string_field(chunk, "modelVersion"); !version.empty())
        builder_.set_model(version);

    if (has_feedback) {
        if (const auto reason = string_field(*feedback, "blockReason"); !reason.empty()) {
            builder_.set_finish(FinishReason::content_filter, reason);
        }
    }
    if (has_candidates) {
        for (const auto& candidate : *candidates) {
            if (!candidate.is_object() || count_field(candidate, "index") != 0) continue;
            read_candidate(candidate, sink);
            break;
        }
    }
    if (has_usage && has_token_counts(*usage)) {
        const Usage next = decode_usage(*usage);
        if (!(next == builder_.usage())) {
            builder_.usage() = next;
            StreamEvent update;
            update.type = StreamEvent::Type::usage_update;
            update.usage = next;
            sink.push(std::move(update));
        }
    }
}

ChatResponse ResponseReader::build() {
    detail::ResponseBuilder builder = builder_;
    for (const auto& part : assembler_.parts()) {
        if (const auto* text = std::get_if<TextPart>(&part)) builder.add_text(text->text);
        if (const auto* reasoning = std::get_if<ReasoningPart>(&part))
            builder.add_reasoning(reasoning->text);
        if (const auto* call = std::get_if<ToolCallPart>(&part)) builder.add_tool_call(*call);
    }
    if (builder.model().empty()) builder.set_model(model_);
    builder.set_request_id(origin_.request_id);
    if (auto data = assembler_.replay_data()) {
        builder.set_replay(ReplayState{provider_, model_, std::move(*data)});
    }
    ChatResponse response = std::move(builder).build(provider_);
    // Text pieces separated by a part with no canonical form stay separate parts.
    response.message.parts = assembler_.parts();
    return response;
}

void ResponseReader::read_candidate(const json& candidate, const EventSink& sink) {
    if (const auto content = candidate.find("content");
        content != candidate.end() && content->is_object()) {
        if (const auto parts = content->find("parts");
            parts != content->end() && parts->is_array()) {
            for (const auto& part : *parts) assembler_.add(part, sink);
        }
    }
    if (const auto reason = string_field(candidate, "finishReason"); !reason.empty()) {
        assembler_.close_call(sink);
        builder_.set_finish(map_finish(reason), reason);
    }
}

}  // namespace ullm::detail::gemini
