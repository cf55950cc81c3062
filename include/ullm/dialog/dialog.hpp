#pragma once

/// `Dialog`: conversations over a caller's cell space, one independent turn per instance (per
/// user, per session), with the `DialogTool` catalog and a structured result.

#include <ullm/client/awaitable.hpp>
#include <ullm/client/client.hpp>
#include <ullm/core/executor.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/dialog/cell_space.hpp>
#include <ullm/dialog/dialog_tool.hpp>
#include <ullm/store/session_store.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace ullm {

/// A cell listed, with its current value, in every round's system prompt.
struct NamedCell {
    std::string name;
    CellLink link;
};

/// Settings of a `Dialog`; written with designated initialisers.
struct DialogOptions {
    std::string system;  ///< The caller's system text, first in every round's system prompt.
    std::string model;   ///< As `Client::route` understands it; the client's default when empty.
    std::vector<DialogTool> tools;      ///< The caller's tools, in catalog order.
    bool builtin_tools = true;          ///< Only exactly false removes the six built-ins.
    std::optional<json> result_schema;  ///< Adds `presentResult`; its call is the result.
    /// Runs on the arguments of each `presentResult` call once they pass `result_schema`, for a
    /// rule the schema cannot say (e.g. decoding into a type: see `decode_result`). A
    /// `ToolArgumentError` (or any exception) it throws answers the call with an error result
    /// instead of storing it, so that the model can try again within `max_tool_rounds`.
    std::function<void(const json& result)> result_check;
    std::vector<NamedCell> context_cells;  ///< Listed under `# Available Cells`.
    int max_tool_rounds = 5;               ///< As `ConversationOptions::max_tool_rounds`.
    /// How long one tool call may run; the calls of a round run one after another.
    std::chrono::milliseconds tool_execution_timeout{30'000};
    /// As `ConversationOptions::tool_choice`: a forced choice applies to a turn's first round.
    std::optional<ToolChoice> tool_choice;
    /// A turn ends right after the round in which `presentResult` was called, with no further
    /// model request, and a forced `tool_choice` holds for every round (what `generate_object`
    /// does).
    bool end_turn_at_result = false;
    /// Where instances persist; none keeps them in memory only. With a store, an instance is
    /// the session `instance` (a valid session id) under `tenant`: its transcript, totals, pins,
    /// pattern instances, result and turn id are written after every turn and `append`, and
    /// loaded when the instance is first used, failing closed on a bad record
    /// (`invalid_conversation_snapshot`, the record left as it is).
    std::shared_ptr<SessionStore> session_store;
    /// The tenant of the instances' sessions (0..128 bytes).
    std::string tenant;
};

/// How a `Dialog::send` ended.
enum class DialogTurnStatus {
    completed,  ///< The model answered; the turn is in the transcript.
    ignored,    ///< The instance's turn was still running: nothing was sent or appended.
    /// `cancel` ended the turn. The transcript keeps the user message and the finished
    /// rounds; each tool call without a result is answered `Tool call cancelled`.
    cancelled,
    /// The turn failed; `text` says so and is the transcript's last (assistant) message:
    /// `I encountered an error generating a response: <message>`, or `Some tool calls failed
    /// to execute. Please try again.` when the failure left tool calls unrun.
    failed,
};

/// What one `Dialog::send` did.
struct DialogTurn {
    DialogTurnStatus status = DialogTurnStatus::completed;
    std::uint64_t turn_id = 0;  ///< The turn's id (for `ignored`, the running turn's).
    std::string text;  ///< The reply, or the dialog's message for a failure or empty reply.
    std::optional<json> result;  ///< The instance's structured result after the turn.
    std::string error_code;      ///< For `ignored`, `cancelled` and `failed`.
    std::exception_ptr error;    ///< For `cancelled` and `failed`: the error, to rethrow.
    Usage usage;                 ///< Summed over the turn's model requests (`completed`).
};

/// A structured result decoded into `T` (e.g. a struct described with `ULLM_REFLECT`, whose
/// `json_schema_of<T>()` is the dialog's `result_schema`); nullopt when there is none. Throws
/// `StructuredOutputError` `structured_output_invalid` (with the path) when it does not decode.
template <StructuredObject T>
[[nodiscard]] std::optional<T> decode_result(const std::optional<json>& result) {
    if (!result) return std::nullopt;
    std::optional<T> decoded;
    try {
        detail::decode_object(*result, decoded);
    } catch (const ToolArgumentError& error) {
        throw StructuredOutputError(ErrorCode::structured_output_invalid,
                                    "the structured result does not decode: the value at " +
                                        (error.path().empty() ? "the root" : error.path()) + " " +
                                        error.reason(),
                                    result->dump(), error.path(), {});
    }
    return decoded;
}

/// The state of one instance.
struct DialogInstanceInfo {
    bool pending = false;       ///< A turn is running.
    std::uint64_t turn_id = 0;  ///< The latest turn's id (0 before the first).
    std::chrono::system_clock::time_point last_activity;
    std::optional<json> result;  ///< The structured result, once `presentResult` was called.
};

/// Runs tool-using conversations over a cell space for any number of instances, each with its
/// own transcript, pins, structured result and turn. A message sent while an instance's turn
/// runs is ignored (the call says so); instances never affect each other. Thread-safe.
class Dialog {
public:
    /// Builds the catalog (`DialogToolRegistry`: reserved names and tool definitions are
    /// checked here and throw) and routes the model.
    Dialog(const Client& client, std::shared_ptr<CellSpace> space, DialogOptions options);
    ~Dialog();
    Dialog(const Dialog&) = delete;
    Dialog& operator=(const Dialog&) = delete;

