#include <ullm/client/structured_output.hpp>

#include <ullm/client/client.hpp>
#include <ullm/core/partial_json.hpp>
#include <ullm/tools/validator.hpp>

#include "structured_reply.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <string>
#include <utility>

namespace ullm {

namespace {

constexpr std::size_t max_shown_text = 200;

bool valid_format_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    for (const char c : name) {
        const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

void check_options(const ChatRequest& request, const StructuredOutputOptions& options) {
    if (request.response_format) {
        throw InvalidOptionError(ErrorCode::invalid_response_format,
                                 "the request already has a response_format; a structured-output "
                                 "call sets it from the schema it is given");
    }
    detail::check_object_options(options);
}

std::string shown(const std::string& text) {
    return text.size() <= max_shown_text ? text : text.substr(0, max_shown_text) + "...";
}

// A refused reply as it goes back before the repair request: an assistant message without tool
// calls (none of them is run, and a call without a result would be refused by the provider), so
// a reply that only called a tool says which.
Message answered_reply(Message reply) {
    reply.role = Role::assistant;
    std::string called;
    std::erase_if(reply.parts, [&called](const Part& part) {
        const auto* call = std::get_if<ToolCallPart>(&part);
        if (call != nullptr && called.empty()) called = call->name;
        return call != nullptr;
    });
    if (reply.parts.empty()) {
        reply.parts.emplace_back(
            TextPart{called.empty() ? "(no answer)" : "(called the tool \"" + called + "\")"});
    }
    return reply;
}

// The request and bookkeeping of one structured-output call, shared by both forms.
struct Call {
    const Client* client;
    ChatRequest request;
    CompiledSchema schema;
    StructuredOutputOptions options;
    detail::ObjectDecoder decode;
    ObjectResponse<json> result;
    double spent_usd = 0;

    Call(const Client& client_, ChatRequest request_, json schema_,
         StructuredOutputOptions options_, detail::ObjectDecoder decode_)
        : client(&client_),
          request(std::move(request_)),
          schema(CompiledSchema::value(std::move(schema_))),
          options(std::move(options_)),
          decode(std::move(decode_)) {
        request.response_format = ResponseFormat{options.name, schema.schema(), options.strict};
    }

    // What is left of the budget for the next request.
    [[nodiscard]] std::optional<CallBudget> budget() const {
        if (!options.budget) return std::nullopt;
        CallBudget left = *options.budget;
        left.usd = std::max(0.0, left.usd - spent_usd);
        return left;
    }

    void count(const ChatResponse& response) {
        result.usage += response.usage;
        if (response.usage.cost_usd && std::isfinite(*response.usage.cost_usd))
            spent_usd += *response.usage.cost_usd;
    }

    // Takes `response`: true when the call is over (good, refused, skipped); false when a repair
    // round was set up; throws when the reply is refused and no repair is left.
    bool settle(ChatResponse response) {
        detail::ReplyVerdict verdict = detail::judge_reply(response, schema, decode, result.usage);
        switch (verdict.kind) {
            case detail::ReplyVerdict::Kind::good:
                result.value = std::move(verdict.value);
                result.object = result.value;
                result.response = std::move(response);
                return true;
            case detail::ReplyVerdict::Kind::refused:
                result.refusal = std::move(verdict.problem);
                result.response = std::move(response);
                return true;
            case detail::ReplyVerdict::Kind::skipped:
                result.budget_skipped = true;
                result.response = std::move(response);
                return true;
            case detail::ReplyVerdict::Kind::problem:
                break;
        }
        if (result.repairs >= options.max_repairs) {
            detail::throw_unusable_reply(verdict, response, result.repairs, result.usage);
        }
        ++result.repairs;
        request.messages.push_back(answered_reply(std::move(response.message)));
        request.messages.push_back(detail::repair_request(verdict.problem));
        last_problem = std::move(verdict.problem);
        return false;
    }

    std::string last_problem;
};

}  // namespace

void detail::check_object_options(const StructuredOutputOptions& options) {
    if (!valid_format_name(options.name)) {
        throw InvalidOptionError(ErrorCode::invalid_response_format,
                                 "StructuredOutputOptions::name must be 1 to 64 of "
                                 "[A-Za-z0-9_-]");
    }
    if (options.max_repairs < 0 || options.max_repairs > max_structured_output_repairs) {
        throw InvalidOptionError(ErrorCode::invalid_max_repairs,
                                 "max_repairs must be from 0 to " +
                                     std::to_string(max_structured_output_repairs) + ", not " +
                                     std::to_string(options.max_repairs));
    }
    if (options.budget)
        detail::check_budget(options.budget->usd, "StructuredOutputOptions::budget");
}

detail::ReplyVerdict detail::judge_reply(const ChatResponse& response, const CompiledSchema& schema,
                                         const ObjectDecoder& decode, const Usage& usage) {
    ReplyVerdict verdict;
    if (response.finish_reason == FinishReason::error &&
        response.raw_finish_reason == "budget_exceeded") {
        verdict.kind = ReplyVerdict::Kind::skipped;
        return verdict;
    }
    if (response.refusal || response.finish_reason == FinishReason::content_filter) {
        verdict.kind = ReplyVerdict::Kind::refused;
        verdict.problem = response.refusal ? *response.refusal
                                           : "the provider stopped the reply (" +
                                                 response.raw_finish_reason + ")";
        return verdict;
    }
    if (response.finish_reason == FinishReason::length) {
        throw StructuredOutputError(
            ErrorCode::structured_output_truncated,
            "the reply stopped at the output limit before its JSON was complete; raise "
            "max_tokens",
            response.text, {}, usage, {response.provider, response.model, response.request_id});
    }
    verdict.kind = ReplyVerdict::Kind::problem;
    if (!response.tool_calls.empty() && response.text.empty()) {
        verdict.code = ErrorCode::structured_output_not_json;
        verdict.problem = "you called the tool \"" + response.tool_calls.front().name +
                          "\" instead of answering with the JSON value";
        return verdict;
    }
    PartialJsonParser parser;
    parser.feed(response.text);
    if (!parser.finish()) {
        verdict.code = ErrorCode::structured_output_not_json;
        verdict.problem = response.text.empty() ? "the reply is empty, not JSON"
                                                : "the reply is not JSON: " + parser.error();
        return verdict;
    }
    try {
        schema.validate_value(parser.value());
        if (decode) decode(parser.value());
    } catch (const ToolArgumentError& error) {
        verdict.code = ErrorCode::structured_output_invalid;
        verdict.path = error.path();
        verdict.problem = "the value at " + (error.path().empty() ? "the root" : error.path()) +
                          " " + error.reason();
        return verdict;
    }
    verdict.kind = ReplyVerdict::Kind::good;
    verdict.value = parser.value();
    return verdict;
}

void detail::throw_unusable_reply(const ReplyVerdict& verdict, const ChatResponse& response,
                                  int repairs, const Usage& usage) {
    const std::string after = repairs == 0 ? std::string()
                                           : " (after " + std::to_string(repairs) +
                                                 (repairs == 1 ? " repair)" : " repairs)");
    throw StructuredOutputError(
        verdict.code,
        verdict.problem + after + "; the reply began: \"" + shown(response.text) + "\"",
        response.text, verdict.path, usage,
        {response.provider, response.model, response.request_id});
}

Message detail::repair_request(const std::string& problem) {
    return Message::user("Your reply could not be used: " + problem +
                         ". Answer again with only the JSON value that matches the schema, and "
                         "nothing else.");
}

ObjectResponse<json> detail::complete_structured(const Client& client, ChatRequest request,
                                                 json schema,
                                                 const StructuredOutputOptions& options,
                                                 std::stop_token stop,
                                                 const ObjectDecoder& decode) {
    check_options(request, options);
    Call call(client, std::move(request), std::move(schema), options, decode);
    for (;;) {
        const auto budget = call.budget();
        ChatResponse response = budget ? client.complete(call.request, stop, *budget)
                                       : client.complete(call.request, stop);
        call.count(response);
        if (call.settle(std::move(response))) return std::move(call.result);
    }
}

ObjectResponse<json> Client::complete_object(ChatRequest request, json schema,
                                             const StructuredOutputOptions& options,
                                             std::stop_token stop) const {
    return detail::complete_structured(*this, std::move(request), std::move(schema), options,
                                       std::move(stop), {});
}

struct detail::ObjectStreamCore::Setup {
    Call call;
    std::stop_source cancel;
    std::optional<std::stop_callback<std::function<void()>>> forward;
    std::optional<ChatStream> stream;
    PartialJsonParser parser;
    bool finished = false;
    std::exception_ptr failure;  ///< What ended the call, thrown again by a later `next()`.

