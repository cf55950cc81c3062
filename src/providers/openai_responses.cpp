#include <ullm/providers/openai_responses.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "openai_common.hpp"
#include "json_readers.hpp"
#include "request_checks.hpp"
#include "response_builder.hpp"

namespace ullm {

namespace {

using detail::count_field;
using detail::data_url;
using detail::is_openai_reasoning_model;
using detail::string_field;

// Visible reasoning pieces (summary parts, reasoning_text parts) that follow each other in
// one canonical reasoning part are separated by a blank line, in bodies and streams alike.
constexpr std::string_view reasoning_separator = "\n\n";

const json* array_field(const json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    const auto it = object.find(key);
    return it != object.end() && it->is_array() ? &*it : nullptr;
}

const json* object_field(const json& object, std::string_view key) {
    if (!object.is_object()) return nullptr;
    const auto it = object.find(key);
    return it != object.end() && it->is_object() ? &*it : nullptr;
}

// ---------------------------------------------------------------------------------------
// Encoding

json encode_user_content(const Message& message) {
    json content = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            content.push_back({{"type", "input_text"}, {"text", text->text}});
        } else if (const auto* image = std::get_if<ImagePart>(&part)) {
            content.push_back(
                {{"type", "input_image"},
                 {"image_url",
                  image->url.empty() ? data_url(image->media_type, image->data) : image->url},
                 {"detail", "auto"}});
        } else if (const auto* document = std::get_if<DocumentPart>(&part)) {
            json file = {{"type", "input_file"}};
            if (document->data.empty()) {
                file["file_url"] = document->url;
                if (!document->name.empty()) file["filename"] = document->name;
            } else {
                // Inline files need a name; the API infers the type from it.
                file["filename"] =
                    document->name.empty() ? std::string("document") : document->name;
                file["file_data"] = data_url(document->media_type, document->data);
            }
            content.push_back(std::move(file));
        }
    }
    return content;
}

std::string arguments_text(const json& arguments) {
    return arguments.is_string() ? arguments.get<std::string>() : arguments.dump();
}

std::string tool_output_text(const ToolResultPart& result) {
    return result.result.is_string() ? result.result.get<std::string>() : result.result.dump();
}

// Whether the replayed `items` still describe `message`: the same text and the same tool
// calls in the same order. A message edited since (by the caller or a context manager) is
// sent in canonical form, without its reasoning.
bool replay_matches(const json& items, const Message& message) {
    const std::vector<ToolCallPart> calls = message.tool_calls();
    std::size_t next_call = 0;
    std::string text;
    for (const auto& item : items) {
        if (!item.is_object()) return false;
        const std::string type = string_field(item, "type");
        if (type == "reasoning") {
            if (string_field(item, "id").empty() ||
                string_field(item, "encrypted_content").empty() ||
                array_field(item, "summary") == nullptr) {
                return false;
            }
        } else if (type == "message") {
            const json* content = array_field(item, "content");
            if (content == nullptr) return false;
            for (const auto& part : *content) {
                if (!part.is_object()) return false;
                if (string_field(part, "type") == "output_text") text += string_field(part, "text");
            }
        } else if (type == "function_call") {
            if (next_call >= calls.size()) return false;
            const auto arguments = item.find("arguments");
            if (arguments == item.end() || !arguments->is_string()) return false;
            const ToolCallPart& call = calls[next_call++];
            if (call.id != string_field(item, "call_id") ||
                call.name != string_field(item, "name") ||
                call.arguments != detail::parse_tool_arguments(arguments->get<std::string>())) {
                return false;
            }
        } else {
            return false;
        }
    }
    return next_call == calls.size() && text == message.text();
}

// The replayed output items of `message` when they are bound to this provider and model and
// still match the message; nullptr otherwise.
const json* usable_replay(const Message& message, std::string_view provider,
                          const std::string& model) {
    if (!message.replay || message.replay->provider != provider || message.replay->model != model)
        return nullptr;
    const json* items = array_field(message.replay->data, "items");
    if (items == nullptr || !replay_matches(*items, message)) return nullptr;
    return items;
}

void encode_assistant(const Message& message, std::string_view provider, const std::string& model,
                      json& input) {
    if (const json* items = usable_replay(message, provider, model)) {
        for (const auto& item : *items) input.push_back(item);
        return;
    }
    // Canonical form: text as an assistant message (string content, which the spec's
    // EasyInputMessage allows without an item id), tool calls as function_call items.
    // Visible reasoning is not sent: without its encrypted original it means nothing to the
    // API.
    std::string text;
    const auto flush = [&] {
        if (text.empty()) return;
        input.push_back({{"type", "message"}, {"role", "assistant"}, {"content", text}});
        text.clear();
    };
    for (const auto& part : message.parts) {
        if (const auto* piece = std::get_if<TextPart>(&part)) {
            text += piece->text;
        } else if (const auto* call = std::get_if<ToolCallPart>(&part)) {
            flush();
            input.push_back({{"type", "function_call"},
                             {"call_id", call->id},
                             {"name", call->name},
                             {"arguments", arguments_text(call->arguments)}});
        }
    }
    flush();
}

