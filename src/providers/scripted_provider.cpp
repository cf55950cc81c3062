#include <ullm/providers/scripted_provider.hpp>

#include <ullm/core/error.hpp>
#include <ullm/http/retry_policy.hpp>

#include "response_builder.hpp"

namespace ullm {

namespace {

[[noreturn]] void not_http(std::string_view name) {
    throw ProviderCapabilityError(ErrorCode::offline_provider,
                                  std::string(name) + " is a scripted provider and speaks no HTTP");
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

class ScriptedEvents final : public EventSource {
public:
    ScriptedEvents(std::vector<StreamEvent> events, std::chrono::milliseconds delay,
                   std::stop_token stop)
        : events_(std::move(events)), delay_(delay), stop_(std::move(stop)) {}

    bool next(StreamEvent& event) override {
        if (stop_.stop_requested()) throw CancelledError("the stream was cancelled");
        if (index_ >= events_.size()) return false;
        if (index_ > 0 && !RetryPolicy::sleep(delay_, stop_)) {
            throw CancelledError("the stream was cancelled");
        }
        event = std::move(events_[index_++]);
        return true;
    }

private:
    std::vector<StreamEvent> events_;
    std::size_t index_ = 0;
    std::chrono::milliseconds delay_;
    std::stop_token stop_;
};

}  // namespace

ScriptedProvider::ScriptedProvider(std::string name, std::chrono::milliseconds chunk_delay)
    : name_(std::move(name)), chunk_delay_(chunk_delay) {}

void ScriptedProvider::push(ChatResponse response) {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(response)});
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
    if (id.empty()) {
        std::lock_guard lock(mutex_);
        id = "call_scripted_" + std::to_string(next_call_id_++);
    }
    builder.add_tool_call({std::move(id), std::move(name), std::move(arguments)});
    builder.usage() = usage;
    builder.set_finish(FinishReason::tool_call, "tool_call");
    push(std::move(builder).build(name_));
}

void ScriptedProvider::push_events(std::vector<StreamEvent> events) {
    if (events.empty() || events.back().type != StreamEvent::Type::done) {
        detail::ResponseBuilder builder;
        for (const auto& event : events) {
            if (event.type == StreamEvent::Type::text_delta) builder.add_text(event.delta);
            if (event.type == StreamEvent::Type::reasoning_delta)
                builder.add_reasoning(event.delta);
            if (event.type == StreamEvent::Type::tool_call_end && event.tool_call) {
                builder.add_tool_call(*event.tool_call);
            }
            if (event.usage) builder.usage() = *event.usage;
        }
        events.push_back(detail::done_event(std::move(builder).build(name_)));
    }
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(events)});
}

void ScriptedProvider::push_error(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(error)});
}

std::vector<ChatRequest> ScriptedProvider::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

std::size_t ScriptedProvider::remaining() const {
    std::lock_guard lock(mutex_);
    return queue_.size();
}

ProviderCapabilities ScriptedProvider::capabilities(std::string_view) const {
    ProviderCapabilities capabilities;
    capabilities.documents = true;
    capabilities.reasoning = true;
    return capabilities;
}

HttpRequest ScriptedProvider::encode(const ChatRequest&, bool) const {
    not_http(name_);
}

ChatResponse ScriptedProvider::decode(const HttpResponse&, const ChatRequest&) const {
    not_http(name_);
}

std::unique_ptr<StreamDecoder> ScriptedProvider::stream_decoder(const ChatRequest&) const {
    not_http(name_);
}

ScriptedTurn ScriptedProvider::take(const ChatRequest& request) const {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
    if (queue_.empty()) {
        throw Error(ErrorCode::mock_queue_exhausted,
                    "the scripted provider \"" + name_ + "\" has no answer left for request " +
                        std::to_string(requests_.size()),
                    500, false, {name_, request.model, ""});
    }
    ScriptedTurn turn = std::move(queue_.front());
    queue_.pop_front();
    return turn;
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

ChatResponse ScriptedProvider::respond(const ChatRequest& request, std::stop_token stop) const {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    ScriptedTurn turn = take(request);
    if (auto* error = std::get_if<std::exception_ptr>(&turn.answer)) std::rethrow_exception(*error);
    if (auto* events = std::get_if<std::vector<StreamEvent>>(&turn.answer)) {
        return *events->back().response;
    }
    auto response = std::get<ChatResponse>(std::move(turn.answer));
    if (response.model.empty()) response.model = request.model;
    return response;
}

std::unique_ptr<EventSource> ScriptedProvider::respond_stream(const ChatRequest& request,
                                                              std::stop_token stop) const {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    ScriptedTurn turn = take(request);
    if (auto* error = std::get_if<std::exception_ptr>(&turn.answer)) std::rethrow_exception(*error);
    std::vector<StreamEvent> events;
    if (auto* scripted = std::get_if<std::vector<StreamEvent>>(&turn.answer)) {
        events = std::move(*scripted);
    } else {
        auto response = std::get<ChatResponse>(std::move(turn.answer));
        if (response.model.empty()) response.model = request.model;
        events = events_of(response);
    }
    return std::make_unique<ScriptedEvents>(std::move(events), chunk_delay_, std::move(stop));
}

}  // namespace ullm
