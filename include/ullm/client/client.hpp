#pragma once

/// The entry point: routes a model to its provider, sends requests through one shared
/// transport with retries, and streams responses.

#include <ullm/client/awaitable.hpp>
#include <ullm/client/budget.hpp>
#include <ullm/client/chat_stream.hpp>
#include <ullm/client/provider_limits.hpp>
#include <ullm/client/structured_output.hpp>
#include <ullm/core/executor.hpp>
#include <ullm/core/result.hpp>
#include <ullm/http/retry_policy.hpp>
#include <ullm/http/transport.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/providers/price_table.hpp>
#include <ullm/providers/provider.hpp>
#include <ullm/store/session_store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

class Conversation;
struct ConversationOptions;

namespace detail {
struct ConversationCalls;
class ClientHandle;
class AsyncCall;
}  // namespace detail

/// One finished model request, as `ClientOptions::on_usage` is told of it.
struct UsageReport {
    std::string provider;
    std::string model;  ///< The model id the request was routed to.
    Usage usage;        ///< As priced: `cost_usd` is set when the model has a price.
    bool streamed = false;
    /// A direct call that its budget skipped (`BudgetAction::skip`): nothing was sent and the
    /// usage is zero.
    bool budget_skipped = false;
    /// An embedding request (`Client::embed`): each HTTP request of a call is told of alone.
    bool embedding = false;
    /// The wall-clock time the request began: when its first attempt started (a retried
    /// request keeps its first attempt's time; a wait for provider limits counts as part of the
    /// request). For a stream, when it was opened: its first pull (at once for `stream_async`).
    /// For an embedding call of several requests, the start of the request reported. For a
    /// background response that `wait_response` reports, when that `wait_response` began: the
    /// request that created the response was not reported, and the library does not know how
    /// long the response ran before the wait. For a request a budget skipped, the time of the
    /// skip. A default-constructed value (the epoch) in reports made by other code means
    /// unknown.
    std::chrono::system_clock::time_point started_at{};
};

/// Settings of a `Client`. A value type.
struct ClientOptions {
    /// The model used when a request names none, e.g. "gpt-4o" or "ollama/llama3.2".
    std::string default_model;
    /// The transport every request and stream shares; a `CurlTransport` when null. A provider
    /// that brings its own (`Provider::transport()`, as the scripted provider does) uses that.
    std::shared_ptr<Transport> transport;
    /// Retries of failed requests (attempts, backoff, `Retry-After`), unless the provider has a
    /// policy of its own (`Provider::retry_policy()`).
    RetryPolicy retry;
    /// Providers to register (by their `name()`); `from_env` adds those it can configure.
    std::vector<std::shared_ptr<const Provider>> providers;
    /// Prices used for `cost_usd` and `estimate`; the shipped table when null.
    std::shared_ptr<const PriceTable> prices;
    /// Where conversations persist after every committed turn and are restored from by
    /// session id; conversations live in memory only when null. See `SqliteSessionStore`.
    std::shared_ptr<SessionStore> session_store;
    /// Told of every finished model request: each `complete`, each stream's `done` (the rounds
    /// of conversations and dialogs included), and, with zero usage, each direct call a budget
    /// skipped. Failed and cancelled requests are not reported. Called on the thread that
    /// finished the request, possibly from several threads at once; exceptions it throws are
    /// ignored.
    std::function<void(const UsageReport&)> on_usage;
    /// Limits on what each provider (by name, e.g. "openai") is sent: in flight at once,
    /// requests and tokens per minute, with a queue that serves conversations in turn. A
    /// provider not named has none. Checked by the constructor (`invalid_limits`).
    std::map<std::string, ProviderLimits, std::less<>> limits;
    /// The tool callbacks of the conversations and dialogs made from this client run on a pool
    /// of at most this many threads, started as calls need them and ended after 30 s idle. A
    /// call waiting for a thread waits within its `tool_execution_timeout`. At least 1 (else
    /// `invalid_limits`); a tool that ignores its stop token holds its thread until it returns.
    std::size_t max_tool_threads = 64;
};