void encode_message(const Message& message, std::string_view provider, const std::string& model,
                    json& input) {
    switch (message.role) {
        case Role::system:
            input.push_back({{"type", "message"}, {"role", "system"}, {"content", message.text()}});
            return;
        case Role::user:
            input.push_back(
                {{"type", "message"}, {"role", "user"}, {"content", encode_user_content(message)}});
            return;
        case Role::assistant:
            encode_assistant(message, provider, model, input);
            return;
        case Role::tool:
            for (const auto& result : message.tool_results()) {
                input.push_back({{"type", "function_call_output"},
                                 {"call_id", result.tool_call_id},
                                 {"output", tool_output_text(result)}});
            }
            return;
    }
}

// ---------------------------------------------------------------------------------------
// Decoding

struct DecodeContext {
    std::string provider;
    std::string model;  // the request's model: replay is bound to what the caller sends
    std::set<std::string, std::less<>> declared_tools;
    bool background = false;  // the request asked for `background: true`
};

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

// The tool calls one function_call item stands for: itself, or the calls of a parallel
// wrapper (`unwrapped`).
struct ItemCalls {
    std::vector<ToolCallPart> calls;
    bool unwrapped = false;
};

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

ChatResponse interpret(const json& response, const json& output, const DecodeContext& context,
                       std::string_view fallback_status, const std::string& request_id) {
    detail::ResponseBuilder builder;
    const std::size_t tool_calls = assemble_output(output, context, builder);
    apply_status(response, fallback_status, tool_calls, builder);
    if (const json* usage = object_field(response, "usage")) builder.usage() = decode_usage(*usage);
    builder.set_model(string_field(response, "model"));
    builder.set_request_id(request_id.empty() ? string_field(response, "id") : request_id);
    ChatResponse decoded = builder.build(context.provider);
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
    ChatResponse decoded = builder.build(context.provider);
    decoded.status = status == "queued" ? ResponseStatus::queued : ResponseStatus::in_progress;
    decoded.response_id = id;
    return decoded;
}

// The HTTP status an error code or type carried inside a 200 body or stream stands for.
int status_for(const std::string& code, const std::string& type) {
    const auto is = [&](std::string_view value) { return code == value || type == value; };
    if (is("rate_limit_exceeded") || is("insufficient_quota") || is("rate_limit_error") ||
        is("requests") || is("tokens")) {
        return 429;
    }
    if (is("invalid_api_key") || is("authentication_error")) return 401;
    if (is("permission_denied") || is("permission_error")) return 403;
    if (code.find("overloaded") != std::string::npos ||
        type.find("overloaded") != std::string::npos) {
        return 529;
    }
    if ((code.empty() && type.empty()) || is("server_error") || is("internal_error") ||
        is("api_error") || is("vector_store_timeout")) {
        return 500;
    }
    return 400;
}

// Reads an error: `{"error": {code, message, type}}`, `{"error": "text"}`, an error object, or
// an `error` stream event with the fields at its top level. `status` 0 derives the status
// from the code, for errors inside a 200 body or stream.
ProviderFailure failure_from(const json& value, int status) {
    ProviderFailure failure;
    const json* error = &value;
    bool nested = false;
    if (value.is_object()) {
        if (const auto it = value.find("error"); it != value.end()) {
            if (it->is_object()) {
                error = &*it;
                nested = true;
            } else if (it->is_string()) {
                failure.message = it->get<std::string>();
            }
        }
    }
    if (failure.message.empty()) failure.message = string_field(*error, "message");
    // At the top level of an `error` event, `type` names the event, not the error.
    if (nested || string_field(value, "type") != "error")
        failure.type = string_field(*error, "type");
    if (error->is_object()) {
        if (const auto code = error->find("code"); code != error->end()) {
            if (code->is_string()) {
                failure.code = code->get<std::string>();
            } else if (code->is_number_integer()) {
                failure.code = std::to_string(code->get<std::int64_t>());
            }
        }
    }
    failure.status = status != 0 ? status : status_for(failure.code, failure.type);
    if (failure.message.empty() && status == 0) failure.message = "the response failed";
    return failure;
}

// ---------------------------------------------------------------------------------------
// Streaming

// Appends `text` to the string `object[key]` in place (a string in place of anything else), so
// that long streams cost linear time.
void append_text(json& object, const char* key, std::string_view text) {
    json& value = object[key];
    if (!value.is_string()) value = std::string();
    value.get_ref<std::string&>().append(text);
}

// No response has this many output items; a larger `output_index` is hostile or broken.
constexpr std::int64_t max_output_index = std::int64_t{1} << 16;

