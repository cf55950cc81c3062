#include "openai_chat_internal.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/stream_fast_path.hpp>
#include <ullm/http/sse_parser.hpp>

#include <map>
#include <set>
#include <utility>

#include "../json_readers.hpp"
#include "../response_builder.hpp"

namespace ullm::detail::openai_chat {

namespace {

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
          reasoning_apart_(provider_ == "xai"),
          fast_path_(stream_fast_paths()) {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        parser_.feed(bytes, [&](SseEvent&& event) { on_event(event, out); });
    }

    void finish(std::vector<StreamEvent>& out) override {
        if (finished_) return;
        const auto end = parser_.finish();
        if (!done_seen_ && !builder_.has_finish()) {
            throw StreamTruncatedError(end.clean() ? "the stream ended before its final chunk"
                                                   : "the stream ended in the middle of an event",
                                       origin());
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
        // The usual chunk, a piece of text, is read without a DOM; a usage carried over from
        // a choice (Moonshot) is reported by the general path.
        if (fast_path_ && choice_usage_.is_null() && read_text_chunk(event.data, text_chunk_)) {
            on_text_chunk(out);
            return;
        }
        json chunk = parse_stream_json(
            event.data, [this] { return origin(); }, "a stream chunk");
        if (!chunk.is_object())
            throw_invalid_response("a stream chunk is not a JSON object", origin());
        if (const auto error = chunk.find("error"); error != chunk.end() && !error->is_null()) {
            throw_provider_failure(failure_from_body(chunk, 200), origin());
        }
        if (response_id_.empty()) response_id_ = string_field(chunk, "id");
        // Every chunk repeats the model: it is copied only when it changes.
        if (const auto model = string_view_field(chunk, "model");
            !model.empty() && model != builder_.model()) {
            builder_.set_model(std::string(model));
        }

        if (const auto choices = chunk.find("choices");
            choices != chunk.end() && choices->is_array()) {
            for (auto& choice : *choices) on_choice(choice, out);
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

    // The general path's effect on a chunk that `read_text_chunk` accepted.
    void on_text_chunk(std::vector<StreamEvent>& out) {
        if (response_id_.empty()) response_id_ = std::move(text_chunk_.id);
        if (!text_chunk_.model.empty() && text_chunk_.model != builder_.model()) {
            builder_.set_model(text_chunk_.model);
        }
        if (!text_chunk_.content.empty()) {
            builder_.add_text(text_chunk_.content);
            visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta,
                                                   std::move(text_chunk_.content)));
        }
    }

    void on_choice(json& choice, std::vector<StreamEvent>& out) {
        // Only the first choice is modelled; n > 1 streams interleave the others.
        if (!choice.is_object() || count_field(choice, "index") != 0) return;
        if (const auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
            std::string text;
            std::string reasoning = decode_reasoning(*delta);
            if (const auto content = delta->find("content"); content != delta->end()) {
                if (content->is_string()) {
                    // The usual delta: its text is taken out of the parsed chunk, not copied.
                    text = std::move(content->get_ref<std::string&>());
                } else {
                    decode_content(*content, text, reasoning);
                }
            }
            if (!reasoning.empty()) {
                builder_.add_reasoning(reasoning);
                visible_.push(out, detail::delta_event(StreamEvent::Type::reasoning_delta,
                                                       std::move(reasoning)));
            }
            if (!text.empty()) {
                builder_.add_text(text);
                visible_.push(out,
                              detail::delta_event(StreamEvent::Type::text_delta, std::move(text)));
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
                                       origin());
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
                    "the stream sent two tool calls with the id \"" + pending.id + "\"", origin());
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
                                       origin());
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
        visible_.push(out, detail::done_event(std::move(builder_).build(provider_)));
    }

    [[nodiscard]] ErrorOrigin origin() const {
        return origin_of(provider_, model_, nullptr, response_id_);
    }

    std::string provider_;
    std::string model_;
    bool reasoning_apart_;
    bool fast_path_;
    TextChunk text_chunk_;  ///< The last chunk the fast path read (its buffers reused).
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

std::unique_ptr<StreamDecoder> make_stream_decoder(std::string provider, std::string model) {
    return std::make_unique<ChatStreamDecoder>(std::move(provider), std::move(model));
}

}  // namespace ullm::detail::openai_chat
