#include <ullm/providers/openai_chat.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/http/sse_parser.hpp>
#include <ullm/providers/provider_errors.hpp>

#include <map>
#include <set>

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

json encode_user_content(const Message& message) {
    bool text_only = true;
    for (const auto& part : message.parts)
        text_only = text_only && std::holds_alternative<TextPart>(part);
    if (text_only) return message.text();
    json content = json::array();
    for (const auto& part : message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            content.push_back({{"type", "text"}, {"text", text->text}});
        } else if (const auto* image = std::get_if<ImagePart>(&part)) {
            content.push_back(
                {{"type", "image_url"},
                 {"image_url",
                  {{"url",
                    image->url.empty() ? data_url(image->media_type, image->data) : image->url}}}});
        } else if (const auto* document = std::get_if<DocumentPart>(&part)) {
            json file = json::object();
            if (!document->name.empty()) file["filename"] = document->name;
            if (document->data.empty()) {
                file["file_url"] = document->url;
            } else {
                file["file_data"] = data_url(document->media_type, document->data);
            }
            content.push_back({{"type", "file"}, {"file", file}});
        }
    }
    return content;
}

std::string tool_result_text(const ToolResultPart& result) {
    return result.result.is_string() ? result.result.get<std::string>() : result.result.dump();
}

void encode_message(const Message& message, json& out) {
    switch (message.role) {
        case Role::system:
            out.push_back({{"role", "system"}, {"content", message.text()}});
            return;
        case Role::user:
            out.push_back({{"role", "user"}, {"content", encode_user_content(message)}});
            return;
        case Role::assistant: {
            json entry = {{"role", "assistant"}};
            const std::string text = message.text();
            entry["content"] = text.empty() ? json(nullptr) : json(text);
            json calls = json::array();
            for (const auto& call : message.tool_calls()) {
                calls.push_back(
                    {{"id", call.id},
                     {"type", "function"},
                     {"function",
                      {{"name", call.name},
                       {"arguments", call.arguments.is_string() ? call.arguments.get<std::string>()
                                                                : call.arguments.dump()}}}});
            }
            if (!calls.empty()) entry["tool_calls"] = std::move(calls);
            out.push_back(std::move(entry));
            return;
        }
        case Role::tool:
            for (const auto& result : message.tool_results()) {
                out.push_back({{"role", "tool"},
                               {"tool_call_id", result.tool_call_id},
                               {"content", tool_result_text(result)}});
            }
            return;
    }
}

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

ProviderFailure failure_from_body(const json& body, int status) {
    ProviderFailure failure;
    failure.status = status;
    const json* error = &body;
    if (const auto it = body.find("error"); it != body.end()) {
        if (it->is_string()) failure.message = it->get<std::string>();
        if (it->is_object()) error = &*it;
    }
    if (failure.message.empty()) failure.message = string_field(*error, "message");
    if (failure.message.empty()) failure.message = string_field(*error, "detail");
    failure.type = string_field(*error, "type");
    if (const auto code = error->find("code"); code != error->end()) {
        if (code->is_string()) {
            failure.code = code->get<std::string>();
        } else if (code->is_number_integer()) {
            const auto number = code->get<std::int64_t>();
            failure.code = std::to_string(number);
            // llama.cpp and routers put the HTTP status here, also inside a 200 stream.
            if (status < 400 && number >= 400 && number <= 599) {
                failure.status = static_cast<int>(number);
            }
        }
    }
    // An error inside a 2xx body or stream that names no status is the provider's fault.
    if (failure.status < 400) failure.status = 502;
    return failure;
}

ErrorOrigin origin_of(std::string_view provider, const std::string& model,
                      const HttpResponseHead* head, std::string request_id = {}) {
    if (head != nullptr && request_id.empty()) {
        request_id = head->header("x-request-id").value_or("");
    }
    return {std::string(provider), model, std::move(request_id)};
}

// Tool calls streamed as fragments keyed by index.
struct PendingCall {
    std::string id;
    std::string name;
    std::string arguments;
    bool started = false;
};

class ChatStreamDecoder final : public StreamDecoder {
public:
    ChatStreamDecoder(std::string provider, std::string model)
        : provider_(std::move(provider)),
          model_(std::move(model)),
          reasoning_apart_(provider_ == "xai") {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        parser_.feed(bytes, [&](SseEvent&& event) { on_event(event, out); });
    }

