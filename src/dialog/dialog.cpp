#include <ullm/dialog/dialog.hpp>

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <future>

#include "../client/conversation_calls.hpp"
#include "../conversation/turn_hooks.hpp"
#include "../core/work_thread.hpp"
#include "instance_record.hpp"
#include "mentions.hpp"

namespace ullm {

namespace {

constexpr const char* empty_reply_text =
    "I encountered an error generating a response. Please try again.";

constexpr const char* unrun_calls_text = "Some tool calls failed to execute. Please try again.";

// The assistant message that ends a failed turn's transcript; none for a cancel.
std::optional<std::string> failure_text(const InterruptedTurn& turn) {
    if (turn.code == to_string(ErrorCode::cancelled)) return std::nullopt;
    if (turn.unrun_calls > 0) return unrun_calls_text;
    return "I encountered an error generating a response: " + turn.message;
}

constexpr const char* cells_guide =
    "You work with cells: JSON values addressed by links such as {\"@link\": "
    "\"/of:<id>/path\"}. Use read() to see a value, invoke() to run a handler or pattern, "
    "schema() for a cell's shape, pin()/unpin() to keep a cell listed below, and "
    "updateArgument() to change a running pattern's argument. Use the links exactly as "
    "listed.";

std::string truncated(std::string text, std::size_t limit) {
    if (text.size() <= limit) return text;
    std::size_t cut = limit;
    // Do not cut a UTF-8 sequence in half.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
    text.resize(cut);
    return text + "…";
}

}  // namespace

struct Dialog::Instance {
    explicit Instance(std::string instance_name) : name(std::move(instance_name)) {}

    const std::string name;
    std::mutex mutex;
    std::atomic<bool> pending{false};
    std::atomic<std::uint64_t> turn_id{0};
    std::chrono::system_clock::time_point last_activity;
    std::stop_source stop;
    DialogInstanceState state;
    std::optional<json> result;
    std::uint64_t rounds = 0;        ///< Model rounds started (for presentResult).
    std::uint64_t result_round = 0;  ///< The round whose first presentResult was kept.
    std::optional<Conversation> conversation;
    std::optional<InterruptedTurn> interrupted;  ///< How the latest interrupted turn ended.
    std::uint64_t stored_turn_id = 0;            ///< The turn id of the stored record, once read.
    /// The cells the instance needs between turns: its pins, its pattern instances' cells and
    /// every cell its transcript or result mentions. Recomputed (under `keep_mutex`) after
    /// each turn, `append` and load.
    CellHold kept;
    std::mutex keep_mutex;
    /// The cells the running turn made known to the model, until its transcript is kept.
    std::shared_ptr<CellHold> turn_cells;

    // Whether `tag` names the instance's running turn. Lock-free: called with `mutex` held.
    [[nodiscard]] bool current(const std::string& tag) const {
        return pending.load() && std::to_string(turn_id.load()) == tag;
    }
};

struct Dialog::State : std::enable_shared_from_this<Dialog::State> {
    Client client;
    std::shared_ptr<CellSpace> space;
    DialogOptions options;
    DialogToolRegistry registry;
    mutable std::mutex mutex;
    std::map<std::string, std::shared_ptr<Instance>, std::less<>> instances;

    CellHold context_cells;  ///< Keeps `options.context_cells` while the dialog lives.

    State(const Client& owner, std::shared_ptr<CellSpace> cells, DialogOptions settings)
        : client(owner),
          space(cells),
          options(std::move(settings)),
          registry(std::move(cells), options.tools,
                   DialogCatalogOptions{options.builtin_tools, options.result_schema}) {
        std::vector<CellLink> links;
        for (const auto& named : options.context_cells) links.push_back(named.link);
        context_cells = space->hold(links);
    }

    std::shared_ptr<Instance> instance(const std::string& name) {
        std::lock_guard lock(mutex);
        auto& slot = instances[name];
        if (!slot) {
            slot = std::make_shared<Instance>(name);
            slot->kept = space->hold();
        }
        return slot;
    }

    // Keeps the cells the instance needs between turns, from its state as it is now: pins,
    // pattern instances, result and transcript. Recomputes are serialised, so the last one
    // reflects the latest state; a running turn's own cells are in its `turn_cells` meanwhile.
    void keep_cells(Instance& instance) const {
        std::lock_guard keeping(instance.keep_mutex);
        std::vector<CellLink> links;
        std::optional<Conversation> conversation;
        {
            std::lock_guard lock(instance.mutex);
            for (const auto& pin : instance.state.pins) links.push_back(pin.link);
            for (const auto& running : instance.state.pattern_instances) {
                links.push_back(running.argument);
                links.push_back(running.result);
            }
            if (instance.result) {
                detail::for_each_mention(*instance.result, [&](std::string_view id) {
                    links.push_back({std::string(id), {}});
                });
            }
            conversation = instance.conversation;
        }
        if (conversation) {
            detail::for_each_mention(conversation->history(), [&](std::string_view id) {
                links.push_back({std::string(id), {}});
            });
        }
        instance.kept.assign(links);
    }

