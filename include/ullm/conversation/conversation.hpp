#pragma once

/// `Conversation`: stored history, running totals, FIFO turns, the tool loop, budgets, context
/// management, streaming and persistence in a session store.

#include <ullm/client/awaitable.hpp>
#include <ullm/client/budget.hpp>
#include <ullm/client/client.hpp>
#include <ullm/conversation/context_manager.hpp>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/core/executor.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/result.hpp>
#include <ullm/detail/pull_iterator.hpp>
#include <ullm/providers/chat.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/validator.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// What the compaction callback is told when a context manager trimmed the messages of a
/// request. `messages` is the validated list that will be sent.
struct CompactionEvent {
    std::size_t messages_before = 0;
    std::size_t messages_after = 0;
    std::vector<Message> messages;
};

/// What `ConversationOptions::on_interrupted_turn` is told about a turn that was cancelled or
/// failed after it started.
struct InterruptedTurn {
    std::string code;     ///< The error's code; `cancelled` for a cancel or a dropped stream.
    std::string message;  ///< The error's message.
    /// Tool calls of the turn that have no real result: cut off or never started by a cancel,
    /// or left unrun by the failure. Each is answered with an error result.
    std::size_t unrun_calls = 0;
};

/// Settings of a conversation; written with designated initialisers. Checked by
/// `Client::conversation` before anything is routed or restored.
struct ConversationOptions {
    /// The session id (1..256 bytes, UTF-8, no control characters); generated when empty. With
    /// a session store, an existing session of this id (and tenant) is restored.
    std::string session_id;
    /// The tenant the session belongs to (0..128 bytes); sessions never cross tenants.
    std::string tenant;
    /// False keeps the conversation in memory only: it neither restores from nor persists to
    /// the client's session store.
    bool use_session_store = true;
    /// A store for this conversation instead of the client's (when `use_session_store`).
    std::shared_ptr<SessionStore> session_store;
    /// The system prompt, pinned at the start of every request; never stored in history.
    std::string system;
    /// Called before every model round; what it returns is appended (after a blank line) to
    /// the system prompt of that round only, e.g. state that changes while tools run. Never
    /// stored. Exceptions it throws fail the turn.
    std::function<std::string()> system_context;
    /// The model, as `Client::route` understands it; the client's default when empty.
    std::string model;
    /// Provider-specific request fields (see `ChatRequest::provider_options`).
    json provider_options = json::object();
    /// How a round waits for a background reply (OpenAI Responses `background: true` in
    /// `provider_options`): a round whose reply comes back queued or in progress has it
    /// polled with `Client::wait_response` until it is finished, cancellable with the turn;
    /// one that was cancelled fails the turn with `response_cancelled`. Only a finished reply
    /// is committed. Checked: `invalid_poll_options`.
    PollOptions background_poll;
    /// Tools the model may call; validated as a set (`ToolDefinitionError`).
    std::vector<Tool> tools;
    /// Whether and which tools the model may call. A forced choice (`required` or a named tool)
    /// applies to the first model round of a turn; later rounds of the turn use `automatic` so
    /// that the model can answer with the results.
    std::optional<ToolChoice> tool_choice;
    /// Keeps a forced `tool_choice` for every round of a turn, for turns that end through a
    /// tool that sets `ToolContext::end_turn` (a structured result).
    bool keep_tool_choice = false;
    /// How many tool rounds a turn may run (0..100); one more is `MaxToolRoundsError`.
    int max_tool_rounds = 5;
    /// How long one tool call may run (> 0, at most 300 s) before it is asked to stop and
    /// answered with an error result.
    std::chrono::milliseconds tool_execution_timeout{30'000};
    /// Runs the calls of a tool round one after another in call order instead of at once. A
    /// cancel then keeps the later calls from starting.
    bool sequential_tool_calls = false;
    /// At most this many calls of a round run at once (1..256); the others start in call
    /// order as earlier ones finish. Each call's deadline counts from its own start.
    std::size_t max_parallel_tool_calls = 16;
    /// Strict (the default) validates the model's arguments against each tool's schema.
    ValidationMode tool_validation = ValidationMode::strict;
    /// Decides what part of the history is sent; everything when null.
    std::shared_ptr<ContextManager> context_manager;
    /// The output limit of each model request (> 0); the provider's default when unset.
    std::optional<std::int64_t> max_tokens;
    std::optional<double> temperature;  ///< 0..2 when set.
    std::optional<ResponseFormat> response_format;
    /// The spend cap of the whole conversation in USD (finite, ≥ 0), against what the
    /// session has spent so far plus the current turn.
    std::optional<double> budget_usd;
    /// What to do when a request could exceed a cap.
    BudgetAction budget_action = BudgetAction::throw_error;
    /// Called at most once per turn under `BudgetAction::warn`; exceptions it throws are
    /// ignored.
    std::function<void(const BudgetWarning&)> on_budget_warning;
    /// Called when a context manager trimmed a request's messages; exceptions propagate.
    std::function<void(const CompactionEvent&)> on_compaction;
    /// Unset (the default): a turn that is cancelled or fails commits nothing to the history.
    /// Set: such a turn still commits its user message and every finished round; each tool
    /// call without a real result is answered with an error result (`Tool call cancelled`
    /// for a cancel, `Tool call not run: <error>` otherwise), so no call is left unanswered;
    /// then the message the callback returns, if any (e.g. an assistant message saying what
    /// failed). The turn still throws its error. Not for a turn that never took its slot, nor
    /// for `session_store_conflict`. Exceptions from the callback drop the kept messages.
    std::function<std::optional<Message>(const InterruptedTurn&)> on_interrupted_turn;
};

/// Settings of one turn, overriding the conversation's for that turn only.
struct SendOptions {
    /// A cap on this turn's spend in USD (finite, ≥ 0), across all its model rounds.
    std::optional<double> budget_usd;
    /// The action for this turn when a cap would be exceeded.
    std::optional<BudgetAction> budget_action;
    /// The output limit of this turn's requests (> 0).
    std::optional<std::int64_t> max_tokens;
    /// Cancels the turn: waiting for the slot, the model request, or the tools.
    std::stop_token stop;
    /// A label of the turn that its tools see as `ToolContext::turn_tag` (a dialog passes its
    /// turn id, so that a late tool of a replaced turn can tell).
    std::string turn_tag;
    /// Waits while tool callbacks of an earlier turn (cancelled or timed out, still running)
    /// finish, instead of failing with `conversation_busy`; `stop` ends the wait. A tool
    /// callback's own thread is still refused: it would wait for itself.
    bool wait_for_tools = false;
};

/// The reply of one turn: the final model response plus what the turn did.
struct ConversationReply : ChatResponse {
    Usage turn_usage;      ///< Usage summed over every model round of the turn.
    int model_rounds = 0;  ///< Model requests made in this turn.
    int tool_rounds = 0;   ///< Tool rounds run in this turn.
    /// True when `BudgetAction::skip` answered instead of the model: `text` explains, usage
    /// is zero, and nothing of it is stored as an assistant message.
    bool budget_skipped = false;
    /// The messages this turn added to the history, in order (replay state left out).
    std::vector<Message> messages;
};

/// What `Conversation::send_object` produced: the outcome as `Client::complete_object` gives
/// it (`response` is the turn's final model response, `usage` summed over every round of the
/// turn, repairs included), plus what the turn added.
template <class T>
struct ConversationObject : ObjectResponse<T> {
    /// The messages the turn added to the history, in order: the user message, tool rounds,
    /// each refused reply with the repair request sent after it, and the final reply.
    std::vector<Message> messages;
    int model_rounds = 0;  ///< Model requests made in the turn, repairs included.
    int tool_rounds = 0;   ///< Tool rounds run in the turn.
};

class Conversation;

namespace detail {
class TurnRunner;
class AsyncTurn;
class TurnHooks;
struct HookedConversation;

/// `from` with its object taken from `decoded`.
template <class T>
[[nodiscard]] ConversationObject<T> typed_conversation_object(ConversationObject<json>&& from,
                                                              std::optional<T>&& decoded) {
    ConversationObject<T> out;
    static_cast<ObjectResponse<T>&>(out) =
        typed_response<T>(std::move(static_cast<ObjectResponse<json>&>(from)), std::move(decoded));
    out.messages = std::move(from.messages);
    out.model_rounds = from.model_rounds;
    out.tool_rounds = from.tool_rounds;
    return out;
}
}  // namespace detail

/// One streamed conversation turn, pulled by the consumer (`next()` or a range-for). The turn
/// takes its FIFO slot at the first pull; a stream that is never pulled takes none. It yields
/// each model round's events (text, reasoning, tool calls, usage, retries), a
/// `tool_call_result` after each tool runs, and exactly one `done` when the turn is committed.
/// `cancel()` or destroying the stream before `done` aborts the turn, frees the slot and
/// commits nothing. Owned by one consumer thread; `cancel()` may be called from any thread.
class ConversationStream {
public:
    /// An input iterator over the events; reaching the end means the turn completed.
    using iterator = detail::PullIterator<ConversationStream>;

