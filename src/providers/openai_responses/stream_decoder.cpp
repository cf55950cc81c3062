#include "openai_responses_internal.hpp"

#include <ullm/core/error.hpp>
#include <ullm/http/sse_parser.hpp>

#include <map>
#include <utility>

#include "../json_readers.hpp"
#include "../response_builder.hpp"

namespace ullm::detail::openai_responses {

namespace {

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
        const json payload = parse_stream_json(
            event.data, [this] { return origin(); }, "a stream event");
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
        std::string id = call_id_of(*item, index);
        std::string name = string_field(*item, "name");
        if (call.started && (id != call.id || name != call.name)) {
            // Its deltas and end would go to a call that never started.
            throw_invalid_response("output item " + std::to_string(index) +
                                       " was added again under another call id or name",
                                   origin());
        }
        call.id = std::move(id);
        call.name = std::move(name);
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

std::unique_ptr<StreamDecoder> make_stream_decoder(DecodeContext context) {
    return std::make_unique<ResponsesStreamDecoder>(std::move(context));
}

std::unique_ptr<StreamDecoder> make_resumed_stream_decoder(DecodeContext context,
                                                           const StreamPosition& from) {
    return std::make_unique<ResponsesStreamDecoder>(std::move(context), from);
}

}  // namespace ullm::detail::openai_responses