    void finish(std::vector<StreamEvent>& out) override {
        if (finished_) return;
        const auto end = parser_.finish();
        if (!done_seen_ && !builder_.has_finish()) {
            throw StreamTruncatedError(end.clean() ? "the stream ended before its final chunk"
                                                   : "the stream ended in the middle of an event",
                                       origin_of(provider_, model_, nullptr, response_id_));
        }
        complete(out);
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_.any(); }

private:
    void on_event(const SseEvent& event, std::vector<StreamEvent>& out) {
        if (finished_) return;
        if (event.data == "[DONE]") {
            done_seen_ = true;
            complete(out);
            return;
        }
        const ErrorOrigin origin = origin_of(provider_, model_, nullptr, response_id_);
        const json chunk = parse_provider_json(event.data, origin, "a stream chunk");
        if (!chunk.is_object())
            throw_invalid_response("a stream chunk is not a JSON object", origin);
        if (const auto error = chunk.find("error"); error != chunk.end() && !error->is_null()) {
            throw_provider_failure(failure_from_body(chunk, 200), origin);
        }
        if (response_id_.empty()) response_id_ = string_field(chunk, "id");
        if (const auto model = string_field(chunk, "model"); !model.empty())
            builder_.set_model(model);

        if (const auto choices = chunk.find("choices");
            choices != chunk.end() && choices->is_array()) {
            for (const auto& choice : *choices) on_choice(choice, out);
        }
        // Usage arrives on its own chunk (with `choices` empty or null) or, for some
        // servers, on the last content chunk; Groq also nests it under `x_groq`.
        const json* usage = choice_usage_.is_object() ? &choice_usage_ : nullptr;
        if (const auto it = chunk.find("usage"); it != chunk.end() && it->is_object()) {
            usage = &*it;
        } else if (const auto groq = chunk.find("x_groq");
                   groq != chunk.end() && groq->is_object()) {
            if (const auto it2 = groq->find("usage"); it2 != groq->end() && it2->is_object()) {
                usage = &*it2;
            }
        }
        if (usage != nullptr) {
            builder_.usage() = decode_usage(*usage, reasoning_apart_);
            choice_usage_ = nullptr;
            StreamEvent update;
            update.type = StreamEvent::Type::usage_update;
            update.usage = builder_.usage();
            visible_.push(out, std::move(update));
        }
    }