// Beyond any stream's length, and exact in every JSON reader (2^53).
constexpr std::int64_t max_sequence_number = std::int64_t{1} << 53;

// A function_call item as it streams.
struct PendingCall {
    std::string id;
    std::string name;
    std::string streamed;   // argument text already sent as deltas
    bool deferred = false;  // a parallel wrapper: events wait for the complete item
    bool started = false;
    bool ended = false;
};

class ResponsesStreamDecoder final : public StreamDecoder {
public:
    explicit ResponsesStreamDecoder(DecodeContext context)
        : context_(std::move(context)), background_(context_.background) {}

    // A decoder that joins a background stream after event `from.sequence_number`.
    ResponsesStreamDecoder(DecodeContext context, const StreamPosition& from)
        : context_(std::move(context)),
          response_id_(from.response_id),
          last_sequence_(from.sequence_number),
          background_(true),
          resumed_(true),
          joined_late_(true) {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        if (finished_ || failed_) return;
        try {
            parser_.feed(bytes, [&](SseEvent&& event) { on_event(event, out); });
        } catch (...) {
            // An error is reported once; the rest of the stream means nothing after it.
            failed_ = true;
            throw;
        }
    }

    void finish(std::vector<StreamEvent>& /*out*/) override {
        if (finished_ || failed_) return;
        failed_ = true;
        const auto end = parser_.finish();
        throw StreamTruncatedError(end.clean() ? "the stream ended before response.completed"
                                               : "the stream ended in the middle of an event",
                                   origin());
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_.any(); }

    [[nodiscard]] std::optional<StreamPosition> resume_position() const override {
        // Without a sequence number on every event, a resumed stream could repeat some.
        if (!background_ || response_id_.empty() || unnumbered_ || finished_) return std::nullopt;
        if (last_sequence_ < 0 && !joined_late_) return std::nullopt;
        return StreamPosition{response_id_, last_sequence_};
    }

    bool prepare_resume() override {
        if (!resume_position()) return false;
        // The broken body's partial event is dropped: the resumed body sends it again whole.
        (void)parser_.finish();
        failed_ = false;
        resumed_ = true;
        return true;
    }

private:
    [[nodiscard]] ErrorOrigin origin() const {
        return {context_.provider, context_.model, response_id_};
    }

    void on_event(const SseEvent& event, std::vector<StreamEvent>& out) {
        if (finished_) return;
        if (event.data == "[DONE]") return;  // some compatible servers close with it
        const json payload = parse_provider_json(event.data, origin(), "a stream event");
        if (!payload.is_object())
            throw_invalid_response("a stream event is not a JSON object", origin());
        std::string type = string_field(payload, "type");
        if (type.empty() && event.event != "message") type = event.event;
        if (type.empty()) {
            throw_invalid_response("a stream event has no type; this is not a Responses API stream",
                                   origin());
        }
        const std::optional<std::int64_t> sequence = sequence_of(payload);
        if (!sequence) {
            unnumbered_ = true;
        } else if (resumed_ && *sequence <= last_sequence_) {
            return;  // seen before the stream was resumed
        }
        const std::size_t first = out.size();
        dispatch(payload, type, out);
        if (sequence) {
            last_sequence_ = *sequence;
            for (std::size_t i = first; i < out.size(); ++i) out[i].sequence_number = sequence;
        }
    }

    // An event's `sequence_number`, when it has a usable one.
    [[nodiscard]] std::optional<std::int64_t> sequence_of(const json& payload) const {
        const auto it = payload.find("sequence_number");
        if (it == payload.end() || !it->is_number_integer()) return std::nullopt;
        if (it->is_number_unsigned()
                ? it->get<std::uint64_t>() > static_cast<std::uint64_t>(max_sequence_number)
                : it->get<std::int64_t>() < 0) {
            throw_invalid_response(
                "a stream event's sequence_number " + it->dump() + " is out of range", origin());
        }
        return it->get<std::int64_t>();
    }

