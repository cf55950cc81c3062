#include "anthropic_internal.hpp"

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>
#include <ullm/detail/stream_fast_path.hpp>
#include <ullm/http/sse_parser.hpp>

#include <map>
#include <optional>
#include <set>
#include <utility>

#include "../json_readers.hpp"

namespace ullm::detail::anthropic {

namespace {

class AnthropicStreamDecoder final : public StreamDecoder {
public:
    AnthropicStreamDecoder(std::string provider, std::string model, std::string result_tool)
        : provider_(std::move(provider)),
          requested_model_(std::move(model)),
          result_tool_(std::move(result_tool)) {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        if (finished_) return;  // anything after message_stop is not part of this message
        parser_.feed(bytes, [&](SseEvent&& event) { on_event(event, out); });
    }

    void finish(std::vector<StreamEvent>& out) override {
        (void)out;
        if (finished_) return;
        const auto end = parser_.finish();
        throw StreamTruncatedError(end.clean() ? "the stream ended before message_stop"
                                               : "the stream ended in the middle of an event",
                                   origin());
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_.any(); }

private:
    struct OpenBlock {
        json block;
        std::string partial_json;
        bool stopped = false;
        bool client_tool = false;  // a tool_use the caller must run
        bool deferred = false;     // called from code execution: surfaced at message_stop
        bool result = false;       // the result tool: its input streams as text
    };

    [[nodiscard]] ErrorOrigin origin(const std::string& request_id = {}) const {
        return {provider_, requested_model_, request_id.empty() ? message_id_ : request_id};
    }

    [[noreturn]] void invalid(const std::string& message) const {
        throw_invalid_response(message, origin());
    }

    void on_event(const SseEvent& event, std::vector<StreamEvent>& out) {
        if (finished_) return;
        // The usual event, a piece of text, is read without a DOM.
        if (fast_path_ && read_text_delta(event.data, text_delta_)) {
            OpenBlock& open = delta_block(text_delta_.index);
            expect_delta(open, text_delta_.index, "text_delta", "text");
            add_text(open, std::move(text_delta_.text), out);
            return;
        }
        json payload = parse_stream_json(
            event.data, [this] { return origin(); }, "a stream event");
        if (!payload.is_object()) invalid("a stream event is not a JSON object");
        std::string_view type = string_view_field(payload, "type");
        if (type.empty()) type = event.event;
        if (type == "message_start") {
            on_message_start(payload, out);
        } else if (type == "content_block_start") {
            const auto block = payload.find("content_block");
            if (block == payload.end() || !block->is_object()) {
                invalid("content_block_start carries no content block");
            }
            start_block(index_of(payload), *block, out);
        } else if (type == "content_block_delta") {
            on_delta(payload, out);
        } else if (type == "content_block_stop") {
            const auto index = index_of(payload);
            if (blocks_.find(index) == blocks_.end()) {
                invalid("content block " + std::to_string(index) + " stopped without a start");
            }
            stop_block(index, out);
        } else if (type == "message_delta") {
            if (const auto delta = payload.find("delta");
                delta != payload.end() && delta->is_object()) {
                if (const auto reason = delta->find("stop_reason");
                    reason != delta->end() && reason->is_string()) {
                    stop_reason_ = reason->get<std::string>();
                }
                if (const auto details = delta->find("stop_details"); details != delta->end()) {
                    stop_details_ = *details;
                }
            }
            update_usage(payload, out);
        } else if (type == "message_stop") {
            complete(out);
        } else if (type == "error") {
            throw_provider_failure(failure_from_body(payload, 200),
                                   origin(string_field(payload, "request_id")));
        }
        // ping and event types this version does not know are ignored.
    }