    explicit ConversationStream(std::unique_ptr<detail::TurnRunner> runner);
    ConversationStream(ConversationStream&&) noexcept;
    ConversationStream& operator=(ConversationStream&&) noexcept;
    ~ConversationStream();

    /// Waits for the next event; nullopt once the turn is done. Throws what the turn failed
    /// with (`ConversationBusyError`, `BudgetExceededError`, `MaxToolRoundsError`, a provider
    /// `Error`, …), and `CancelledError` after `cancel()`.
    std::optional<StreamEvent> next();

    /// Aborts the turn; nothing of it is committed. Thread-safe; does not throw.
    void cancel() noexcept;

    /// The turn's reply, once `done` has been pulled.
    [[nodiscard]] const std::optional<ConversationReply>& reply() const noexcept;

    iterator begin() { return iterator(this); }
    std::default_sentinel_t end() { return {}; }

private:
    std::unique_ptr<detail::TurnRunner> runner_;
};

/// What `Conversation::send_stream_async` calls. A value type.
struct TurnCallbacks {
    /// Each event of the turn in order, the events `ConversationStream` yields (`done` last);
    /// never two at once for one turn. If it throws, the turn ends: before `done` it is
    /// cancelled (committing nothing, unless `on_interrupted_turn` keeps it); at `done` it is
    /// already committed. Either way `on_done` receives the exception.
    std::function<void(const StreamEvent&)> on_event;
    /// Once, after every `on_event`: the turn's reply, or the error that ended it. What it
    /// throws is dropped.
    std::function<void(Result<ConversationReply>)> on_done;
};

/// Cancels a turn started by `Conversation::send_async` or `send_stream_async`: it ends with
/// `CancelledError` soon, unless it ended first (as `SendOptions::stop` does). Dropping the
/// handle does not cancel. Cheap to copy; thread-safe.
class TurnHandle {
public:
    TurnHandle() = default;
    /// Cancels the turn; idempotent, never blocks, a no-op once it has ended.
    void cancel() const noexcept;

private:
    friend class detail::AsyncTurn;
    explicit TurnHandle(std::weak_ptr<detail::AsyncTurn> turn) : turn_(std::move(turn)) {}
    std::weak_ptr<detail::AsyncTurn> turn_;
};

/// A stateful conversation over one model: history, totals and a FIFO turn queue, with tools
/// run automatically, budgets enforced, context trimmed and every committed turn persisted to
/// the client's session store. A cheap handle: copies share one conversation. Thread-safe:
/// turns from many threads run one at a time in arrival order.
class Conversation {
public:
    /// Validates `options`, routes the model, and restores the session from the client's
    /// session store when one is configured and holds it (see `Client::conversation`).
    Conversation(const Client& client, ConversationOptions options);