    void dispatch(const json& payload, const std::string& type, std::vector<StreamEvent>& out) {
        if (type == "response.created" || type == "response.in_progress" ||
            type == "response.queued") {
            if (const json* response = object_field(payload, "response")) {
                if (response_id_.empty()) response_id_ = string_field(*response, "id");
                if (const auto model = string_field(*response, "model"); !model.empty())
                    response_model_ = model;
                if (const auto it = response->find("background");
                    it != response->end() && it->is_boolean() && it->get<bool>()) {
                    background_ = true;
                }
            }
        } else if (type == "response.output_item.added") {
            on_item_added(payload, out);
        } else if (type == "response.output_item.done") {
            on_item_done(payload, out);
        } else if (type == "response.content_part.added") {
            if (const json* part = object_field(payload, "part")) {
                const std::int64_t index = index_of(payload);
                slot(content_of(index), payload, "content_index") = *part;
                whole_parts_.insert(std::to_string(index) + '/' + string_field(*part, "type") +
                                    '/' + std::to_string(count_field(payload, "content_index")));
            }
        } else if (type == "response.output_text.delta") {
            on_text_delta(payload, "output_text", "text", out);
        } else if (type == "response.output_text.done") {
            on_text_done(payload, "output_text", "text", out);
        } else if (type == "response.refusal.delta") {
            on_text_delta(payload, "refusal", "refusal", out);
        } else if (type == "response.refusal.done") {
            on_text_done(payload, "refusal", "refusal", out);
        } else if (type == "response.reasoning_text.delta") {
            on_text_delta(payload, "reasoning_text", "text", out);
        } else if (type == "response.reasoning_text.done") {
            on_text_done(payload, "reasoning_text", "text", out);
        } else if (type == "response.reasoning_summary_part.added") {
            if (const json* part = object_field(payload, "part")) {
                const std::int64_t index = index_of(payload);
                slot(summary_of(index), payload, "summary_index") = *part;
                whole_parts_.insert(std::to_string(index) + "/summary_text/" +
                                    std::to_string(count_field(payload, "summary_index")));
            }
        } else if (type == "response.reasoning_summary_text.delta") {
            on_text_delta(payload, "summary_text", "text", out);
        } else if (type == "response.reasoning_summary_text.done") {
            on_text_done(payload, "summary_text", "text", out);
        } else if (type == "response.function_call_arguments.delta") {
            on_arguments(payload, string_field(payload, "delta"), false, out);
        } else if (type == "response.function_call_arguments.done") {
            on_arguments(payload, string_field(payload, "arguments"), true, out);
        } else if (type == "response.completed" || type == "response.incomplete") {
            complete(payload, type == "response.incomplete" ? "incomplete" : "completed", out);
        } else if (type == "response.cancelled") {
            const json* response = object_field(payload, "response");
            throw_cancelled_response(
                response != nullptr ? string_field(*response, "id") : response_id_, origin());
        } else if (type == "response.failed") {
            const json* response = object_field(payload, "response");
            const json* error = response != nullptr ? object_field(*response, "error") : nullptr;
            throw_provider_failure(failure_from(error != nullptr ? *error : json::object(), 0),
                                   origin());
        } else if (type == "error") {
            throw_provider_failure(failure_from(payload, 0), origin());
        }
        // Anything else (hosted tool progress, annotations, …) carries nothing canonical.
    }

    // The output index an event refers to: its `output_index`, else the index of its
    // `item_id`, else the next free one.
    std::int64_t index_of(const json& payload) {
        std::int64_t index = -1;
        if (const auto it = payload.find("output_index");
            it != payload.end() && it->is_number_integer()) {
            if (it->is_number_unsigned()
                    ? it->get<std::uint64_t>() > static_cast<std::uint64_t>(max_output_index)
                    : it->get<std::int64_t>() > max_output_index) {
                throw_invalid_response("a stream event's output_index " + it->dump() +
                                           " is beyond any response's output",
                                       origin());
            }
            index = it->get<std::int64_t>();
        }
        std::string id = string_field(payload, "item_id");
        if (const json* item = object_field(payload, "item"); id.empty() && item != nullptr) {
            id = string_field(*item, "id");
        }
        if (index < 0 && !id.empty()) {
            if (const auto known = index_by_id_.find(id); known != index_by_id_.end())
                index = known->second;
        }
        if (index < 0) index = next_index_;
        if (!id.empty()) index_by_id_.emplace(id, index);
        next_index_ = std::max(next_index_, index + 1);
        return index;
    }

    json& item_at(std::int64_t index, std::string_view default_type) {
        json& item = items_[index];
        if (!item.is_object()) item = {{"type", default_type}};
        return item;
    }

    json& content_of(std::int64_t index) {
        json& item = item_at(index, "message");
        if (!item["content"].is_array()) item["content"] = json::array();
        return item["content"];
    }

    json& summary_of(std::int64_t index) {
        json& item = item_at(index, "reasoning");
        if (!item["summary"].is_array()) item["summary"] = json::array();
        return item["summary"];
    }

    // The element `payload[key]` of `array`, created when missing.
    static json& slot(json& array, const json& payload, std::string_view key) {
        const auto position = static_cast<std::size_t>(std::min<std::int64_t>(
            count_field(payload, key), static_cast<std::int64_t>(array.size())));
        while (array.size() <= position) array.push_back(json::object());
        return array[position];
    }

    // The part a text event writes to, typed `part_type`, with its output index and key.
    json& part_for(const json& payload, std::string_view part_type, std::int64_t& index,
                   std::string& key) {
        index = index_of(payload);
        const bool summary = part_type == "summary_text";
        std::string_view position_key = summary ? "summary_index" : "content_index";
        json& list = summary ? summary_of(index) : content_of(index);
        json& part = slot(list, payload, position_key);
        if (!part.contains("type")) part["type"] = part_type;
        key = std::to_string(index) + '/' + std::string(part_type) + '/' +
              std::to_string(count_field(payload, position_key));
        return part;
    }