    void on_message_start(const json& payload, std::vector<StreamEvent>& out) {
        const auto message = payload.find("message");
        if (message == payload.end() || !message->is_object()) {
            invalid("message_start carries no message");
        }
        const std::string id = string_field(*message, "id");
        if (started_) {
            // Some gateways repeat the frame of the same message: harmless.
            if (id == message_id_) return;
            // An intermediary retried upstream and spliced a second generation into this
            // body: the first message was cut off, and its signed thinking must not be mixed
            // with the second's.
            throw StreamTruncatedError("message \"" + message_id_ +
                                           "\" was cut off by the start of another message (\"" +
                                           id + "\") in the same stream",
                                       origin());
        }
        started_ = true;
        message_id_ = id;
        model_ = string_field(*message, "model");
        if (const auto reason = message->find("stop_reason");
            reason != message->end() && reason->is_string()) {
            stop_reason_ = reason->get<std::string>();
        }
        if (const auto content = message->find("content");
            content != message->end() && content->is_array()) {
            // Some servers send blocks already complete inside message_start.
            for (std::size_t i = 0; i < content->size(); ++i) {
                const auto index = static_cast<std::int64_t>(i);
                if (!(*content)[i].is_object()) {
                    invalid("message_start content block " + std::to_string(i) +
                            " is not an object");
                }
                start_block(index, (*content)[i], out);
                stop_block(index, out);
            }
        }
        update_usage(*message, out);
    }

    void update_usage(const json& holder, std::vector<StreamEvent>& out) {
        const auto usage = holder.find("usage");
        if (usage == holder.end() || !usage->is_object()) return;
        usage_.update(*usage);
        StreamEvent update;
        update.type = StreamEvent::Type::usage_update;
        update.usage = usage_.canonical();
        visible_.push(out, std::move(update));
    }

    std::int64_t index_of(const json& payload) const {
        const auto index = payload.find("index");
        if (index != payload.end()) {
            if (index->is_number_unsigned() &&
                index->get<std::uint64_t>() <=
                    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
                return static_cast<std::int64_t>(index->get<std::uint64_t>());
            }
            if (index->is_number_integer() && index->get<std::int64_t>() >= 0) {
                return index->get<std::int64_t>();
            }
        }
        invalid("a content block event has no valid index");
    }

    void start_block(std::int64_t index, const json& block, std::vector<StreamEvent>& out) {
        if (const auto it = blocks_.find(index); it != blocks_.end()) {
            // Recorded from the API (code execution with skills): after a server tool result,
            // a start can repeat the index of the block that just stopped while its deltas
            // and stop use the next index. A finished block never restarts, so the start
            // opens the next index.
            if (!it->second.stopped) {
                invalid("content block " + std::to_string(index) + " started twice");
            }
            if (blocks_.rbegin()->first == std::numeric_limits<std::int64_t>::max()) {
                invalid("content block indexes overflow");
            }
            index = blocks_.rbegin()->first + 1;
        }
        OpenBlock open;
        open.block = block;
        const std::string type = string_field(block, "type");
        if (type.empty()) invalid("content block " + std::to_string(index) + " has no type");
        if (type == "text") {
            if (!open.block["text"].is_string()) open.block["text"] = "";
            const auto& text = open.block["text"].get_ref<const std::string&>();
            if (!text.empty()) {
                visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, text));
            }
        } else if (type == "thinking") {
            if (!open.block["thinking"].is_string()) open.block["thinking"] = "";
            const auto& thinking = open.block["thinking"].get_ref<const std::string&>();
            if (!thinking.empty()) {
                visible_.push(out,
                              detail::delta_event(StreamEvent::Type::reasoning_delta, thinking));
            }
        } else if (type == "tool_use") {
            open.deferred = is_programmatic(open.block);
            open.result = !open.deferred && !result_tool_.empty() &&
                          string_field(open.block, "name") == result_tool_;
            open.client_tool = !open.result;
            const std::string id = string_field(open.block, "id");
            const std::string name = string_field(open.block, "name");
            if (id.empty() || name.empty()) {
                invalid("tool_use block " + std::to_string(index) + " has no id or name");
            }
            // A second call under one id could be neither answered nor restored.
            if (!tool_call_ids_.insert(id).second) {
                invalid("tool_use block " + std::to_string(index) + " repeats the call id \"" + id +
                        "\"");
            }
            if (open.client_tool && !open.deferred) {
                StreamEvent start;
                start.type = StreamEvent::Type::tool_call_start;
                start.tool_call_id = id;
                start.tool_name = name;
                visible_.push(out, std::move(start));
            }
        }
        blocks_.emplace(index, std::move(open));
    }