    [[nodiscard]] std::shared_ptr<Instance> find(const std::string& name) const {
        std::lock_guard lock(mutex);
        const auto found = instances.find(name);
        return found == instances.end() ? nullptr : found->second;
    }

    // The instance as a reader sees it: with a session store, loaded from the store on first
    // use (throws as loading does); without one, only an instance already in memory.
    std::shared_ptr<Instance> loaded(const std::string& name) {
        if (!options.session_store) return find(name);
        auto found = instance(name);
        (void)conversation_of(found);
        return found;
    }

    // The cells section of the system prompt: the context cells, then the instance's pins.
    std::string cells_section(Instance& instance) const {
        std::vector<NamedCell> cells = options.context_cells;
        {
            std::lock_guard lock(instance.mutex);
            for (const auto& pin : instance.state.pins) cells.push_back({pin.name, pin.link});
        }
        std::string out;
        if (options.builtin_tools) out += std::string(cells_guide) + "\n\n";
        out += "# Available Cells\n";
        if (cells.empty()) out += "\n(none)\n";
        for (const auto& cell : cells) {
            out += "\n## " + cell.name + "\nlink: " + cell.link.to_json().dump() + "\n";
            try {
                if (auto schema = space->schema(cell.link)) {
                    out += "schema: " + truncated(schema->dump(), 1000) + "\n";
                }
                if (space->kind(cell.link) == CellKind::data) {
                    out += "value: " +
                           truncated(CellSpace::render_for_model(space->get(cell.link))
                                         .dump(-1, ' ', false, json::error_handler_t::replace),
                                     2000) +
                           "\n";
                }
            } catch (const Error& error) {
                out += "value: (unavailable: " + error.message() + ")\n";
            }
        }
        return out;
    }

    // The conversation of an instance, with the catalog as its tools; with a session store,
    // loaded from it on first use. Built outside the instance's lock, since loading applies
    // the stored pins and result under it; a second thread that built one too drops its own.
    Conversation& conversation_of(const std::shared_ptr<Instance>& instance) {
        {
            std::lock_guard guard(instance->mutex);
            if (instance->conversation) return *instance->conversation;
        }
        Conversation built = build_conversation(instance);
        {
            std::lock_guard guard(instance->mutex);
            if (!instance->conversation) instance->conversation.emplace(std::move(built));
        }
        keep_cells(*instance);  // what a stored instance's record and transcript mention
        std::lock_guard guard(instance->mutex);
        return *instance->conversation;
    }

    // What the instance's record holds beside the transcript, read at each write.
    static detail::DialogInstanceRecord record_of(Instance& instance) {
        std::lock_guard lock(instance.mutex);
        return {instance.state, instance.result,
                std::max(instance.turn_id.load(), instance.stored_turn_id)};
    }

    // Takes a stored record's pins, pattern instances and result. A running turn keeps its id;
    // later turns count on from the stored one.
    static void apply_record(Instance& instance, detail::DialogInstanceRecord record) {
        std::lock_guard lock(instance.mutex);
        instance.state = std::move(record.state);
        instance.result = std::move(record.result);
        instance.stored_turn_id = record.turn_id;
        if (!instance.pending && instance.turn_id < record.turn_id) {
            instance.turn_id = record.turn_id;
        }
    }

    Conversation build_conversation(const std::shared_ptr<Instance>& instance) {
        std::vector<Tool> tools;
        const std::weak_ptr<Instance> weak = instance;
        // Tools may outlive the dialog (a tool that ignores its stop token): they hold it weakly.
        const std::weak_ptr<State> dialog = weak_from_this();
        for (const auto& declaration : registry.declarations()) {
            tools.push_back(define_tool(
                {.name = declaration.name,
                 .description = declaration.description,
                 .parameters = declaration.parameters,
                 .execute = [dialog, weak, tool = declaration.name](const json& input,
                                                                    ToolContext& context) -> json {
                     const auto self = dialog.lock();
                     const auto owner = weak.lock();
                     if (!self || !owner)
                         throw ToolResultError("The dialog is gone.", ErrorCode::cancelled);
                     return self->run_tool(*owner, tool, input, context);
                 }}));
        }
        return detail::HookedConversation::make(
            client,
            {.session_id = options.session_store ? instance->name : std::string(),
             .tenant = options.tenant,
             .use_session_store = options.session_store != nullptr,
             .session_store = options.session_store,
             .system = options.system,
             .model = options.model,
             .tools = std::move(tools),
             .tool_choice = options.tool_choice,
             .keep_tool_choice = options.end_turn_at_result,
             .max_tool_rounds = options.max_tool_rounds,
             .tool_execution_timeout = options.tool_execution_timeout,
             .sequential_tool_calls = true},
            std::make_shared<InstanceHooks>(dialog, weak));
    }