/// What a request may cost before it is sent.
struct CostEstimate {
    std::int64_t input_tokens = 0;       ///< Estimated prompt tokens (about 4 characters each).
    std::int64_t max_output_tokens = 0;  ///< The request's `max_tokens`, else 4,096.
    double input_cost_usd = 0;           ///< The prompt's cost at the uncached price.
    double max_cost_usd = 0;             ///< Prompt plus the most output the request allows.
    ModelPrice price;
};

/// How `Client::wait_response` polls a background response. A value type.
struct PollOptions {
    /// The wait after the first poll that finds the response unfinished; each later wait is
    /// `multiplier` times longer, up to `max_interval`. A `Retry-After` (or `retry-after-ms`) on
    /// a poll's answer replaces the wait it follows, up to `RetryPolicy::max_server_delay`.
    std::chrono::milliseconds initial_interval{500};  ///< Positive.
    double multiplier = 1.5;                          ///< At least 1.
    std::chrono::milliseconds max_interval{std::chrono::seconds(5)};
};

namespace detail {
/// Throws `ProviderCapabilityError` `invalid_poll_options` unless `options` can be polled with.
void check_poll_options(const PollOptions& options);
}  // namespace detail

/// How an async call runs (`Client::complete_async`). A value type.
struct AsyncOptions {
    /// Cancels the call: it completes with `CancelledError` within moments, even while the
    /// server is silent or a retry is waiting.
    std::stop_token stop;
    /// Where the completion runs; the client's callback thread (`ullm-cb`) when null.
    std::shared_ptr<Executor> executor;
    /// The call's budget, applied as `complete(request, stop, budget)` applies it.
    std::optional<CallBudget> budget;
    /// The lane the call waits in when its provider's limits hold it back
    /// (`ClientOptions::limits`): lanes are served in turn. Any number: a user's id, a hash of
    /// a tenant's name. (A number, not a string: g++ 12 miscompiles a braced `AsyncOptions`
    /// temporary holding a `std::string` in a `co_await` expression.)
    std::uint64_t lane = 0;
};

/// How `Client::complete_many` runs its requests. A value type.
struct BatchOptions {
    /// How many requests are in flight at once; at least 1 (else `invalid_batch_options`).
    std::size_t max_in_flight = 64;
    /// Cancels the requests not finished yet: each completes with `CancelledError`.
    std::stop_token stop;
    /// Each request's budget, applied as `complete(request, stop, budget)` applies it.
    std::optional<CallBudget> budget;
    /// The lane the requests wait in for their provider's limits (`AsyncOptions::lane`).
    std::uint64_t lane = 0;
};

/// What `Client::stream_async` calls. A value type.
struct StreamCallbacks {
    /// Each event of the stream in order, `done` last; never two at once for one stream. If it
    /// throws, the stream is cancelled and `on_done` receives the exception.
    std::function<void(const StreamEvent&)> on_event;
    /// Once, after every `on_event`: the whole response (as the `done` event carried it), or
    /// the error that ended the stream. What it throws is dropped.
    std::function<void(Result<ChatResponse>)> on_done;
};

/// Cancels a stream started by `Client::stream_async`: it ends with `CancelledError` soon,
/// unless it ended first. Dropping the handle does not cancel. Cheap to copy; thread-safe.
class StreamHandle {
public:
    StreamHandle() = default;
    /// Cancels the stream; idempotent, never blocks, a no-op once it has ended.
    void cancel() const noexcept;

private:
    friend class Client;
    explicit StreamHandle(std::weak_ptr<detail::AsyncCall> call) : call_(std::move(call)) {}
    std::weak_ptr<detail::AsyncCall> call_;
};