    void on_choice(const json& choice, std::vector<StreamEvent>& out) {
        // Only the first choice is modelled; n > 1 streams interleave the others.
        if (!choice.is_object() || count_field(choice, "index") != 0) return;
        if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
            std::string text;
            std::string reasoning = decode_reasoning(*delta);
            if (const auto content = delta->find("content"); content != delta->end()) {
                decode_content(*content, text, reasoning);
            }
            if (!reasoning.empty()) {
                builder_.add_reasoning(reasoning);
                visible_.push(out,
                              detail::delta_event(StreamEvent::Type::reasoning_delta, reasoning));
            }
            if (!text.empty()) {
                builder_.add_text(text);
                visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, text));
            }
            builder_.add_refusal(string_field(*delta, "refusal"));
            if (const auto calls = delta->find("tool_calls");
                calls != delta->end() && calls->is_array()) {
                for (const auto& call : *calls) on_tool_call(call, out);
            }
        }
        if (const auto usage = choice.find("usage"); usage != choice.end() && usage->is_object()) {
            choice_usage_ = *usage;  // Moonshot reports usage inside the final choice
        }
        if (const auto reason = choice.find("finish_reason");
            reason != choice.end() && reason->is_string()) {
            builder_.set_finish(map_finish(reason->get<std::string>()), reason->get<std::string>());
        }
    }

    void on_tool_call(const json& call, std::vector<StreamEvent>& out) {
        if (!call.is_object()) return;
        const auto index = count_field(call, "index");
        auto& pending = calls_[index];
        const auto function = call.find("function");
        std::string name;
        if (function != call.end() && function->is_object()) name = string_field(*function, "name");
        std::string id = string_field(call, "id");
        if (pending.started) {
            // A repeated id or name changes nothing; another one for a call already announced
            // would give its deltas and end to a call that never started.
            if ((!id.empty() && id != pending.id) || (!name.empty() && name != pending.name)) {
                throw_invalid_response("the stream sent tool call " + std::to_string(index) +
                                           " again under another id or name",
                                       origin_of(provider_, model_, nullptr, response_id_));
            }
        } else {
            if (!id.empty()) pending.id = std::move(id);
            pending.name += name;
        }
        std::string fragment;
        if (function != call.end() && function->is_object()) {
            if (const auto arguments = function->find("arguments"); arguments != function->end()) {
                fragment = arguments->is_string() ? arguments->get<std::string>()
                           : arguments->is_null() ? std::string()
                                                  : arguments->dump();
            }
        }
        pending.arguments += fragment;
        if (!pending.started) {
            // Arguments before the name are held until the call can be announced; a call that
            // never gets a name is refused at the end of the stream.
            if (pending.name.empty()) return;
            // Servers that send no id (some llama.cpp and Mistral builds) get one from the
            // index: the documented repair.
            if (pending.id.empty()) pending.id = "call_" + std::to_string(index);
            if (!started_ids_.insert(pending.id).second) {
                throw_invalid_response(
                    "the stream sent two tool calls with the id \"" + pending.id + "\"",
                    origin_of(provider_, model_, nullptr, response_id_));
            }
            pending.started = true;
            StreamEvent start;
            start.type = StreamEvent::Type::tool_call_start;
            start.tool_call_id = pending.id;
            start.tool_name = pending.name;
            visible_.push(out, std::move(start));
            fragment = pending.arguments;
        }
        if (!fragment.empty()) {
            StreamEvent delta = detail::delta_event(StreamEvent::Type::tool_call_delta, fragment);
            delta.tool_call_id = pending.id;
            delta.tool_name = pending.name;
            visible_.push(out, std::move(delta));
        }
    }

    void complete(std::vector<StreamEvent>& out) {
        if (finished_) return;
        finished_ = true;
        for (auto& [index, pending] : calls_) {
            if (pending.name.empty()) {
                throw_invalid_response("the stream sent tool call " + std::to_string(index) +
                                           " arguments but never its name",
                                       origin_of(provider_, model_, nullptr, response_id_));
            }
            if (pending.id.empty()) pending.id = "call_" + std::to_string(index);
            ToolCallPart call{pending.id, pending.name,
                              detail::parse_tool_arguments(pending.arguments)};
            builder_.add_tool_call(call);
            StreamEvent end;
            end.type = StreamEvent::Type::tool_call_end;
            end.tool_call_id = call.id;
            end.tool_name = call.name;
            end.tool_call = std::move(call);
            visible_.push(out, std::move(end));
        }
        builder_.set_request_id(response_id_);
        visible_.push(out, detail::done_event(builder_.build(provider_)));
    }

    std::string provider_;
    std::string model_;
    bool reasoning_apart_;
    SseParser parser_;
    detail::ResponseBuilder builder_;
    detail::VisibleEvents visible_;
    std::map<std::int64_t, PendingCall> calls_;
    std::set<std::string, std::less<>> started_ids_;
    std::string response_id_;
    json choice_usage_;
    bool done_seen_ = false;
    bool finished_ = false;
};

}  // namespace

OpenAiChatProvider::OpenAiChatProvider(OpenAiChatOptions options) : options_(std::move(options)) {
    while (!options_.base_url.empty() && options_.base_url.back() == '/')
        options_.base_url.pop_back();
}

std::string_view OpenAiChatProvider::name() const noexcept {
    return options_.provider_name;
}

ProviderCapabilities OpenAiChatProvider::capabilities(std::string_view model) const {
    ProviderCapabilities capabilities;
    capabilities.documents = options_.provider_name == "openai";
    capabilities.reasoning = true;
    if (options_.provider_name == "openai" && is_openai_reasoning_model(model)) {
        capabilities.temperature = false;
        capabilities.top_p = false;
    }
    return capabilities;
}

json OpenAiChatProvider::encode_body(const ChatRequest& request, bool stream) const {
    detail::check_request(request, capabilities(request.model), name(), stream);
    json body = {{"model", request.model}};
    json messages = json::array();
    if (!request.system.empty())
        messages.push_back({{"role", "system"}, {"content", request.system}});
    for (const auto& message : request.messages) encode_message(message, messages);
    body["messages"] = std::move(messages);

    if (!request.tools.empty()) {
        json tools = json::array();
        for (const auto& tool : request.tools) {
            tools.push_back({{"type", "function"},
                             {"function",
                              {{"name", tool.name},
                               {"description", tool.description},
                               {"parameters", tool.parameters}}}});
        }
        body["tools"] = std::move(tools);
    }
    if (request.tool_choice) {
        body["tool_choice"] = detail::openai_tool_choice(
            *request.tool_choice,
            json{{"type", "function"}, {"function", {{"name", request.tool_choice->name}}}});
    }
    if (request.max_tokens) {
        const bool completion_field =
            options_.use_max_completion_tokens.value_or(options_.provider_name == "openai");
        body[completion_field ? "max_completion_tokens" : "max_tokens"] = *request.max_tokens;
    }
    if (request.temperature) body["temperature"] = *request.temperature;
    if (request.top_p) body["top_p"] = *request.top_p;
    if (!request.stop.empty()) body["stop"] = request.stop;
    if (request.response_format) {
        body["response_format"] = {{"type", "json_schema"},
                                   {"json_schema",
                                    {{"name", request.response_format->name},
                                     {"schema", request.response_format->schema},
                                     {"strict", request.response_format->strict}}}};
    }
    if (stream) {
        body["stream"] = true;
        if (options_.stream_usage) body["stream_options"] = {{"include_usage", true}};
    }
    for (const auto& [key, value] : request.provider_options.items()) body[key] = value;
    return body;
}

