#include "openai_responses_internal.hpp"

#include <ullm/detail/json_checks.hpp>

#include <utility>
#include <variant>

#include "../json_readers.hpp"
#include "../response_builder.hpp"

namespace ullm::detail::openai_responses {

DecodeContext context_for(std::string_view provider, const ChatRequest& request) {
    DecodeContext context{std::string(provider), request.model, {}, false};
    for (const auto& tool : request.tools) context.declared_tools.insert(tool.name);
    if (const auto it = request.provider_options.find("background");
        request.provider_options.is_object() && it != request.provider_options.end()) {
        context.background = it->is_boolean() && it->get<bool>();
    }
    return context;
}

bool is_parallel_wrapper(const DecodeContext& context, std::string_view name) {
    return (name == "parallel" || name == "multi_tool_use.parallel") &&
           context.declared_tools.find(name) == context.declared_tools.end();
}

namespace {

// Some models wrap parallel calls into one call of an undeclared `parallel` function with
// `{"tool_uses":[{"recipient_name":"functions.NAME","parameters":{…}}, …]}`. Unwrapped, they
// become one call each, with ids derived from the wrapper's. Empty when `arguments` is not
// such a wrapper.
std::vector<ToolCallPart> unwrap_parallel(const std::string& call_id, std::string_view arguments) {
    const json value = detail::parse_json_exact(arguments);
    const json* uses = array_field(value, "tool_uses");
    if (uses == nullptr || uses->empty()) return {};
    std::vector<ToolCallPart> calls;
    for (const auto& use : *uses) {
        std::string name = string_field(use, "recipient_name");
        if (name.starts_with("functions.")) name.erase(0, 10);
        if (name.empty()) return {};
        json parameters = json::object();
        if (const auto it = use.find("parameters"); it != use.end()) {
            if (!it->is_object()) return {};
            parameters = *it;
        }
        calls.push_back(
            {call_id + "_" + std::to_string(calls.size()), std::move(name), std::move(parameters)});
    }
    return calls;
}

}  // namespace

std::string call_id_of(const json& item, std::int64_t index) {
    std::string id = string_field(item, "call_id");
    if (id.empty()) id = string_field(item, "id");
    if (id.empty()) id = "call_" + std::to_string(index);
    return id;
}

std::string arguments_of(const json& item) {
    const auto it = item.find("arguments");
    if (it == item.end() || it->is_null()) return {};
    return it->is_string() ? it->get<std::string>() : it->dump();
}

ItemCalls calls_of(const DecodeContext& context, const json& item, std::int64_t index) {
    const std::string id = call_id_of(item, index);
    const std::string name = string_field(item, "name");
    const std::string arguments = arguments_of(item);
    if (is_parallel_wrapper(context, name)) {
        auto unwrapped = unwrap_parallel(id, arguments);
        if (!unwrapped.empty()) return {std::move(unwrapped), true};
    }
    return {{{id, name, detail::parse_tool_arguments(arguments)}}, false};
}

namespace {

// The texts of a reasoning item the model chose to show, in order: summary parts, then
// reasoning_text content parts (open-weight models, LM Studio, DeepSeek).
std::vector<std::string> visible_reasoning(const json& item) {
    std::vector<std::string> texts;
    if (const json* summary = array_field(item, "summary")) {
        for (const auto& part : *summary) texts.push_back(string_field(part, "text"));
    }
    if (const json* content = array_field(item, "content")) {
        for (const auto& part : *content) {
            if (string_field(part, "type") == "reasoning_text")
                texts.push_back(string_field(part, "text"));
        }
    }
    return texts;
}

// Appends the canonical parts of `output` (the response's output items, in order) to
// `builder` and attaches the replay sidecar. Returns the number of tool calls.
std::size_t assemble_output(const json& output, const DecodeContext& context,
                            detail::ResponseBuilder& builder) {
    bool reasoning_open = false;
    bool needs_replay = false;
    std::size_t tool_calls = 0;
    json replay = json::array();
    std::int64_t index = -1;
    for (const auto& item : output) {
        ++index;
        if (!item.is_object()) continue;
        const std::string type = string_field(item, "type");
        if (type == "reasoning") {
            for (const auto& text : visible_reasoning(item)) {
                if (text.empty()) continue;
                if (reasoning_open) builder.add_reasoning(reasoning_separator);
                builder.add_reasoning(text);
                reasoning_open = true;
            }
            const std::string id = string_field(item, "id");
            const std::string encrypted = string_field(item, "encrypted_content");
            // Without encrypted content a stateless request cannot carry a reasoning item
            // (the API would look its id up and fail), so only encrypted ones are replayed.
            if (!id.empty() && !encrypted.empty()) {
                const json* summary = array_field(item, "summary");
                replay.push_back({{"type", "reasoning"},
                                  {"id", id},
                                  {"summary", summary != nullptr ? *summary : json::array()},
                                  {"encrypted_content", encrypted}});
            }
        } else if (type == "message") {
            json content = json::array();
            if (const json* parts = array_field(item, "content")) {
                for (const auto& part : *parts) {
                    const std::string part_type = string_field(part, "type");
                    if (part_type == "output_text") {
                        const std::string text = string_field(part, "text");
                        builder.add_text(text);
                        if (!text.empty()) reasoning_open = false;
                        const json* annotations = array_field(part, "annotations");
                        // Log probabilities are left out: the model does not need them back.
                        content.push_back(
                            {{"type", "output_text"},
                             {"text", text},
                             {"annotations", annotations != nullptr ? *annotations : json::array()},
                             {"logprobs", json::array()}});
                    } else if (part_type == "refusal") {
                        const std::string refusal = string_field(part, "refusal");
                        builder.add_refusal(refusal);
                        content.push_back({{"type", "refusal"}, {"refusal", refusal}});
                    }
                }
            }
            json entry = {{"type", "message"},
                          {"role", "assistant"},
                          {"status", "completed"},
                          {"content", std::move(content)}};
            if (const std::string id = string_field(item, "id"); !id.empty()) entry["id"] = id;
            if (const std::string phase = string_field(item, "phase"); !phase.empty()) {
                entry["phase"] = phase;
                needs_replay = true;
            }
            replay.push_back(std::move(entry));
        } else if (type == "function_call") {
            const auto [calls, unwrapped] = calls_of(context, item, index);
            for (const auto& call : calls) {
                builder.add_tool_call(call);
                json entry = {
                    {"type", "function_call"},
                    {"call_id", call.id},
                    {"name", call.name},
                    {"arguments", unwrapped ? arguments_text(call.arguments) : arguments_of(item)}};
                if (const std::string id = string_field(item, "id"); !id.empty() && !unwrapped)
                    entry["id"] = id;
                replay.push_back(std::move(entry));
            }
            tool_calls += calls.size();
            reasoning_open = false;
        }
        // Other items (hosted tool calls, custom tools, compaction, …) belong to tools ullm
        // does not advertise; they are neither shown nor replayed.
    }
    // A reasoning item must be followed by the item it led to; trailing ones (an incomplete
    // turn) cannot be replayed.
    while (!replay.empty() && string_field(replay.back(), "type") == "reasoning") {
        replay.erase(replay.size() - 1);
    }
    for (const auto& item : replay) {
        needs_replay = needs_replay || string_field(item, "type") == "reasoning";
    }
    if (needs_replay) {
        builder.set_replay({context.provider, context.model, {{"items", std::move(replay)}}});
    }
    return tool_calls;
}

Usage decode_usage(const json& usage) {
    Usage out;
    if (!usage.is_object()) return out;
    out.input_tokens = count_field(usage, "input_tokens");
    out.output_tokens = count_field(usage, "output_tokens");
    if (const json* details = object_field(usage, "input_tokens_details")) {
        out.cached_read_tokens = count_field(*details, "cached_tokens");
        out.cached_write_tokens = count_field(*details, "cache_write_tokens");
    }
    if (const json* details = object_field(usage, "output_tokens_details")) {
        out.reasoning_tokens = count_field(*details, "reasoning_tokens");
    }
    // Canonical output includes reasoning; a larger reasoning count means a server left it out.
    if (out.reasoning_tokens > out.output_tokens) out.output_tokens += out.reasoning_tokens;
    return out;
}

// Sets the finish reason from the response's status (`fallback` when it has none).
void apply_status(const json& response, std::string_view fallback, std::size_t tool_calls,
                  detail::ResponseBuilder& builder) {
    std::string status = string_field(response, "status");
    if (status.empty()) status = std::string(fallback);
    if (status == "incomplete") {
        std::string reason;
        if (const json* details = object_field(response, "incomplete_details")) {
            reason = string_field(*details, "reason");
        }
        FinishReason finish = FinishReason::error;
        if (reason == "max_output_tokens") {
            finish = FinishReason::length;
        } else if (reason == "content_filter") {
            finish = FinishReason::content_filter;
        } else if (tool_calls > 0) {
            // Cut short for another reason after complete calls: they can still run.
            finish = FinishReason::tool_call;
        }
        builder.set_finish(finish, reason.empty() ? status : reason);
    } else if (status == "cancelled") {
        builder.set_finish(FinishReason::error, status);
    } else {
        builder.set_finish(FinishReason::stop, status);
    }
}

}  // namespace

ChatResponse interpret(const json& response, const json& output, const DecodeContext& context,
                       std::string_view fallback_status, const std::string& request_id) {
    detail::ResponseBuilder builder;
    const std::size_t tool_calls = assemble_output(output, context, builder);
    apply_status(response, fallback_status, tool_calls, builder);
    if (const json* usage = object_field(response, "usage")) builder.usage() = decode_usage(*usage);
    builder.set_model(string_field(response, "model"));
    builder.set_request_id(request_id.empty() ? string_field(response, "id") : request_id);
    ChatResponse decoded = std::move(builder).build(context.provider);
    decoded.response_id = string_field(response, "id");
    if (string_field(response, "status") == "cancelled") decoded.status = ResponseStatus::cancelled;
    return decoded;
}

// A background response that has not finished: no content (what a running response holds is
// not final), zero usage, and the id to poll it by.
ChatResponse unfinished(const json& response, const std::string& status,
                        const DecodeContext& context, const ErrorOrigin& origin) {
    const std::string id = string_field(response, "id");
    if (id.empty()) {
        throw_invalid_response("the response is " + status + " but has no id to poll it by",
                               origin);
    }
    detail::ResponseBuilder builder;
    builder.set_finish(FinishReason::stop, status);
    builder.set_model(string_field(response, "model"));
    builder.set_request_id(origin.request_id.empty() ? id : origin.request_id);
    ChatResponse decoded = std::move(builder).build(context.provider);
    decoded.status = status == "queued" ? ResponseStatus::queued : ResponseStatus::in_progress;
    decoded.response_id = id;
    return decoded;
}

}  // namespace ullm::detail::openai_responses