/// Where a model is served: the provider and the model id it knows.
struct Route {
    std::shared_ptr<const Provider> provider;
    std::string model;
};

/// Routes requests to providers and sends them. Cheap to copy (copies share one state);
/// thread-safe.
class Client {
public:
    /// A client with the given providers and transport. Throws `TransportError` if the
    /// default transport cannot start.
    explicit Client(ClientOptions options = {});

    /// A client configured from the environment: `OPENAI_API_KEY` (with `OPENAI_BASE_URL`,
    /// `OPENAI_ORG_ID`, `OPENAI_PROJECT_ID`; Chat Completions as `openai`, the Responses API as
    /// `openai-responses/<model>`), `ANTHROPIC_API_KEY` (with `ANTHROPIC_BASE_URL`),
    /// `GEMINI_API_KEY` or `GOOGLE_API_KEY`, and `OLLAMA_HOST` (Ollama is always available as
    /// `ollama/<model>`, on localhost:11434 by default). Providers in `options` win over
    /// those from the environment.
    [[nodiscard]] static Client from_env(ClientOptions options = {});

    /// Registers `provider` under its name, replacing one of the same name. Thread-safe.
    void add_provider(std::shared_ptr<const Provider> provider);

    /// The names of the registered providers, sorted.
    [[nodiscard]] std::vector<std::string> providers() const;

    /// Where `model` goes: an explicit `provider/model`, else by name (`gpt-*`, `o1*`, `o3*`,
    /// `o4*`, `chatgpt-*`, `text-embedding-*` → openai; `claude-*` → anthropic; `gemini-*` →
    /// gemini); an empty model means the default model. Throws `ProviderCapabilityError`:
    /// `invalid_model`, `unknown_model_route`, or `provider_not_configured` (naming the variable to
    /// set).
    [[nodiscard]] Route route(std::string_view model) const;

    /// Sends `request` and waits for the response, retrying what the retry policy allows.
    /// Throws the mapped `Error` of the last attempt, `CancelledError` when `stop` is
    /// requested, `ProviderCapabilityError` for unsupported options (before any I/O). A
    /// background request (OpenAI Responses `background: true` in `provider_options`) returns at
    /// once with `status` `queued` or `in_progress`, its `response_id`, no content and zero usage,
    /// and is not reported to `on_usage`: `wait_response` returns and reports it once finished.
    [[nodiscard]] ChatResponse complete(ChatRequest request, std::stop_token stop = {}) const;

    /// Starts `request` and returns at once; the future holds the response, or the error that
    /// `complete` would have thrown (routing and option errors included: an async call throws
    /// nothing but `std::bad_alloc`). Retries as `complete` does, its waits on a timer. Runs on
    /// the transport's I/O loop with no thread per call (a custom `Transport` that does not
    /// implement `start` costs one thread per call in flight); the response is decoded on the
    /// client's callback thread. When the last copy of the client goes, every async call still
    /// running completes with `CancelledError`.
    [[nodiscard]] std::future<ChatResponse> complete_async(ChatRequest request,
                                                           AsyncOptions options = {}) const;

    /// As `complete_async(request, options)`, calling `on_done` once with the outcome, on
    /// `options.executor` (else the client's callback thread, where a slow callback delays the
    /// completions queued behind it). What `on_done` throws is dropped.
    void complete_async(ChatRequest request, std::function<void(Result<ChatResponse>)> on_done,
                        AsyncOptions options = {}) const;

    /// Sends every request of `requests`, at most `options.max_in_flight` at a time, and waits
    /// for all of them: one result per request, in request order, each the response or the
    /// error of that request alone. Throws only `InvalidOptionError` `invalid_batch_options`
    /// (before any I/O) when `max_in_flight` is 0.
    [[nodiscard]] std::vector<Result<ChatResponse>> complete_many(
        std::vector<ChatRequest> requests, const BatchOptions& options = {}) const;