    // What an instance adds to its conversation's turns: the cells section of each round's
    // system prompt, the transcript of an interrupted turn, and its record around each stored
    // snapshot. Holds the dialog and the instance weakly, as the tools do.
    class InstanceHooks final : public detail::TurnHooks {
    public:
        InstanceHooks(std::weak_ptr<State> dialog, std::weak_ptr<Instance> instance)
            : dialog_(std::move(dialog)), instance_(std::move(instance)) {}

        [[nodiscard]] const Shape& shape() const override {
            static const Shape dialog_shape{
                .tool_message_per_call = true,
                .unknown_tool_text = std::string(dialog_unknown_tool_text),
                .empty_reply_text = empty_reply_text};
            return dialog_shape;
        }

        std::string round_context() override {
            const auto self = dialog_.lock();
            const auto owner = instance_.lock();
            if (!self || !owner) return {};
            {
                std::lock_guard lock(owner->mutex);
                ++owner->rounds;
            }
            return self->cells_section(*owner);
        }

        std::optional<Message> interrupted(const InterruptedTurn& turn) override {
            if (const auto owner = instance_.lock()) {
                std::lock_guard lock(owner->mutex);
                owner->interrupted = turn;
            }
            const auto text = failure_text(turn);
            if (!text) return std::nullopt;
            return Message::assistant(*text);
        }

        json stored_form(json snapshot) override {
            const auto owner = instance_.lock();
            return detail::instance_record_to_json(
                std::move(snapshot), owner ? record_of(*owner) : detail::DialogInstanceRecord{});
        }

        Restored restore(const json& stored) override {
            detail::DialogInstanceRecord record = detail::parse_instance_part(stored);
            return {&stored.at("conversation"), "/conversation",
                    [instance = instance_, record = std::move(record)]() mutable {
                        if (const auto owner = instance.lock()) {
                            apply_record(*owner, std::move(record));
                        }
                    }};
        }

        void session_gone() override {
            // The instance starts afresh, as its conversation does.
            if (const auto owner = instance_.lock()) apply_record(*owner, {});
        }

    private:
        std::weak_ptr<State> dialog_;
        std::weak_ptr<Instance> instance_;
    };

    json run_tool(Instance& instance, const std::string& tool, const json& input,
                  ToolContext& context) const {
        if (tool == present_result_tool_name && registry.result_schema()) {
            // Outside the lock: it is the caller's code. What it throws answers the call.
            if (options.result_check) options.result_check(input);
            std::lock_guard lock(instance.mutex);
            if (!instance.current(context.turn_tag)) {
                throw ToolResultError("The turn was cancelled; the result was not stored.",
                                      ErrorCode::cancelled);
            }
            // The first call of a round is the result (calls run in call order); a later
            // round's call overwrites it.
            if (instance.result_round != instance.rounds) {
                instance.result = input;
                instance.result_round = instance.rounds;
            }
            if (options.end_turn_at_result) context.end_turn = true;
            return input;
        }
        // A call of a turn that is no longer current keeps nothing: its result is not stored.
        std::shared_ptr<CellHold> turn_cells;
        {
            std::lock_guard lock(instance.mutex);
            if (instance.current(context.turn_tag)) turn_cells = instance.turn_cells;
        }
        DialogCall call{&instance.state, &instance.mutex,
                        [&instance, tag = context.turn_tag] { return instance.current(tag); },
                        &context, turn_cells.get()};
        ToolOutcome outcome = registry.run(tool, input, call);
        if (outcome.is_error) {
            throw ToolResultError(outcome.result.is_string() ? outcome.result.get<std::string>()
                                                             : outcome.result.dump(),
                                  outcome.error_code);
        }
        return outcome.result;
    }
};

Dialog::Dialog(const Client& client, std::shared_ptr<CellSpace> space, DialogOptions options)
    : state_(std::make_shared<State>(client, std::move(space), std::move(options))) {
    (void)client.route(state_->options.model);  // Fails here when the model has no route.
}

Dialog::~Dialog() {
    std::lock_guard lock(state_->mutex);
    for (auto& [name, instance] : state_->instances) instance->stop.request_stop();
}

DialogTurn Dialog::send(const std::string& instance_name, std::string text) {
    return send(instance_name, Message::user(std::move(text)));
}

namespace detail {

// One turn of a dialog instance, from the check that it may start to the `DialogTurn` it ends
// as: shared by `Dialog::send` and `Dialog::send_async`.
class DialogTurnRun {
public:
    DialogTurnRun(std::shared_ptr<Dialog::State> dialog, std::shared_ptr<Dialog::Instance> instance)
        : dialog_(std::move(dialog)), instance_(std::move(instance)) {}