    Setup(Call call_, const std::stop_token& stop) : call(std::move(call_)) {
        if (stop.stop_possible()) {
            forward.emplace(stop, std::function<void()>([this] { cancel.request_stop(); }));
        }
    }

    // Opens the stream of the next round, with a parser of its own.
    void start() {
        const auto budget = call.budget();
        stream.emplace(budget ? call.client->stream(call.request, cancel.get_token(), *budget)
                              : call.client->stream(call.request, cancel.get_token()));
        parser = PartialJsonParser();
    }
};

detail::ObjectStreamCore::ObjectStreamCore(std::unique_ptr<Setup> setup)
    : state_(std::move(setup)) {}
detail::ObjectStreamCore::ObjectStreamCore(ObjectStreamCore&&) noexcept = default;
detail::ObjectStreamCore& detail::ObjectStreamCore::operator=(ObjectStreamCore&&) noexcept =
    default;
detail::ObjectStreamCore::~ObjectStreamCore() = default;

std::optional<ObjectStreamEvent> detail::ObjectStreamCore::next() {
    Setup& s = *state_;
    if (s.failure) std::rethrow_exception(s.failure);
    if (s.finished) return std::nullopt;
    if (s.cancel.stop_requested()) throw CancelledError();
    for (;;) {
        if (!s.stream) s.start();
        std::optional<StreamEvent> event = s.stream->next();
        if (!event) {
            // A stream ends with `done`; one that ends without it was already an error.
            throw StreamTruncatedError("the stream ended without its final response");
        }
        if (event->type == StreamEvent::Type::text_delta) {
            if (s.parser.feed(event->delta)) {
                return ObjectStreamEvent{ObjectStreamEvent::Type::partial, &s.parser.value(), {}};
            }
            continue;
        }
        if (event->type != StreamEvent::Type::done || !event->response) continue;
        s.call.count(*event->response);
        ChatResponse response = std::move(*event->response);
        s.stream.reset();
        bool over = false;
        try {
            over = s.call.settle(std::move(response));
        } catch (...) {
            // A reply that ends the call with an error ends the stream: nothing is sent again.
            s.failure = std::current_exception();
            throw;
        }
        s.finished = over;
        if (over) {
            return ObjectStreamEvent{ObjectStreamEvent::Type::done, nullptr, {}};
        }
        return ObjectStreamEvent{ObjectStreamEvent::Type::repair, nullptr, s.call.last_problem};
    }
}

void detail::ObjectStreamCore::cancel() noexcept {
    state_->cancel.request_stop();
}

const ObjectResponse<json>* detail::ObjectStreamCore::result() const noexcept {
    return state_->finished ? &state_->call.result : nullptr;
}

detail::ObjectStreamCore detail::stream_structured(const Client& client, ChatRequest request,
                                                   json schema,
                                                   const StructuredOutputOptions& options,
                                                   std::stop_token stop, ObjectDecoder decode) {
    check_options(request, options);
    Call call(client, std::move(request), std::move(schema), options, std::move(decode));
    auto setup = std::make_unique<ObjectStreamCore::Setup>(std::move(call), stop);
    // Made now, so that the route and the request are checked before this returns (a stream
    // sends nothing until it is first pulled).
    setup->start();
    return ObjectStreamCore(std::move(setup));
}

ObjectStream<json> Client::stream_object(ChatRequest request, json schema,
                                         const StructuredOutputOptions& options,
                                         std::stop_token stop) const {
    return ObjectStream<json>(
        detail::stream_structured(*this, std::move(request), std::move(schema), options,
                                  std::move(stop), {}),
        nullptr);
}

}  // namespace ullm