    /// Sends `text` to `instance` and waits for the turn to end. Returns `ignored` at once when
    /// that instance's turn is running. Never throws for provider failures (they are a
    /// `failed` turn); throws `bad_alloc` only.
    DialogTurn send(const std::string& instance, std::string text);

    /// As `send(instance, std::string)`, with a whole user message (images, documents).
    DialogTurn send(const std::string& instance, Message user_message);

    /// As `send`, without a thread that waits for the turn (`Conversation::send_async` runs
    /// it): `on_done` is called once with how it ended, never inside this call, on `executor`
    /// when one is given, else on the client's callback thread. An instance kept in a session
    /// store is loaded inside this call on first use. `cancel(instance)` ends it as it ends a
    /// blocking turn. Throws `bad_alloc` only.
    void send_async(const std::string& instance, Message user_message,
                    std::function<void(DialogTurn)> on_done,
                    const std::shared_ptr<Executor>& executor = nullptr);

    /// As `send_async(instance, Message::user(text), on_done)`, the outcome in a future.
    [[nodiscard]] std::future<DialogTurn> send_async(const std::string& instance, std::string text);

    /// `co_await dialog.co_send(instance, message)`: as `send_async`, started when awaited; the
    /// coroutine resumes as `Client::co_complete` resumes it (the promise's `get_executor()`,
    /// else the client's callback thread). The dialog must outlive the `co_await`.
    [[nodiscard]] Awaitable<DialogTurn> co_send(const std::string& instance, Message user_message);

    /// Appends `messages` to the instance's transcript unchanged, e.g. the messages of
    /// `generate_object`: tool calls and results keep their ids. Returns false, appending
    /// nothing, while the instance's turn runs (or a cancelled one is still finishing). Throws
    /// `InvalidMessageError` as `Conversation::append` does, and with a session store what
    /// loading or writing the instance throws.
    bool append(const std::string& instance, std::vector<Message> messages);

    /// Ends the instance's running turn: the request is aborted, running tools are asked to
    /// stop, built-ins refuse to commit, and nothing late is written. Returns whether a turn
    /// was running.
    bool cancel(const std::string& instance);

    /// The instance's state (a fresh instance when unknown). With a session store this,
    /// `transcript` and `system_prompt` load the instance on first use and throw what loading
    /// throws (`InvalidConversationSnapshotError`, `SessionStoreError`, `invalid_session_id`).
    [[nodiscard]] DialogInstanceInfo info(const std::string& instance) const;

    /// The instance's transcript, without the system prompt; provider replay state only when
    /// `include_replay`.
    [[nodiscard]] std::vector<Message> transcript(const std::string& instance,
                                                  bool include_replay = false) const;

    /// The system prompt the instance's next round would get.
    [[nodiscard]] std::string system_prompt(const std::string& instance) const;

    /// The catalog.
    [[nodiscard]] const DialogToolRegistry& registry() const noexcept;

    struct Instance;
    struct State;

private:
    std::shared_ptr<State> state_;
};

}  // namespace ullm