    // Takes the instance's turn; the answer when the turn cannot start (a failed load, a turn
    // already running), else nullopt and `conversation()` runs it with `send_options()`.
    std::optional<DialogTurn> start() {
        try {
            // Loads a stored instance first, so that its turn ids count on from the stored one.
            conversation_ = &dialog_->conversation_of(instance_);
        } catch (const Error& error) {
            // Nothing ran and nothing was appended; a bad stored record is left as it is.
            return DialogTurn{DialogTurnStatus::failed,
                              instance_->turn_id.load(),
                              error.message(),
                              {},
                              error.code(),
                              std::current_exception()};
        }
        turn_cells_ = std::make_shared<CellHold>(dialog_->space->hold());
        std::lock_guard lock(instance_->mutex);
        if (instance_->pending) {
            return DialogTurn{DialogTurnStatus::ignored,
                              instance_->turn_id.load(),
                              "A turn of this instance is running; the message was ignored. "
                              "Cancel it before sending a replacement.",
                              instance_->result,
                              detail::report(ErrorCode::turn_in_progress),
                              nullptr};
        }
        id_ = std::max(instance_->turn_id.load(), instance_->stored_turn_id) + 1;
        instance_->turn_id = id_;
        instance_->pending = true;
        instance_->stop = std::stop_source();
        stop_ = instance_->stop.get_token();
        instance_->last_activity = std::chrono::system_clock::now();
        instance_->interrupted.reset();
        instance_->turn_cells = turn_cells_;
        return std::nullopt;
    }

    [[nodiscard]] Conversation& conversation() const { return *conversation_; }

    [[nodiscard]] SendOptions send_options() const {
        return {.stop = stop_, .turn_tag = std::to_string(id_), .wait_for_tools = true};
    }

    // The turn as it ended. Whatever happened, `pending` is cleared for this turn (never left
    // stuck), and the cells the turn made known are kept as its transcript needs them, then
    // let go.
    DialogTurn finish(const Result<ConversationReply>& outcome) {
        DialogTurn turn;
        if (outcome) {
            turn.text = outcome.value().text;
            turn.usage = outcome.value().turn_usage;
        } else {
            turn = failed(outcome.error());
        }
        dialog_->keep_cells(*instance_);
        turn_cells_->clear();
        std::lock_guard lock(instance_->mutex);
        if (instance_->turn_cells == turn_cells_) instance_->turn_cells.reset();
        if (instance_->turn_id == id_) instance_->pending = false;
        instance_->last_activity = std::chrono::system_clock::now();
        turn.turn_id = id_;
        turn.result = instance_->result;
        return turn;
    }

private:
    DialogTurn failed(const std::exception_ptr& error) const {
        try {
            std::rethrow_exception(error);
        } catch (const CancelledError& cancelled) {
            return {DialogTurnStatus::cancelled,
                    0,
                    "The turn was cancelled.",
                    {},
                    cancelled.code(),
                    error};
        } catch (const Error& failure) {
            return failed(failure, error);
        } catch (const std::exception& failure) {
            // Not an ullm error (only an async turn gets here: `send` lets it through).
            return {DialogTurnStatus::failed,
                    0,
                    std::string("I encountered an error generating a response: ") + failure.what(),
                    {},
                    detail::report(ErrorCode::turn_failed),
                    error};
        }
    }

    DialogTurn failed(const Error& failure, const std::exception_ptr& error) const {
        {
            std::optional<InterruptedTurn> interrupted;
            {
                std::lock_guard lock(instance_->mutex);
                interrupted = instance_->interrupted;
            }
            // A record left by an earlier, cancelled turn that finished late is not this
            // failure's.
            if (interrupted && interrupted->code != failure.code()) interrupted.reset();
            const auto text = failure_text(
                interrupted.value_or(InterruptedTurn{failure.code(), failure.message(), 0}));
            return {DialogTurnStatus::failed, 0,    text.value_or(failure.message()), {},
                    failure.code(),           error};
        }
    }

