#include <ullm/testing/scripted_provider.hpp>

#include <ullm/core/error.hpp>

#include "../providers/response_builder.hpp"
#include "scripted_transport.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>

namespace ullm {

namespace detail {

// The answers of a scripted provider still to play, and the requests that took the others.
class ScriptQueue {
public:
    void push(ScriptedTurn turn) {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(turn));
    }

    std::string next_call_id() {
        std::lock_guard lock(mutex_);
        return "call_scripted_" + std::to_string(next_call_id_++);
    }

    void answer_with(ScriptedProvider::Responder responder) {
        auto shared =
            responder ? std::make_shared<const ScriptedProvider::Responder>(std::move(responder))
                      : nullptr;
        std::lock_guard lock(mutex_);
        responder_ = std::move(shared);
    }

    // The next answer, taken by `request`: the queue's, else the responder's; with neither,
    // throws `mock_queue_exhausted`.
    ScriptedTurn take(const ChatRequest& request, const std::string& name) {
        std::shared_ptr<const ScriptedProvider::Responder> responder;
        {
            std::lock_guard lock(mutex_);
            ++request_count_;
            if (kept_ != 0) {
                if (requests_.size() == kept_) requests_.pop_front();
                requests_.push_back(request);
            }
            if (!queue_.empty()) {
                ScriptedTurn turn = std::move(queue_.front());
                queue_.pop_front();
                return turn;
            }
            if (!responder_) {
                throw Error(ErrorCode::mock_queue_exhausted,
                            "the scripted provider \"" + name +
                                "\" has no answer left for request " +
                                std::to_string(request_count_),
                            500, false, {name, request.model, ""});
            }
            responder = responder_;
        }
        return (*responder)(request);
    }

    std::vector<ChatRequest> requests() const {
        std::lock_guard lock(mutex_);
        return {requests_.begin(), requests_.end()};
    }

    std::size_t request_count() const {
        std::lock_guard lock(mutex_);
        return request_count_;
    }

    void keep_requests(std::size_t count) {
        std::lock_guard lock(mutex_);
        kept_ = count;
        while (requests_.size() > kept_) requests_.pop_front();
    }

    std::size_t remaining() const {
        std::lock_guard lock(mutex_);
        return queue_.size();
    }

private:
    mutable std::mutex mutex_;
    std::deque<ScriptedTurn> queue_;
    std::deque<ChatRequest> requests_;  // the `kept_` most recent
    std::size_t kept_ = std::numeric_limits<std::size_t>::max();
    std::size_t request_count_ = 0;
    std::size_t next_call_id_ = 1;
    std::shared_ptr<const ScriptedProvider::Responder> responder_;
};

}  // namespace detail

