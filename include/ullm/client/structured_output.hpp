#pragma once

/// Structured output: the types of `Client::complete_object` and `Client::stream_object`, which
/// send a schema in each provider's native form, check the reply with the strict validator,
/// decode it, and can send the problem back to the model to repair (see
/// docs/structured-output.md).

#include <ullm/client/budget.hpp>
#include <ullm/client/chat_stream.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/core/partial_json.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/tools/reflect.hpp>
#include <ullm/tools/tool.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

namespace ullm {

class Client;

/// Types a structured-output call can produce: a `json_schema_of` schema and a `from_json`
/// (e.g. a struct described with `ULLM_REFLECT`).
template <class T>
concept StructuredObject = Reflectable<T> && std::move_constructible<T> && requires(const json& v) {
    { v.template get<T>() } -> std::convertible_to<T>;
};

/// The most repair rounds one structured-output call may ask for.
inline constexpr int max_structured_output_repairs = 10;

/// Settings of a structured-output call; written with designated initialisers.
struct StructuredOutputOptions {
    /// The schema's name where the provider takes one (OpenAI's `json_schema.name`): 1..64 of
    /// `[A-Za-z0-9_-]`.
    std::string name = "response";
    /// OpenAI's strict mode, in which the model can only produce what the schema allows. It
    /// asks for `additionalProperties: false` and every property required on every object,
    /// which `ULLM_REFLECT` writes; a schema that breaks it is refused before sending.
    bool strict = true;
    /// How many times a reply that is not JSON, breaks the schema or does not decode is sent
    /// back to the model with the problem, for another answer (0 to 10). Each repair is a model
    /// request of its own: it counts in usage, in `on_usage` and against `budget`.
    int max_repairs = 0;
    /// A spend cap for the whole call, repairs included: each request is checked against what
    /// is left of it (as `Client::complete` with a `CallBudget` does).
    std::optional<CallBudget> budget;
};

/// What a structured-output call produced. A value type.
template <class T>
struct ObjectResponse {
    /// The reply decoded into `T`; empty when the model refused or the budget skipped the call.
    std::optional<T> object;
    /// The reply as validated JSON (what `object` was decoded from); null when there is none.
    json value;
    /// Why the model refused (OpenAI's `refusal`, a content filter's stop); nothing was decoded.
    std::optional<std::string> refusal;
    /// The budget's `skip` action sent nothing (or nothing more).
    bool budget_skipped = false;
    /// The last model response.
    ChatResponse response;
    /// Summed over every model request of the call, repairs included.
    Usage usage;
    /// How many repair rounds it took (0 when the first reply was good).
    int repairs = 0;

    /// Whether the model refused.
    [[nodiscard]] bool refused() const noexcept { return refusal.has_value(); }

    /// The object; throws `StructuredOutputError` `structured_output_refused` when there is
    /// none (a refusal or a skipped call).
    [[nodiscard]] const T& get() const {
        if (!object) {
            throw StructuredOutputError(
                ErrorCode::structured_output_refused,
                refusal ? "the model refused: " + *refusal
                        : std::string("the budget skipped the request: there is no object"),
                response.text, {}, usage);
        }
        return *object;
    }
};

/// One event of `ObjectStream`.
struct ObjectStreamEvent {
    enum class Type {
        /// The value grew: `partial` points at it as it stands (valid until the next `next()`).
        partial,
        /// The reply was refused by the checks and sent back to the model: `problem` says why;
        /// the partial value starts again from nothing.
        repair,
        /// The call is over: `ObjectStream::result()` holds the outcome.
        done,
    };
    Type type = Type::partial;
    const json* partial = nullptr;
    std::string problem;
};

namespace detail {

/// Decodes a validated reply, throwing `ToolArgumentError` (path and reason) when it does not
/// decode; empty for the schema-only form.
using ObjectDecoder = std::function<void(const json& value)>;

/// The part of `ObjectStream` that does not depend on `T`. Defined in
/// src/client/structured_output.cpp.
class ObjectStreamCore {
public:
    struct Setup;
    explicit ObjectStreamCore(std::unique_ptr<Setup> setup);
    ObjectStreamCore(ObjectStreamCore&&) noexcept;
    ObjectStreamCore& operator=(ObjectStreamCore&&) noexcept;
    ~ObjectStreamCore();