    /// Sends `text` as a user message and runs the turn: model rounds and tool rounds until the
    /// model answers, then commits and persists it. Throws `ConversationBusyError` while a tool
    /// callback of this conversation runs, `BudgetExceededError`, `MaxToolRoundsError`,
    /// `CancelledError`, `ProviderCapabilityError` for invalid `options`, the provider's
    /// `Error`, or `SessionStoreConflictError` when another writer changed the session; after
    /// any failure nothing of the turn is in the history unless `on_interrupted_turn` keeps
    /// it (its spend is in the totals either way).
    ConversationReply send(std::string text, SendOptions options = {});

    /// As `send(std::string)`, with a whole user message (images, documents).
    ConversationReply send(Message user_message, SendOptions options = {});

    /// The turn as a stream; nothing happens before the first pull. Invalid `options` throw
    /// here.
    [[nodiscard]] ConversationStream send_stream(std::string text, SendOptions options = {});

    /// As `send_stream(std::string)`, with a whole user message.
    [[nodiscard]] ConversationStream send_stream(Message user_message, SendOptions options = {});

    /// The turn of `send`, run without a thread that waits for it: waiting for the FIFO slot,
    /// the model rounds and the tool rounds are each started and continued when they end, on
    /// the client's callback thread (tools on the client's tool pool, as `send` runs them).
    /// Returns at once; nothing throws here (invalid options included): the future gives the
    /// reply or throws what `send` would have thrown. Turns from `send`, `send_stream` and the
    /// async calls share one FIFO; the async turn takes its place in it before this returns.
    [[nodiscard]] std::future<ConversationReply> send_async(std::string text,
                                                            SendOptions options = {});