    void on_text_delta(const json& payload, std::string_view part_type, const char* field,
                       std::vector<StreamEvent>& out) {
        std::int64_t index = 0;
        std::string key;
        json& part = part_for(payload, part_type, index, key);
        const std::string delta = string_field(payload, "delta");
        append_text(part, field, delta);
        emit(part_type, key, delta, out);
    }

    void on_text_done(const json& payload, std::string_view part_type, const char* field,
                      std::vector<StreamEvent>& out) {
        std::int64_t index = 0;
        std::string key;
        json& part = part_for(payload, part_type, index, key);
        const std::string text = string_field(payload, field);
        part[field] = text;
        catch_up(part_type, index, key, text, out);
    }

    // Sends new text of one part as a text or reasoning delta (refusals have no event).
    void emit(std::string_view part_type, const std::string& key, std::string_view delta,
              std::vector<StreamEvent>& out) {
        if (delta.empty()) return;
        streamed_[key] += delta;
        if (part_type == "output_text") {
            reasoning_open_ = false;
            visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, delta));
        } else if (part_type == "summary_text" || part_type == "reasoning_text") {
            std::string text(delta);
            if (reasoning_open_ && key != last_reasoning_key_) {
                text.insert(0, reasoning_separator);
            }
            reasoning_open_ = true;
            last_reasoning_key_ = key;
            visible_.push(out, detail::delta_event(StreamEvent::Type::reasoning_delta, text));
        }
    }

    // Sends what a final text adds to what was streamed (servers that send only `.done`).
    void catch_up(std::string_view part_type, std::int64_t index, const std::string& key,
                  const std::string& text, std::vector<StreamEvent>& out) {
        // A decoder that joined late has not seen how a part begun before it started: what it
        // streamed is not all that was sent, and catching up would repeat text.
        if (joined_late_ && whole_items_.count(index) == 0 && whole_parts_.count(key) == 0) return;
        const std::string& sent = streamed_[key];
        if (text.size() > sent.size() && text.compare(0, sent.size(), sent) == 0) {
            emit(part_type, key, std::string_view(text).substr(sent.size()), out);
        }
    }

    void on_item_added(const json& payload, std::vector<StreamEvent>& out) {
        const json* item = object_field(payload, "item");
        if (item == nullptr) return;
        const std::int64_t index = index_of(payload);
        items_[index] = *item;
        whole_items_.insert(index);
        if (string_field(*item, "type") != "function_call") return;
        PendingCall& call = calls_[index];
        call.id = call_id_of(*item, index);
        call.name = string_field(*item, "name");
        call.deferred = is_parallel_wrapper(context_, call.name);
        if (!call.deferred) start(call, out);
    }

    void on_item_done(const json& payload, std::vector<StreamEvent>& out) {
        const json* item = object_field(payload, "item");
        if (item == nullptr) return;
        const std::int64_t index = index_of(payload);
        items_[index] = *item;
        const std::string type = string_field(*item, "type");
        if (type == "message") {
            if (const json* content = array_field(*item, "content")) {
                for (std::size_t i = 0; i < content->size(); ++i) {
                    const json& part = (*content)[i];
                    const std::string part_type = string_field(part, "type");
                    if (part_type != "output_text") continue;
                    catch_up(part_type, index,
                             std::to_string(index) + "/output_text/" + std::to_string(i),
                             string_field(part, "text"), out);
                }
            }
        } else if (type == "reasoning") {
            for (const std::string part_type : {"summary_text", "reasoning_text"}) {
                const json* list =
                    array_field(*item, part_type == "summary_text" ? "summary" : "content");
                if (list == nullptr) continue;
                for (std::size_t i = 0; i < list->size(); ++i) {
                    const json& part = (*list)[i];
                    if (part_type == "reasoning_text" && string_field(part, "type") != part_type)
                        continue;
                    catch_up(part_type, index,
                             std::to_string(index) + '/' + part_type + '/' + std::to_string(i),
                             string_field(part, "text"), out);
                }
            }
        } else if (type == "function_call") {
            PendingCall& call = calls_[index];
            std::string id = call_id_of(*item, index);
            std::string name = string_field(*item, "name");
            if (call.started && (id != call.id || name != call.name)) {
                // Its end would name a call that never started.
                throw_invalid_response("output item " + std::to_string(index) +
                                           " was done under another call id or name than it "
                                           "was added with",
                                       origin());
            }
            call.id = std::move(id);
            call.name = std::move(name);
            if (call.deferred || is_parallel_wrapper(context_, call.name)) {
                ItemCalls unwrapped = calls_of(context_, *item, index);
                for (auto& part : unwrapped.calls) {
                    PendingCall piece{part.id, part.name, {}, false, false, false};
                    start(piece, out);
                    send_arguments(piece, arguments_text(part.arguments), out);
                    end(piece, std::move(part), out);
                }
                call.ended = true;
                return;
            }
            const std::string arguments = arguments_of(*item);
            start(call, out);
            send_arguments(call, arguments, out);
            end(call, {call.id, call.name, detail::parse_tool_arguments(arguments)}, out);
        }
    }

    void on_arguments(const json& payload, const std::string& text, bool done,
                      std::vector<StreamEvent>& out) {
        const std::int64_t index = index_of(payload);
        if (calls_.count(index) == 0 && joined_late_) {
            // Announced before this decoder joined: its id and name come with the done item,
            // and the call is streamed whole then.
            calls_[index].deferred = true;
        }
        if (calls_.count(index) == 0) {
            // Arguments for a call the stream never announced cannot be given to a tool.
            throw_invalid_response("function call arguments arrived for output item " +
                                       std::to_string(index) + ", which was never added",
                                   origin());
        }
        json& item = item_at(index, "function_call");
        if (done) {
            item["arguments"] = text;
        } else {
            append_text(item, "arguments", text);
        }
        PendingCall& call = calls_[index];
        if (call.id.empty()) call.id = call_id_of(item, index);
        if (call.name.empty()) call.name = string_field(item, "name");
        if (call.deferred || call.ended) return;
        start(call, out);
        if (done) {
            send_arguments(call, text, out);
        } else {
            send_delta(call, text, out);
        }
    }

    void start(PendingCall& call, std::vector<StreamEvent>& out) {
        if (call.started) return;
        call.started = true;
        reasoning_open_ = false;
        // A nameless call, or two calls under one id, could be neither answered nor restored.
        if (call.name.empty()) {
            throw_invalid_response("function call \"" + call.id + "\" has no name", origin());
        }
        if (!started_ids_.insert(call.id).second) {
            throw_invalid_response("two function calls share the call id \"" + call.id + "\"",
                                   origin());
        }
        StreamEvent event;
        event.type = StreamEvent::Type::tool_call_start;
        event.tool_call_id = call.id;
        event.tool_name = call.name;
        visible_.push(out, std::move(event));
    }

    void send_delta(PendingCall& call, std::string_view fragment, std::vector<StreamEvent>& out) {
        if (fragment.empty()) return;
        call.streamed += fragment;
        StreamEvent event = detail::delta_event(StreamEvent::Type::tool_call_delta, fragment);
        event.tool_call_id = call.id;
        event.tool_name = call.name;
        visible_.push(out, std::move(event));
    }

    // Sends the part of the final `arguments` text not streamed yet.
    void send_arguments(PendingCall& call, const std::string& arguments,
                        std::vector<StreamEvent>& out) {
        if (arguments.size() > call.streamed.size() &&
            arguments.compare(0, call.streamed.size(), call.streamed) == 0) {
            send_delta(call, std::string_view(arguments).substr(call.streamed.size()), out);
        }
    }

    void end(PendingCall& call, ToolCallPart part, std::vector<StreamEvent>& out) {
        if (call.ended) return;
        call.ended = true;
        ended_calls_.emplace(part.id, part);
        StreamEvent event;
        event.type = StreamEvent::Type::tool_call_end;
        event.tool_call_id = part.id;
        event.tool_name = part.name;
        event.tool_call = std::move(part);
        visible_.push(out, std::move(event));
    }

    void complete(const json& payload, std::string_view status, std::vector<StreamEvent>& out) {
        finished_ = true;
        const json* response = object_field(payload, "response");
        const json empty = json::object();
        const json& terminal = response != nullptr ? *response : empty;
        // The terminal response is authoritative when it holds the output; some servers send
        // it without (LM Studio) or with an empty list, and then the streamed items stand.
        const json* output = array_field(terminal, "output");
        json streamed = json::array();
        if (output == nullptr || (output->empty() && !items_.empty())) {
            for (const auto& entry : items_) streamed.push_back(entry.second);
            output = &streamed;
        }
        if (response_id_.empty()) response_id_ = string_field(terminal, "id");
        ChatResponse final_response = interpret(terminal, *output, context_, status, response_id_);
        if (final_response.status == ResponseStatus::cancelled) {
            throw_cancelled_response(final_response.response_id, origin());
        }
        if (final_response.response_id.empty()) final_response.response_id = response_id_;
        if (final_response.model.empty()) final_response.model = response_model_;

        // The calls already ended went to the caller as they were: a terminal response that
        // drops one, or gives it another name or arguments, contradicts the stream.
        const auto& calls = final_response.tool_calls;
        std::set<std::string, std::less<>> ids;
        for (const auto& call : calls) {
            if (!ids.insert(call.id).second) {
                throw_invalid_response(
                    "the terminal response holds two tool calls with the id \"" + call.id + "\"",
                    origin());
            }
        }
        for (const auto& ended : ended_calls_) {
            if (std::none_of(calls.begin(), calls.end(), [&](const ToolCallPart& call) {
                    return call.id == ended.first && call == ended.second;
                })) {
                throw_invalid_response("the terminal response does not hold tool call \"" +
                                           ended.first + "\" (" + ended.second.name +
                                           ") as the stream ended it",
                                       origin());
            }
        }
        // Every final tool call has had its start and end events.
        for (const auto& call : calls) {
            if (ended_calls_.count(call.id) != 0) continue;
            PendingCall pending{call.id, call.name, {}, false, started_ids_.count(call.id) != 0,
                                false};
            start(pending, out);
            end(pending, call, out);
        }
        if (object_field(terminal, "usage") != nullptr) {
            StreamEvent update;
            update.type = StreamEvent::Type::usage_update;
            update.usage = final_response.usage;
            visible_.push(out, std::move(update));
        }
        visible_.push(out, detail::done_event(std::move(final_response)));
    }

    DecodeContext context_;
    SseParser parser_;
    detail::VisibleEvents visible_;
    std::map<std::int64_t, json> items_;  // output items by output index, as streamed
    std::map<std::string, std::int64_t, std::less<>> index_by_id_;
    std::int64_t next_index_ = 0;
    std::map<std::string, std::string, std::less<>> streamed_;  // text sent per part
    std::map<std::int64_t, PendingCall> calls_;
    std::set<std::string, std::less<>> started_ids_;
    std::map<std::string, ToolCallPart, std::less<>> ended_calls_;  // by id
    std::string last_reasoning_key_;
    bool reasoning_open_ = false;
    std::string response_id_;
    std::string response_model_;
    std::int64_t last_sequence_ = -1;     // of the last event handled
    bool background_ = false;             // the response runs in the background: resumable
    bool unnumbered_ = false;             // an event came without a sequence number
    bool resumed_ = false;                // events up to `last_sequence_` are skipped
    bool joined_late_ = false;            // the stream's events before `last_sequence_` were unseen
    std::set<std::int64_t> whole_items_;  // items added in this body
    std::set<std::string, std::less<>> whole_parts_;  // parts added in this body
    bool finished_ = false;
    bool failed_ = false;
};

}  // namespace