    /// Streams `request`'s response to `callbacks` and returns at once: events are read and
    /// decoded as the I/O loop receives them, with no thread per stream (an offline provider or
    /// a custom transport whose streams cannot notify costs one), and handed to the callbacks
    /// in batches on `options.executor` (else the client's callback thread). The next batch is
    /// read only once the callbacks have taken the last one, so a slow consumer holds back its
    /// own stream alone (the transport stops reading it at `stream_buffer_bytes`). Retries as
    /// `stream` does, its waits on a timer. Errors, routing and options included, come through
    /// `on_done`; nothing is thrown but `std::bad_alloc`.
    StreamHandle stream_async(ChatRequest request, StreamCallbacks callbacks,
                              AsyncOptions options = {}) const;

    /// `co_await client.co_complete(request)`: as `complete_async`, started when awaited (not
    /// before), resuming the coroutine with the response or throwing the error. The coroutine
    /// resumes on `options.executor`, else on its promise's `get_executor()` when it has one,
    /// else on the client's callback thread.
    [[nodiscard]] Awaitable<ChatResponse> co_complete(ChatRequest request,
                                                      AsyncOptions options) const;
    /// As `co_complete(request, {})`. (An overload rather than a default argument, which g++ 12
    /// may construct wrongly inside a `co_await` expression.)
    [[nodiscard]] Awaitable<ChatResponse> co_complete(ChatRequest request) const;

    /// A stream for coroutines: `while (auto event = co_await stream.next())`. As
    /// `stream_async`, sent on the first `next()`; see `AsyncEventStream`.
    [[nodiscard]] AsyncEventStream co_stream(ChatRequest request, AsyncOptions options) const;
    /// As `co_stream(request, {})` (an overload for the reason `co_complete`'s is).
    [[nodiscard]] AsyncEventStream co_stream(ChatRequest request) const;

    /// A stream of `request`'s response; nothing is sent until the first event is pulled.
    [[nodiscard]] ChatStream stream(ChatRequest request, std::stop_token stop = {}) const;

    /// As `complete(request, stop)`, within `budget`: when the request could cost more than
    /// `budget.usd` (by `estimate`), throws `BudgetExceededError` (`throw`), calls the warning
    /// callback and sends (`warn`), or sends nothing and returns the synthetic budget-exceeded
    /// response with zero usage (`skip`). The budget is checked before any I/O
    /// (`invalid_budget`, `invalid_budget_action`, `unknown_model_pricing`).
    [[nodiscard]] ChatResponse complete(ChatRequest request, std::stop_token stop,
                                        const CallBudget& budget) const;

    /// As `stream(request, stop)`, within `budget` as `complete` applies it. A skipped request
    /// streams one `usage_update` event with zero cost, then `done` with the synthetic
    /// response.
    [[nodiscard]] ChatStream stream(ChatRequest request, std::stop_token stop,
                                    const CallBudget& budget) const;

    /// Waits for background response `response_id` (from a `complete` of a request with
    /// `background: true`, whose `status` was not `finished`) of `model`'s provider to finish:
    /// polls it at once, then after each wait of `options` until its status is final, each poll
    /// retried as the retry policy allows. Returns the finished response (`completed` or
    /// `incomplete`), checked, priced and reported to `on_usage`, once. Throws the mapped `Error`
    /// of a `failed` response (not polled again), `ProviderError` `response_cancelled` when it
    /// was cancelled, `CancelledError` within moments of `stop` being requested, the mapped
    /// error of a poll that failed after its retries, and before any I/O
    /// `ProviderCapabilityError`: `unsupported_option` when the provider cannot run responses in
    /// the background, `invalid_response_id`, `invalid_poll_options`, or a routing code.
    [[nodiscard]] ChatResponse wait_response(std::string_view model, std::string_view response_id,
                                             const PollOptions& options = {},
                                             std::stop_token stop = {}) const;