    // The open block a delta of content block `index` goes to; throws when there is none.
    OpenBlock& delta_block(std::int64_t index) {
        const auto it = blocks_.find(index);
        if (it == blocks_.end()) {
            invalid("a delta for content block " + std::to_string(index) +
                    ", which was never started");
        }
        if (it->second.stopped) {
            invalid("a delta for content block " + std::to_string(index) + " after its stop");
        }
        return it->second;
    }

    // Refuses a delta of `type` for a block that is not of `block_type` (when `fits` is unset)
    // or that `fits` refuses.
    void expect_delta(const OpenBlock& open, std::int64_t index, std::string_view type,
                      std::string_view block_type, std::optional<bool> fits = std::nullopt) const {
        const std::string_view actual = string_view_field(open.block, "type");
        if (!fits.value_or(actual == block_type)) {
            invalid("a " + std::string(type) + " for a " + std::string(actual) +
                    " block (content block " + std::to_string(index) + ")");
        }
    }

    void add_text(OpenBlock& open, std::string text, std::vector<StreamEvent>& out) {
        open.block["text"].get_ref<std::string&>() += text;
        if (!text.empty()) {
            visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, std::move(text)));
        }
    }

    void on_delta(json& payload, std::vector<StreamEvent>& out) {
        const auto index = index_of(payload);
        OpenBlock& open = delta_block(index);
        const auto delta = payload.find("delta");
        if (delta == payload.end() || !delta->is_object()) {
            invalid("content_block_delta carries no delta");
        }
        const std::string_view type = string_view_field(*delta, "type");
        const std::string_view block_type = string_view_field(open.block, "type");
        const auto expect = [&](bool fits) { expect_delta(open, index, type, block_type, fits); };
        if (type == "text_delta") {
            expect(block_type == "text");
            // Taken out of the parsed event rather than copied: the event is its only reader.
            add_text(open, take_string_field(*delta, "text"), out);
        } else if (type == "thinking_delta") {
            expect(block_type == "thinking");
            const std::string thinking = string_field(*delta, "thinking");
            open.block["thinking"].get_ref<std::string&>() += thinking;
            if (!thinking.empty()) {
                visible_.push(out,
                              detail::delta_event(StreamEvent::Type::reasoning_delta, thinking));
            }
        } else if (type == "signature_delta") {
            // Kept for replay only: a signature never shows in an event.
            expect(block_type == "thinking");
            json& signature = open.block["signature"];
            if (!signature.is_string()) signature = "";
            signature.get_ref<std::string&>() += string_field(*delta, "signature");
        } else if (type == "input_json_delta") {
            expect(takes_input(open.block));
            const std::string fragment = string_field(*delta, "partial_json");
            open.partial_json += fragment;
            if (open.result && !fragment.empty() && !result_streamed_) {
                visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, fragment));
            } else if (open.client_tool && !open.deferred && !fragment.empty()) {
                StreamEvent event =
                    detail::delta_event(StreamEvent::Type::tool_call_delta, fragment);
                event.tool_call_id = string_field(open.block, "id");
                event.tool_name = string_field(open.block, "name");
                visible_.push(out, std::move(event));
            }
        } else if (type == "citations_delta") {
            expect(block_type == "text");
            if (const auto citation = delta->find("citation"); citation != delta->end()) {
                json& citations = open.block["citations"];
                if (!citations.is_array()) citations = json::array();
                citations.push_back(*citation);
            }
        } else if (type == "compaction_delta") {
            expect(block_type == "compaction");
            json& content = open.block["content"];
            if (!content.is_string()) content = "";
            content.get_ref<std::string&>() += string_field(*delta, "content");
        }
        // Delta types this version does not know are ignored.
    }

    // The arguments text a tool call's events carry when no fragments were streamed.
    static std::string whole_arguments_text(const json& input) {
        if (input.is_string()) return input.get<std::string>();
        if (input.is_object() && !input.empty()) return input.dump();
        return {};
    }

    void emit_tool_call(const OpenBlock& open, std::int64_t index, bool with_start,
                        bool with_arguments, std::vector<StreamEvent>& out) {
        ToolCallPart call =
            tool_call_from_block(open.block, static_cast<std::size_t>(index), origin());
        if (with_start) {
            StreamEvent start;
            start.type = StreamEvent::Type::tool_call_start;
            start.tool_call_id = call.id;
            start.tool_name = call.name;
            visible_.push(out, std::move(start));
        }
        if (with_arguments) {
            const std::string text = whole_arguments_text(open.block.value("input", json()));
            if (!text.empty()) {
                StreamEvent delta = detail::delta_event(StreamEvent::Type::tool_call_delta, text);
                delta.tool_call_id = call.id;
                delta.tool_name = call.name;
                visible_.push(out, std::move(delta));
            }
        }
        StreamEvent end;
        end.type = StreamEvent::Type::tool_call_end;
        end.tool_call_id = call.id;
        end.tool_name = call.name;
        end.tool_call = std::move(call);
        visible_.push(out, std::move(end));
    }

    void stop_block(std::int64_t index, std::vector<StreamEvent>& out) {
        OpenBlock& open = blocks_.at(index);
        if (open.stopped) return;
        open.stopped = true;
        const bool streamed = open.partial_json.find_first_not_of(" \t\r\n") != std::string::npos;
        if (streamed && open.result) {
            open.block["input"] = open.partial_json;  // the reply text, as it streamed
        } else if (streamed) {
            json input = detail::parse_json_exact(open.partial_json);
            // Text that is not a JSON object is kept verbatim (see parse_tool_arguments).
            open.block["input"] = !input.is_discarded() && input.is_object()
                                      ? std::move(input)
                                      : json(open.partial_json);
        }
        if (open.client_tool && !open.deferred) emit_tool_call(open, index, false, !streamed, out);
        if (open.result && !result_streamed_) {
            // Only the first call is the answer (as `project_content` takes it).
            result_streamed_ = true;
            if (!streamed) {
                const std::string text = whole_arguments_text(open.block.value("input", json()));
                if (!text.empty()) {
                    visible_.push(out, detail::delta_event(StreamEvent::Type::text_delta, text));
                }
            }
        }
    }

    void complete(std::vector<StreamEvent>& out) {
        finished_ = true;
        for (auto& [index, open] : blocks_) {
            if (!open.stopped) stop_block(index, out);
        }
        json content = json::array();
        for (const auto& [index, open] : blocks_) content.push_back(open.block);
        detail::ResponseBuilder builder;
        const Projection projection =
            project_content(content, stop_reason_, origin(), builder, result_tool_);
        if (stop_reason_ == "tool_use") {
            for (const auto& [index, open] : blocks_) {
                if (open.deferred) emit_tool_call(open, index, true, true, out);
            }
        }
        MessageSummary summary{stop_reason_, stop_details_,
                               usage_,       model_,
                               message_id_,  requested_model_.empty() ? model_ : requested_model_};
        visible_.push(out,
                      detail::done_event(finish_response(builder, projection, summary, provider_)));
    }

    std::string provider_;
    std::string requested_model_;
    std::string result_tool_;       // see `result_tool_of`; empty for none
    bool result_streamed_ = false;  // the result tool's first call has stopped
    SseParser parser_;
    detail::VisibleEvents visible_;
    std::map<std::int64_t, OpenBlock> blocks_;
    std::set<std::string, std::less<>> tool_call_ids_;  // of every tool_use block so far
    RawUsage usage_;
    std::string message_id_;
    std::string model_;
    std::string stop_reason_;
    json stop_details_;
    bool started_ = false;
    bool finished_ = false;
    bool fast_path_ = stream_fast_paths();
    TextDelta text_delta_;  ///< The last event the fast path read (its buffer reused).
};

}  // namespace

std::unique_ptr<StreamDecoder> make_stream_decoder(std::string provider, std::string model,
                                                   std::string result_tool) {
    return std::make_unique<AnthropicStreamDecoder>(std::move(provider), std::move(model),
                                                    std::move(result_tool));
}

}  // namespace ullm::detail::anthropic