OpenAiResponsesProvider::OpenAiResponsesProvider(OpenAiResponsesOptions options)
    : options_(std::move(options)) {
    while (!options_.base_url.empty() && options_.base_url.back() == '/')
        options_.base_url.pop_back();
}

std::string_view OpenAiResponsesProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities OpenAiResponsesProvider::capabilities(std::string_view model) const {
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = true;
    capabilities.stop_sequences = false;
    if (is_openai_reasoning_model(model)) {
        capabilities.temperature = false;
        capabilities.top_p = false;
    }
    return capabilities;
}

json OpenAiResponsesProvider::encode_body(const ChatRequest& request, bool stream) const {
    detail::check_request(request, capabilities(request.model), name(), stream);
    if (request.max_tokens && *request.max_tokens < 16) {
        throw ProviderCapabilityError("invalid_max_tokens",
                                      "the Responses API needs max_tokens of at least 16, got " +
                                          std::to_string(*request.max_tokens));
    }
    json body = {{"model", request.model}, {"store", false}};
    if (!request.system.empty()) body["instructions"] = request.system;
    json input = json::array();
    for (const auto& message : request.messages) {
        encode_message(message, name(), request.model, input);
    }
    body["input"] = std::move(input);

    if (!request.tools.empty()) {
        json tools = json::array();
        for (const auto& tool : request.tools) {
            tools.push_back({{"type", "function"},
                             {"name", tool.name},
                             {"description", tool.description},
                             {"parameters", tool.parameters},
                             {"strict", options_.strict_tools}});
        }
        body["tools"] = std::move(tools);
    }
    if (request.tool_choice) {
        body["tool_choice"] = detail::openai_tool_choice(
            *request.tool_choice, json{{"type", "function"}, {"name", request.tool_choice->name}});
    }
    if (request.max_tokens) body["max_output_tokens"] = *request.max_tokens;
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (request.response_format) {
        body["text"] = {{"format",
                         {{"type", "json_schema"},
                          {"name", request.response_format->name},
                          {"schema", request.response_format->schema},
                          {"strict", request.response_format->strict}}}};
    }
    if (options_.include_encrypted_reasoning.value_or(is_openai_reasoning_model(request.model))) {
        body["include"] = json::array({"reasoning.encrypted_content"});
    }
    if (stream) body["stream"] = true;
    for (const auto& [key, value] : request.provider_options.items()) body[key] = value;
    return body;
}