    [[nodiscard]] std::optional<ObjectStreamEvent> next();
    void cancel() noexcept;
    [[nodiscard]] const ObjectResponse<json>* result() const noexcept;

private:
    std::unique_ptr<Setup> state_;
};

/// `client.complete_object(request, schema, options, stop)`, with `decode` run on each reply
/// that passes the schema. Defined in src/client/structured_output.cpp.
[[nodiscard]] ObjectResponse<json> complete_structured(const Client& client, ChatRequest request,
                                                       json schema,
                                                       const StructuredOutputOptions& options,
                                                       std::stop_token stop,
                                                       const ObjectDecoder& decode);

/// `client.stream_object(request, schema, options, stop)`, with `decode` as above.
[[nodiscard]] ObjectStreamCore stream_structured(const Client& client, ChatRequest request,
                                                 json schema,
                                                 const StructuredOutputOptions& options,
                                                 std::stop_token stop, ObjectDecoder decode);

/// Decodes `value` into `out`; a failure is a `ToolArgumentError` naming where.
template <class T>
void decode_object(const json& value, std::optional<T>& out) {
    try {
        out.emplace(value.template get<T>());
    } catch (...) {
        throw_argument_decode_error(std::current_exception());
    }
}

/// `from` with its object taken from `decoded`.
template <class T>
[[nodiscard]] ObjectResponse<T> typed_response(ObjectResponse<json>&& from,
                                               std::optional<T>&& decoded) {
    ObjectResponse<T> out;
    if (from.object) out.object = std::move(decoded);
    out.value = std::move(from.value);
    out.refusal = std::move(from.refusal);
    out.budget_skipped = from.budget_skipped;
    out.response = std::move(from.response);
    out.usage = from.usage;
    out.repairs = from.repairs;
    return out;
}

}  // namespace detail

/// A structured-output reply, streamed: pulled by one consumer with `next()`, yielding partial
/// values as the JSON arrives and ending with `done`, after which `result()` holds the
/// validated, decoded object. Errors are those of `Client::complete_object`, thrown from
/// `next()`. `cancel()` may be called from any thread; destroying the stream cancels it.
template <class T>
class ObjectStream {
public:
    explicit ObjectStream(detail::ObjectStreamCore core, std::shared_ptr<std::optional<T>> decoded)
        : core_(std::move(core)), decoded_(std::move(decoded)) {}

    /// The next event; nullopt after `done`. Throws the call's errors (see
    /// `Client::complete_object`), `CancelledError` after `cancel()`.
    [[nodiscard]] std::optional<ObjectStreamEvent> next() {
        auto event = core_.next();
        if (event && event->type == ObjectStreamEvent::Type::done) {
            if constexpr (std::is_same_v<T, json>) {
                result_ = *core_.result();
            } else {
                result_ = detail::typed_response<T>(ObjectResponse<json>(*core_.result()),
                                                    std::move(*decoded_));
            }
        }
        return event;
    }

    /// Aborts the transfer; a waiting or later `next()` throws `CancelledError`. Thread-safe.
    void cancel() noexcept { core_.cancel(); }

    /// The outcome, once `done` was pulled.
    [[nodiscard]] const std::optional<ObjectResponse<T>>& result() const noexcept {
        return result_;
    }

private:
    detail::ObjectStreamCore core_;
    std::shared_ptr<std::optional<T>> decoded_;
    std::optional<ObjectResponse<T>> result_;
};

}  // namespace ullm