    /// As `send_async(std::string, …)`, with a whole user message.
    [[nodiscard]] std::future<ConversationReply> send_async(Message user_message,
                                                            SendOptions options = {});

    /// As `send_async(text, options)`, calling `on_done` once with the outcome, never inside this
    /// call: on `executor` when one is given, else on the client's callback thread. The turn's
    /// own callbacks (`system_context`, a context manager, `on_compaction`, budget warnings,
    /// `on_interrupted_turn`) and its session store writes run there too.
    TurnHandle send_async(std::string text, std::function<void(Result<ConversationReply>)> on_done,
                          SendOptions options = {},
                          const std::shared_ptr<Executor>& executor = nullptr);

    /// As `send_async(std::string, on_done, …)`, with a whole user message.
    TurnHandle send_async(Message user_message,
                          std::function<void(Result<ConversationReply>)> on_done,
                          SendOptions options = {},
                          const std::shared_ptr<Executor>& executor = nullptr);

    /// The turn of `send_stream` pushed to `callbacks` as it runs, without a thread that waits
    /// for it (see `send_async`). The model's events reach `on_event` as they arrive; the next
    /// bytes of a round are read only after `on_event` has taken the last ones, so a slow
    /// consumer holds back its own turn alone.
    TurnHandle send_stream_async(Message user_message, TurnCallbacks callbacks,
                                 SendOptions options = {},
                                 const std::shared_ptr<Executor>& executor = nullptr);

    /// `co_await conversation.co_send(user_message, options, executor)`: as `send_async`,
    /// started when awaited; the coroutine is resumed as `Client::co_complete` resumes it
    /// (`executor`, else the promise's `get_executor()`, else the client's callback thread).
    /// (Overloads rather than default arguments, which g++ 12 may construct wrongly inside a
    /// `co_await` expression; for the same reason, pass a named `SendOptions`, not a braced
    /// one, inside `co_await`.)
    [[nodiscard]] Awaitable<ConversationReply> co_send(Message user_message, SendOptions options,
                                                       std::shared_ptr<Executor> executor);
    /// As `co_send(user_message, options, nullptr)`.
    [[nodiscard]] Awaitable<ConversationReply> co_send(Message user_message, SendOptions options);
    /// As `co_send(user_message, {}, nullptr)`.
    [[nodiscard]] Awaitable<ConversationReply> co_send(Message user_message);
    /// As `co_send(Message::user(text))`.
    [[nodiscard]] Awaitable<ConversationReply> co_send(std::string text);

    /// A turn's events for a coroutine: `while (auto event = co_await stream.next())`, the events
    /// `send_stream` yields, `done` last; the turn starts on the first `next()` and runs as
    /// `send_stream_async` runs it, a batch of events handed over at a time (a slow coroutine
    /// holds back its own turn alone). `response()` is the final model response once `done` is
    /// taken; what the turn added is then in `history()`. Destroying the stream cancels the
    /// turn. The coroutine resumes on `resume_on`, else the promise's `get_executor()`, else
    /// the client's callback thread.
    [[nodiscard]] AsyncEventStream co_send_stream(Message user_message, SendOptions options,
                                                  std::shared_ptr<Executor> resume_on);
    /// As `co_send_stream(user_message, {}, nullptr)`.
    [[nodiscard]] AsyncEventStream co_send_stream(Message user_message);

    /// Structured output in a turn: sends `text` with `schema` as the turn's response format
    /// (in place of `ConversationOptions::response_format`), runs the turn as `send` does,
    /// tools included, and checks the final reply with the strict validator. A reply that is
    /// not JSON or breaks the schema is answered, within the same turn, with the problem, up to
    /// `options.max_repairs` times; the turn commits only once a reply is good or refused (a
    /// refusal is a real answer and is stored). Throws what `send` throws, what
    /// `Client::complete_object` throws for its options and schema, `InvalidOptionError`
    /// `invalid_budget` for `options.budget` (a turn's cap is `SendOptions::budget_usd`), and
    /// `StructuredOutputError` when no good reply came (nothing of the turn is committed unless
    /// `on_interrupted_turn` keeps it; its spend is in the totals). A tool that ends the turn
    /// (`ToolContext::end_turn`) leaves no JSON reply: `structured_output_not_json`.
    [[nodiscard]] ConversationObject<json> send_object(std::string text, json schema,
                                                       const StructuredOutputOptions& options = {},
                                                       SendOptions send = {});