HttpRequest OpenAiResponsesProvider::encode(const ChatRequest& request, bool stream) const {
    return detail::openai_http_request(
        options_.base_url + "/responses", encode_body(request, stream), stream, options_.api_key,
        options_.organization, options_.project, options_.extra_headers, options_.connect_timeout,
        options_.idle_timeout);
}

ChatResponse OpenAiResponsesProvider::decode(const HttpResponse& response,
                                             const ChatRequest& request) const {
    ErrorOrigin origin{std::string(name()), request.model,
                       response.header("x-request-id").value_or("")};
    if (response.status < 200 || response.status > 299) {
        const json body = detail::parse_json_exact(response.body);
        ProviderFailure failure = body.is_object() ? failure_from(body, response.status)
                                                   : ProviderFailure{response.status, "", "",
                                                                     response.body, std::nullopt};
        failure.retry_after = retry_hint(response);
        throw_provider_failure(failure, origin);
    }
    const json body = parse_provider_json(response.body, origin);
    if (!body.is_object()) throw_invalid_response("the response body is not a JSON object", origin);
    if (origin.request_id.empty()) origin.request_id = string_field(body, "id");
    const std::string status = string_field(body, "status");
    const json* error = object_field(body, "error");
    const json* output = array_field(body, "output");
    if (status == "failed" || (error != nullptr && output == nullptr)) {
        throw_provider_failure(failure_from(error != nullptr ? *error : json::object(), 0), origin);
    }
    const DecodeContext context = context_for(name(), request);
    if (status == "in_progress" || status == "queued") {
        return unfinished(body, status, context, origin);
    }
    const json none = json::array();
    if (output == nullptr && status == "cancelled") output = &none;
    if (output == nullptr) {
        throw_invalid_response("the body has no output array; it is not a Responses API response",
                               origin);
    }
    return interpret(body, *output, context, "completed", origin.request_id);
}