    /// Cancels background response `response_id` of `model`'s provider and returns it as it then
    /// stands: `status` `cancelled` with what it had produced, or `finished` when it finished
    /// first. Its usage is not reported to `on_usage`. Retried as the retry policy allows; throws
    /// the mapped `Error` (an id the provider does not know is `invalid_request`),
    /// `CancelledError`, and before any I/O `unsupported_option`, `invalid_response_id` or a
    /// routing code.
    [[nodiscard]] ChatResponse cancel_response(std::string_view model, std::string_view response_id,
                                               std::stop_token stop = {}) const;

    /// The stream of background response `response_id` of `model`'s provider from the event
    /// after sequence number `starting_after` (the whole stream when it is negative), e.g. a
    /// `ChatStream::resume_position()` kept from a stream that was lost. Nothing is sent until
    /// the first pull. Its events are those that follow; tool calls that ended before the
    /// position are started and ended again just before `done`, so that `done` (the whole
    /// response) holds exactly the calls the stream yielded. Throws as `cancel_response` does
    /// before any I/O; its pulls throw as a `stream`'s do.
    [[nodiscard]] ChatStream resume_stream(std::string_view model, std::string_view response_id,
                                           std::int64_t starting_after,
                                           std::stop_token stop = {}) const;

    /// One vector per input of `request`, in input order: sent in as many requests as the
    /// provider's per-request limit needs (`EmbeddingCodec::max_inputs`), one after another,
    /// each retried as `complete` is and told of to `on_usage` (with `embedding` set) as it
    /// finishes. Before any I/O, throws `InvalidOptionError` `invalid_embedding_input` (no
    /// inputs, an empty one, one that is not valid UTF-8), `invalid_embedding_dimensions` (not
    /// positive), a routing code, and `ProviderCapabilityError` `unsupported_option` when the
    /// provider has no embeddings API (Anthropic) or refuses an option. Then the mapped `Error`
    /// of a request that failed after its retries, `ProviderError` `invalid_provider_response`
    /// for an answer that is not one finite vector per input, all of one length (also across
    /// requests), and `CancelledError` once `stop` is requested. Nothing is returned partly
    /// filled: on any error the vectors of the requests that succeeded are dropped (their
    /// usage was reported).
    [[nodiscard]] EmbeddingResponse embed(EmbeddingRequest request,
                                          std::stop_token stop = {}) const;

    /// As `embed(request, stop)`, within `budget`: when the call could cost more than
    /// `budget.usd` (its inputs' estimated tokens, about 4 characters each, at the model's
    /// input price), throws `BudgetExceededError` (`throw`), calls the warning callback and sends
    /// (`warn`), or sends nothing and returns a response with `budget_skipped` set, no vectors
    /// and zero usage, reported to `on_usage` (`skip`). Checked before any I/O, as `complete`
    /// checks its budget.
    [[nodiscard]] EmbeddingResponse embed(EmbeddingRequest request, std::stop_token stop,
                                          const CallBudget& budget) const;

    /// What `request` may cost, from an estimate of its prompt tokens and its output limit.
    /// Throws `ProviderCapabilityError` `unknown_model_pricing` when the model has no price.
    [[nodiscard]] CostEstimate estimate(const ChatRequest& request) const;

    /// Structured output: sends `request` with `schema` in the provider's native form
    /// (Chat Completions `response_format`, Responses `text.format`, Anthropic
    /// `output_config.format`, Gemini `responseJsonSchema`), then checks the reply with the
    /// strict validator. A reply that is not JSON or breaks the schema is sent back to the model
    /// with the problem up to `options.max_repairs` times. Returns the validated value, or a
    /// refusal (`refusal` set) or a skipped call (`budget_skipped`). Before any I/O, throws
    /// what `complete` throws, `ToolDefinitionError` for a schema the validator refuses,
    /// `ProviderCapabilityError` `unsupported_schema_keyword` for one the provider cannot take
    /// (naming the keyword and where), `InvalidOptionError` `invalid_response_format` (the
    /// request already has one, or a bad name) or `invalid_max_repairs`. After the last round,
    /// `StructuredOutputError` (`structured_output_not_json`, `structured_output_invalid`,
    /// `structured_output_truncated` at once for a reply cut off by `max_tokens`).
    [[nodiscard]] ObjectResponse<json> complete_object(ChatRequest request, json schema,
                                                       const StructuredOutputOptions& options = {},
                                                       std::stop_token stop = {}) const;