    /// As `send_object(std::string, …)`, with a whole user message.
    [[nodiscard]] ConversationObject<json> send_object(Message user_message, json schema,
                                                       const StructuredOutputOptions& options = {},
                                                       SendOptions send = {});

    /// As `send_object(text, json_schema_of<T>(), …)`, decoding the reply into `T`; a reply
    /// that does not decode is repaired or refused as one that breaks the schema.
    template <StructuredObject T>
    [[nodiscard]] ConversationObject<T> send_object(std::string text,
                                                    const StructuredOutputOptions& options = {},
                                                    SendOptions send = {}) {
        return send_object<T>(Message::user(std::move(text)), options, std::move(send));
    }

    /// As `send_object<T>(std::string, …)`, with a whole user message.
    template <StructuredObject T>
    [[nodiscard]] ConversationObject<T> send_object(Message user_message,
                                                    const StructuredOutputOptions& options = {},
                                                    SendOptions send = {}) {
        std::optional<T> decoded;
        // Named first, so that the call below does not depend on `T`.
        json schema = json_schema_of<T>();
        const detail::ObjectDecoder decode = [&decoded](const json& value) {
            detail::decode_object(value, decoded);
        };
        ConversationObject<json> result = run_object_turn(
            std::move(user_message), std::move(schema), options, std::move(send), decode);
        return detail::typed_conversation_object<T>(std::move(result), std::move(decoded));
    }

    /// The committed history without the system prompt; provider replay state (reasoning
    /// signatures, item ids) only when `include_replay`, e.g. to hand the messages on to
    /// another conversation of the same provider unchanged.
    [[nodiscard]] std::vector<Message> history(bool include_replay = false) const;

    /// The system prompt (when set) followed by `history()`.
    [[nodiscard]] std::vector<Message> to_messages() const;

    /// Tokens and spend of every model round so far, failed turns included.
    [[nodiscard]] ConversationTotals totals() const;

    /// The transcript as Markdown: a metadata table, then one section per message.
    [[nodiscard]] std::string to_markdown() const;

    /// The snapshot a session store holds (replay state included), as JSON.
    [[nodiscard]] json serialise() const;

    /// Replaces the tools (e.g. with `mcp_tools(client)` again after the MCP server said its
    /// list changed). Turns that start afterwards offer and run the new tools; a turn already
    /// running keeps the tools it started with. Thread-safe; may be called from a tool
    /// callback. Throws what `ConversationOptions::tools` would (`ToolDefinitionError`), and
    /// `InvalidOptionError` (`invalid_tool_choice`, `unknown_tool_choice`) when the
    /// conversation's `tool_choice` needs a tool the new set lacks; the tools stay as they were.
    void set_tools(std::vector<Tool> tools);

    /// The tools that the next turn will offer.
    [[nodiscard]] std::vector<Tool> tools() const;

    /// Appends `messages` to the history as they are (e.g. the messages of `generate_object`,
    /// or a transcript from elsewhere) and persists that; tool calls and results keep their
    /// ids, so the next turn's request pairs them exactly. Throws `InvalidMessageError` (path
    /// `/<index>/…`) when a message is invalid or has the system role, when a tool result does
    /// not answer a call of the assistant message before it, or when the last message leaves a
    /// tool call unanswered; `ConversationBusyError` during a turn or a tool callback.
    void append(std::vector<Message> messages);

    /// Empties the history (totals are kept) and persists that. Throws
    /// `ConversationBusyError` during a turn or a tool callback.
    void clear();

    /// The session id.
    [[nodiscard]] const std::string& id() const noexcept;

    /// The tenant.
    [[nodiscard]] const std::string& tenant() const noexcept;

    /// The version of the session in the store (0 before the first write or without a store).
    [[nodiscard]] std::uint64_t version() const;

    /// The provider and model this conversation talks to.
    [[nodiscard]] const Route& route() const noexcept;

    struct State;

private:
    friend struct detail::HookedConversation;
    Conversation(const Client& client, ConversationOptions options,
                 std::shared_ptr<detail::TurnHooks> hooks);

    /// `send_object(user, schema, options, send)`, with `decode` run on each reply that passes
    /// the schema. Defined in src/conversation/turn_runner.cpp.
    [[nodiscard]] ConversationObject<json> run_object_turn(Message user, json schema,
                                                           const StructuredOutputOptions& options,
                                                           SendOptions send,
                                                           const detail::ObjectDecoder& decode);

    std::shared_ptr<State> state_;
};

}  // namespace ullm