    std::shared_ptr<Dialog::State> dialog_;
    std::shared_ptr<Dialog::Instance> instance_;
    Conversation* conversation_ = nullptr;
    std::shared_ptr<CellHold> turn_cells_;
    std::uint64_t id_ = 0;
    std::stop_token stop_;
};

}  // namespace detail

DialogTurn Dialog::send(const std::string& instance_name, Message user_message) {
    detail::DialogTurnRun run(state_, state_->instance(instance_name));
    if (auto refused = run.start()) return std::move(*refused);
    try {
        return run.finish(run.conversation().send(std::move(user_message), run.send_options()));
    } catch (const Error&) {
        return run.finish(std::current_exception());
    }
}

void Dialog::send_async(const std::string& instance_name, Message user_message,
                        std::function<void(DialogTurn)> on_done,
                        const std::shared_ptr<Executor>& executor) {
    auto run = std::make_shared<detail::DialogTurnRun>(state_, state_->instance(instance_name));
    if (auto refused = run->start()) {
        // Told later, never inside this call, as every async outcome is.
        auto tell = [on_done = std::move(on_done), turn = std::move(*refused)]() mutable {
            if (on_done) on_done(std::move(turn));
        };
        if (executor) {
            executor->post(std::move(tell));
        } else {
            detail::ConversationCalls::callbacks(state_->client)->post(std::move(tell));
        }
        return;
    }
    (void)run->conversation().send_async(
        std::move(user_message),
        [run, on_done = std::move(on_done)](const Result<ConversationReply>& outcome) {
            DialogTurn turn = run->finish(outcome);
            if (on_done) on_done(std::move(turn));
        },
        run->send_options(), executor);
}

std::future<DialogTurn> Dialog::send_async(const std::string& instance_name, std::string text) {
    auto promise = std::make_shared<std::promise<DialogTurn>>();
    std::future<DialogTurn> future = promise->get_future();
    send_async(instance_name, Message::user(std::move(text)),
               [promise](DialogTurn turn) { promise->set_value(std::move(turn)); });
    return future;
}

Awaitable<DialogTurn> Dialog::co_send(const std::string& instance_name, Message user_message) {
    return Awaitable<DialogTurn>(
        [this, instance_name, user = std::move(user_message)](
            const std::shared_ptr<Executor>& resume_on,
            std::function<void(Result<DialogTurn>)> on_done) mutable {
            send_async(
                instance_name, std::move(user),
                [on_done = std::move(on_done)](DialogTurn turn) {
                    on_done(Result<DialogTurn>(std::move(turn)));
                },
                resume_on);
        },
        nullptr);
}

bool Dialog::append(const std::string& instance_name, std::vector<Message> messages) {
    const auto instance = state_->instance(instance_name);
    {
        std::lock_guard lock(instance->mutex);
        if (instance->pending) return false;
    }
    try {
        state_->conversation_of(instance).append(std::move(messages));
    } catch (const ConversationBusyError&) {
        return false;  // A cancelled turn is still finishing.
    }
    state_->keep_cells(*instance);
    return true;
}

bool Dialog::cancel(const std::string& instance_name) {
    const auto instance = state_->find(instance_name);
    if (!instance) return false;
    std::lock_guard lock(instance->mutex);
    if (!instance->pending) return false;
    instance->pending = false;
    instance->stop.request_stop();
    instance->last_activity = std::chrono::system_clock::now();
    return true;
}

DialogInstanceInfo Dialog::info(const std::string& instance_name) const {
    const auto instance = state_->loaded(instance_name);
    if (!instance) return {};
    std::lock_guard lock(instance->mutex);
    return {instance->pending.load(), instance->turn_id.load(), instance->last_activity,
            instance->result};
}

std::vector<Message> Dialog::transcript(const std::string& instance_name,
                                        bool include_replay) const {
    const auto instance = state_->loaded(instance_name);
    if (!instance) return {};
    std::optional<Conversation> conversation;
    {
        std::lock_guard lock(instance->mutex);
        conversation = instance->conversation;
    }
    return conversation ? conversation->history(include_replay) : std::vector<Message>{};
}

std::string Dialog::system_prompt(const std::string& instance_name) const {
    const auto instance = state_->loaded(instance_name);
    Instance empty(instance_name);
    std::string prompt = state_->options.system;
    const std::string cells = state_->cells_section(instance ? *instance : empty);
    return prompt.empty() ? cells : prompt + "\n\n" + cells;
}

const DialogToolRegistry& Dialog::registry() const noexcept {
    return state_->registry;
}

}  // namespace ullm