    /// As `complete_object(request, json_schema_of<T>(), …)`, decoding the reply into `T`; a
    /// reply that does not decode is repaired or refused as one that breaks the schema.
    template <StructuredObject T>
    [[nodiscard]] ObjectResponse<T> complete_object(ChatRequest request,
                                                    const StructuredOutputOptions& options = {},
                                                    std::stop_token stop = {}) const {
        std::optional<T> decoded;
        // Named first, so that the call below does not depend on `T`.
        json schema = json_schema_of<T>();
        const detail::ObjectDecoder decode = [&decoded](const json& value) {
            detail::decode_object(value, decoded);
        };
        ObjectResponse<json> result = detail::complete_structured(
            *this, std::move(request), std::move(schema), options, std::move(stop), decode);
        return detail::typed_response<T>(std::move(result), std::move(decoded));
    }

    /// As `complete_object`, streamed: `partial` events carry the value as the JSON arrives
    /// (parsed by `PartialJsonParser`), a `repair` event starts each repair round, and `done`
    /// ends the call with the outcome in `ObjectStream::result()`. Options are checked and the
    /// route chosen here; nothing is sent until the first `next()`.
    [[nodiscard]] ObjectStream<json> stream_object(ChatRequest request, json schema,
                                                   const StructuredOutputOptions& options = {},
                                                   std::stop_token stop = {}) const;

    /// As `stream_object(request, json_schema_of<T>(), …)`, decoding the final reply into `T`.
    template <StructuredObject T>
    [[nodiscard]] ObjectStream<T> stream_object(ChatRequest request,
                                                const StructuredOutputOptions& options = {},
                                                std::stop_token stop = {}) const {
        auto decoded = std::make_shared<std::optional<T>>();
        // Named first, so that the call below does not depend on `T`.
        json schema = json_schema_of<T>();
        detail::ObjectDecoder decode = [decoded](const json& value) {
            detail::decode_object(value, *decoded);
        };
        detail::ObjectStreamCore core =
            detail::stream_structured(*this, std::move(request), std::move(schema), options,
                                      std::move(stop), std::move(decode));
        return ObjectStream<T>(std::move(core), decoded);
    }

    /// A conversation over this client (include `<ullm/conversation/conversation.hpp>`):
    /// validates `options` (`ProviderCapabilityError` with a code naming the option,
    /// `ToolDefinitionError` for tools) before routing the model, then restores the session
    /// from the session store when one is configured and holds it (a corrupt snapshot throws
    /// `InvalidConversationSnapshotError` and no conversation is made); otherwise a new one.
    [[nodiscard]] Conversation conversation(ConversationOptions options) const;

    /// The session store conversations use; null when none is configured.
    [[nodiscard]] const std::shared_ptr<SessionStore>& session_store() const noexcept;

    /// The price table in use.
    [[nodiscard]] const PriceTable& prices() const noexcept;

    /// The retry policy of the requests and streams.
    [[nodiscard]] const RetryPolicy& retry_policy() const noexcept;

    struct State;

private:
    friend struct detail::ConversationCalls;
    std::shared_ptr<State> state_;
    // Held by every copy of this client, never by its calls: when the last copy goes, the
    // async calls still running are cancelled.
    std::shared_ptr<detail::ClientHandle> handle_;
};

}  // namespace ullm