HttpRequest OpenAiChatProvider::encode(const ChatRequest& request, bool stream) const {
    return detail::openai_http_request(
        options_.base_url + "/chat/completions", encode_body(request, stream), stream,
        options_.api_key, options_.organization, options_.project, options_.extra_headers,
        options_.connect_timeout, options_.idle_timeout);
}

ChatResponse OpenAiChatProvider::decode(const HttpResponse& response,
                                        const ChatRequest& request) const {
    ErrorOrigin origin = origin_of(name(), request.model, &response);
    if (response.status < 200 || response.status > 299) {
        const json body = detail::parse_json_exact(response.body);
        ProviderFailure failure = body.is_object() ? failure_from_body(body, response.status)
                                                   : ProviderFailure{response.status, "", "",
                                                                     response.body, std::nullopt};
        failure.status = response.status;
        failure.retry_after = retry_hint(response);
        throw_provider_failure(failure, origin);
    }
    const json body = parse_provider_json(response.body, origin);
    if (!body.is_object()) throw_invalid_response("the response body is not a JSON object", origin);
    if (const auto error = body.find("error"); error != body.end() && !error->is_null()) {
        throw_provider_failure(failure_from_body(body, response.status), origin);
    }
    const auto choices = body.find("choices");
    if (choices == body.end() || !choices->is_array() || choices->empty() ||
        !(*choices)[0].is_object()) {
        throw_invalid_response("the response has no choices", origin);
    }
    const json& choice = (*choices)[0];
    const auto message = choice.find("message");
    if (message == choice.end() || !message->is_object()) {
        throw_invalid_response("the first choice has no message", origin);
    }

    detail::ResponseBuilder builder;
    std::string text;
    std::string reasoning = decode_reasoning(*message);
    if (const auto content = message->find("content"); content != message->end()) {
        decode_content(*content, text, reasoning);
    }
    builder.add_reasoning(reasoning);
    builder.add_text(text);
    builder.add_refusal(string_field(*message, "refusal"));
    if (const auto calls = message->find("tool_calls");
        calls != message->end() && calls->is_array()) {
        std::size_t index = 0;
        for (const auto& call : *calls) {
            const auto function = call.find("function");
            if (!call.is_object() || function == call.end() || !function->is_object()) {
                throw_invalid_response("tool call " + std::to_string(index) + " has no function",
                                       origin);
            }
            std::string id = string_field(call, "id");
            if (id.empty()) id = "call_" + std::to_string(index);
            const auto arguments = function->find("arguments");
            const std::string arguments_text =
                arguments == function->end() || arguments->is_null() ? std::string()
                : arguments->is_string()                             ? arguments->get<std::string>()
                                                                     : arguments->dump();
            builder.add_tool_call({id, string_field(*function, "name"),
                                   detail::parse_tool_arguments(arguments_text)});
            ++index;
        }
    }
    const std::string finish = string_field(choice, "finish_reason");
    builder.set_finish(map_finish(finish), finish);
    const bool reasoning_apart = options_.provider_name == "xai";
    builder.usage() = decode_usage(body.value("usage", json::object()), reasoning_apart);
    if (builder.usage().input_tokens == 0) {
        if (const auto groq = body.find("x_groq"); groq != body.end() && groq->is_object()) {
            builder.usage() = decode_usage(groq->value("usage", json::object()), reasoning_apart);
        }
    }
    builder.set_model(string_field(body, "model"));
    builder.set_request_id(origin.request_id.empty() ? string_field(body, "id")
                                                     : origin.request_id);
    return builder.build(std::string(name()));
}

std::unique_ptr<StreamDecoder> OpenAiChatProvider::stream_decoder(
    const ChatRequest& request) const {
    return std::make_unique<ChatStreamDecoder>(std::string(name()), request.model);
}

}  // namespace ullm