namespace {

// Whether `head` is of an answer of the scripted transport.
bool scripted_answer(const HttpResponseHead& head) {
    return head.status == 200 && head.header("content-type") == detail::scripted_content_type;
}

ProviderError not_scripted(const std::string& name, const ChatRequest& request,
                           const std::string& what) {
    return {ErrorCode::invalid_provider_response,
            what + " did not come from the scripted provider's transport",
            502,
            false,
            {name, request.model, ""}};
}

// A whole response's model is the request's when the script names none.
ChatResponse with_model(ChatResponse response, const ChatRequest& request) {
    if (response.model.empty()) response.model = request.model;
    return response;
}

// Scripted events end at their first `done`, which carries the response; where the script
// gives neither, they are made from the events before.
std::vector<StreamEvent> ended(std::vector<StreamEvent> events, const std::string& name) {
    auto done = std::find_if(events.begin(), events.end(), [](const StreamEvent& event) {
        return event.type == StreamEvent::Type::done;
    });
    if (done != events.end() && done->response) {
        events.erase(done + 1, events.end());
        return events;
    }
    events.erase(done, events.end());  // a `done` without its response, if any
    detail::ResponseBuilder builder;
    for (const auto& event : events) {
        if (event.type == StreamEvent::Type::text_delta) builder.add_text(event.delta);
        if (event.type == StreamEvent::Type::reasoning_delta) builder.add_reasoning(event.delta);
        if (event.type == StreamEvent::Type::tool_call_end && event.tool_call) {
            builder.add_tool_call(*event.tool_call);
        }
        if (event.usage) builder.usage() = *event.usage;
    }
    events.push_back(detail::done_event(std::move(builder).build(name)));
    return events;
}

// Splits text after each space so a stream shows words arriving.
std::vector<std::string> word_pieces(const std::string& text) {
    std::vector<std::string> pieces;
    std::size_t start = 0;
    while (start < text.size()) {
        auto end = text.find(' ', start);
        end = end == std::string::npos ? text.size() : end + 1;
        pieces.push_back(text.substr(start, end - start));
        start = end;
    }
    return pieces;
}

// Plays one taken answer on a stream of the scripted transport: after the ticket line, each
// line is the next event; `done` waits for the end of the body.
class ScriptedDecoder final : public StreamDecoder {
public:
    ScriptedDecoder(std::vector<StreamEvent> events, std::exception_ptr error,
                    std::shared_ptr<detail::ScriptPacing> pacing)
        : pacing_(std::move(pacing)), events_(std::move(events)) {
        error_ = std::move(error);  // assigned: clang-tidy takes a constructed one for a lost throw
    }

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        for (const char c : bytes) {
            if (ticket_) {
                if (c == '\n') line(out);
                continue;
            }
            if (c != '\n') {
                ticket_line_ += c;
                if (ticket_line_.size() > 20) throw_not_scripted();
                continue;
            }
            std::uint64_t ticket = 0;
            const auto* end = ticket_line_.data() + ticket_line_.size();
            if (std::from_chars(ticket_line_.data(), end, ticket).ptr != end) throw_not_scripted();
            ticket_ = ticket;
            start();
        }
    }

    void finish(std::vector<StreamEvent>& out) override {
        if (!done_ || next_ < events_.size()) {
            throw StreamTruncatedError("the scripted stream ended without a done event");
        }
        out.push_back(std::move(*done_));
        done_.reset();
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_; }

private:
    // The answer begins: an error is thrown, the events are counted for the transport.
    void start() {
        if (error_) std::rethrow_exception(error_);
        pacing_->set_lines(*ticket_, events_.size());
    }

    void line(std::vector<StreamEvent>& out) {
        if (next_ >= events_.size()) throw_not_scripted();
        StreamEvent& event = events_[next_++];
        if (event.type == StreamEvent::Type::done) {
            done_ = std::move(event);
            return;
        }
        if (event.type != StreamEvent::Type::usage_update) visible_ = true;
        out.push_back(std::move(event));
    }

    [[noreturn]] static void throw_not_scripted() {
        throw ProviderError(ErrorCode::invalid_provider_response,
                            "the stream did not come from the scripted provider's transport", 502,
                            false);
    }

    std::exception_ptr error_;
    std::shared_ptr<detail::ScriptPacing> pacing_;
    std::string ticket_line_;
    std::optional<std::uint64_t> ticket_;
    std::vector<StreamEvent> events_;
    std::size_t next_ = 0;
    std::optional<StreamEvent> done_;
    bool visible_ = false;
};

}  // namespace

ScriptedProvider::ScriptedProvider(std::string name, std::chrono::milliseconds chunk_delay,
                                   RetryPolicy retry)
    : name_(std::move(name)),
      retry_(retry),
      queue_(std::make_unique<detail::ScriptQueue>()),
      transport_(std::make_unique<detail::ScriptedTransport>(chunk_delay)) {}

ScriptedProvider::~ScriptedProvider() = default;

void ScriptedProvider::push(ChatResponse response) {
    queue_->push({std::move(response)});
}

void ScriptedProvider::push_text(const std::string& text, Usage usage) {
    detail::ResponseBuilder builder;
    builder.add_text(text);
    builder.usage() = usage;
    builder.set_finish(FinishReason::stop, "stop");
    push(std::move(builder).build(name_));
}

void ScriptedProvider::push_tool_call(std::string name, json arguments, const std::string& text,
                                      std::string id, Usage usage) {
    detail::ResponseBuilder builder;
    builder.add_text(text);
    if (id.empty()) id = queue_->next_call_id();
    builder.add_tool_call({std::move(id), std::move(name), std::move(arguments)});
    builder.usage() = usage;
    builder.set_finish(FinishReason::tool_call, "tool_call");
    push(std::move(builder).build(name_));
}