std::unique_ptr<StreamDecoder> OpenAiResponsesProvider::stream_decoder(
    const ChatRequest& request) const {
    return std::make_unique<ResponsesStreamDecoder>(context_for(name(), request));
}

namespace {

// Refuses an id that could not be a response's: it becomes a path segment as it is.
void check_response_id(std::string_view id) {
    const bool plain = std::all_of(id.begin(), id.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
    if (id.empty() || id.size() > 256 || !plain) {
        throw ProviderCapabilityError(
            "invalid_response_id",
            "a response id is 1 to 256 ASCII letters, digits, '_' or '-'; got " +
                (id.empty() ? std::string("an empty one")
                            : "\"" + sanitise_provider_message(id, 80) + "\""));
    }
}

}  // namespace

HttpRequest OpenAiResponsesProvider::background_request(const ChatRequest& request,
                                                        std::string_view response_id,
                                                        std::string_view suffix, bool stream,
                                                        std::int64_t starting_after) const {
    check_response_id(response_id);
    std::string url =
        options_.base_url + "/responses/" + std::string(response_id) + std::string(suffix);
    std::string query;
    const auto add = [&query](const std::string& parameter) {
        query += (query.empty() ? "?" : "&") + parameter;
    };
    const bool cancel = !suffix.empty();
    if (!cancel) {
        if (options_.include_encrypted_reasoning.value_or(
                is_openai_reasoning_model(request.model))) {
            add("include%5B%5D=reasoning.encrypted_content");
        }
        if (stream) add("stream=true");
        if (stream && starting_after >= 0) add("starting_after=" + std::to_string(starting_after));
    }
    HttpRequest http = detail::openai_http_request(
        url + query, json::object(), stream, options_.api_key, options_.organization,
        options_.project, options_.extra_headers, options_.connect_timeout, options_.idle_timeout);
    http.body.clear();
    if (!cancel) {
        // A GET has no body to describe.
        http.method = "GET";
        http.headers.erase(
            std::remove_if(http.headers.begin(), http.headers.end(),
                           [](const auto& header) { return header.first == "Content-Type"; }),
            http.headers.end());
    }
    return http;
}

bool OpenAiResponsesProvider::runs_in_background(const ChatRequest& request) const {
    return context_for(name(), request).background;
}

HttpRequest OpenAiResponsesProvider::encode_retrieve(const ChatRequest& request,
                                                     std::string_view response_id) const {
    return background_request(request, response_id, "", false, -1);
}

HttpRequest OpenAiResponsesProvider::encode_cancel(const ChatRequest& request,
                                                   std::string_view response_id) const {
    return background_request(request, response_id, "/cancel", false, -1);
}

HttpRequest OpenAiResponsesProvider::encode_resume(const ChatRequest& request,
                                                   const StreamPosition& from) const {
    return background_request(request, from.response_id, "", true, from.sequence_number);
}

ChatResponse OpenAiResponsesProvider::decode_retrieved(const HttpResponse& response,
                                                       const ChatRequest& request) const {
    return decode(response, request);
}

std::unique_ptr<StreamDecoder> OpenAiResponsesProvider::resumed_stream_decoder(
    const ChatRequest& request, const StreamPosition& from) const {
    check_response_id(from.response_id);
    return std::make_unique<ResponsesStreamDecoder>(context_for(name(), request), from);
}

}  // namespace ullm