void ScriptedProvider::push_events(std::vector<StreamEvent> events) {
    queue_->push({std::move(events)});
}

void ScriptedProvider::push_error(std::exception_ptr error) {
    queue_->push({std::move(error)});
}

void ScriptedProvider::answer_with(Responder responder) {
    queue_->answer_with(std::move(responder));
}

std::vector<ChatRequest> ScriptedProvider::requests() const {
    return queue_->requests();
}

std::size_t ScriptedProvider::request_count() const {
    return queue_->request_count();
}

void ScriptedProvider::keep_requests(std::size_t count) {
    queue_->keep_requests(count);
}

std::size_t ScriptedProvider::remaining() const {
    return queue_->remaining();
}

ProviderCapabilities ScriptedProvider::capabilities(std::string_view) const {
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = true;
    return capabilities;
}

HttpRequest ScriptedProvider::encode(const ChatRequest&, bool stream) const {
    HttpRequest request;
    request.url = "scripted://" + name_;
    if (stream) request.headers.emplace_back("Accept", "text/event-stream");
    return request;
}

ChatResponse ScriptedProvider::decode(const HttpResponse& response,
                                      const ChatRequest& request) const {
    if (!scripted_answer(response)) throw not_scripted(name_, request, "the answer");
    ScriptedTurn turn = queue_->take(request, name_);
    if (auto* error = std::get_if<std::exception_ptr>(&turn.answer)) std::rethrow_exception(*error);
    if (auto* events = std::get_if<std::vector<StreamEvent>>(&turn.answer)) {
        return *ended(std::move(*events), name_).back().response;
    }
    return with_model(std::get<ChatResponse>(std::move(turn.answer)), request);
}

std::unique_ptr<StreamDecoder> ScriptedProvider::stream_decoder(const ChatRequest& request) const {
    ScriptedTurn turn = queue_->take(request, name_);
    std::vector<StreamEvent> events;
    std::exception_ptr error;
    if (auto* response = std::get_if<ChatResponse>(&turn.answer)) {
        events = events_of(with_model(std::move(*response), request));
    } else if (auto* queued = std::get_if<std::vector<StreamEvent>>(&turn.answer)) {
        events = ended(std::move(*queued), name_);
    } else {
        error = std::get<std::exception_ptr>(turn.answer);
    }
    return std::make_unique<ScriptedDecoder>(std::move(events), std::move(error),
                                             transport_->pacing());
}

Transport* ScriptedProvider::transport() const noexcept {
    return transport_.get();
}

std::vector<StreamEvent> ScriptedProvider::events_of(const ChatResponse& response) {
    std::vector<StreamEvent> events;
    for (const auto& part : response.message.parts) {
        if (const auto* text = std::get_if<TextPart>(&part)) {
            for (const auto& piece : word_pieces(text->text)) {
                events.push_back(detail::delta_event(StreamEvent::Type::text_delta, piece));
            }
        } else if (const auto* reasoning = std::get_if<ReasoningPart>(&part)) {
            events.push_back(
                detail::delta_event(StreamEvent::Type::reasoning_delta, reasoning->text));
        } else if (const auto* call = std::get_if<ToolCallPart>(&part)) {
            StreamEvent start;
            start.type = StreamEvent::Type::tool_call_start;
            start.tool_call_id = call->id;
            start.tool_name = call->name;
            events.push_back(start);
            StreamEvent delta =
                detail::delta_event(StreamEvent::Type::tool_call_delta, call->arguments.dump());
            delta.tool_call_id = call->id;
            delta.tool_name = call->name;
            events.push_back(std::move(delta));
            StreamEvent end = start;
            end.type = StreamEvent::Type::tool_call_end;
            end.tool_call = *call;
            events.push_back(std::move(end));
        }
    }
    StreamEvent usage;
    usage.type = StreamEvent::Type::usage_update;
    usage.usage = response.usage;
    events.push_back(std::move(usage));
    events.push_back(detail::done_event(response));
    return events;
}

}  // namespace ullm
