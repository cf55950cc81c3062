#include <ullm/dialog/dialog.hpp>

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>

#include <algorithm>
#include <atomic>

#include "instance_store.hpp"
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
        std::shared_ptr<SessionStore> store;
        if (options.session_store) {
            store = std::make_shared<detail::InstanceStore>(
                options.session_store,
                [weak]() -> detail::DialogInstanceRecord {
                    const auto owner = weak.lock();
                    return owner ? record_of(*owner) : detail::DialogInstanceRecord{};
                },
                [weak](detail::DialogInstanceRecord record) {
                    if (const auto owner = weak.lock()) apply_record(*owner, std::move(record));
                });
        }
        return client.conversation(
            {.session_id = store ? instance->name : std::string(),
             .tenant = options.tenant,
             .use_session_store = store != nullptr,
             .session_store = store,
             .system = options.system,
             .system_context = [dialog, weak]() -> std::string {
                 const auto self = dialog.lock();
                 const auto owner = weak.lock();
                 if (!self || !owner) return {};
                 {
                     std::lock_guard lock(owner->mutex);
                     ++owner->rounds;
                 }
                 return self->cells_section(*owner);
             },
             .model = options.model,
             .tools = std::move(tools),
             .tool_choice = options.tool_choice,
             .keep_tool_choice = options.end_turn_at_result,
             .max_tool_rounds = options.max_tool_rounds,
             .tool_execution_timeout = options.tool_execution_timeout,
             .sequential_tool_calls = true,
             .tool_message_per_call = true,
             .unknown_tool_text = "Tool has neither pattern nor handler",
             .empty_reply_text = empty_reply_text,
             .on_interrupted_turn = [weak](const InterruptedTurn& turn) -> std::optional<Message> {
                 if (const auto owner = weak.lock()) {
                     std::lock_guard lock(owner->mutex);
                     owner->interrupted = turn;
                 }
                 const auto text = failure_text(turn);
                 if (!text) return std::nullopt;
                 return Message::assistant(*text);
             }});
    }

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

DialogTurn Dialog::send(const std::string& instance_name, Message user_message) {
    const auto instance = state_->instance(instance_name);
    Conversation* conversation = nullptr;
    try {
        // Loads a stored instance first, so that its turn ids count on from the stored one.
        conversation = &state_->conversation_of(instance);
    } catch (const Error& error) {
        // Nothing ran and nothing was appended; a bad stored record is left as it is.
        return {
            DialogTurnStatus::failed, instance->turn_id.load(), error.message(), {}, error.code(),
            std::current_exception()};
    }
    std::uint64_t id = 0;
    std::stop_token stop;
    const auto turn_cells = std::make_shared<CellHold>(state_->space->hold());
    {
        std::lock_guard lock(instance->mutex);
        if (instance->pending) {
            return {DialogTurnStatus::ignored,
                    instance->turn_id.load(),
                    "A turn of this instance is running; the message was ignored. Cancel it "
                    "before sending a replacement.",
                    instance->result,
                    detail::report(ErrorCode::turn_in_progress),
                    nullptr};
        }
        id = std::max(instance->turn_id.load(), instance->stored_turn_id) + 1;
        instance->turn_id = id;
        instance->pending = true;
        instance->stop = std::stop_source();
        stop = instance->stop.get_token();
        instance->last_activity = std::chrono::system_clock::now();
        instance->interrupted.reset();
        instance->turn_cells = turn_cells;
    }
    // Whatever happens, `pending` is cleared for this turn (never left stuck), and the cells
    // the turn made known are kept as its transcript needs them, then let go.
    const auto finish = [&](DialogTurn turn) {
        state_->keep_cells(*instance);
        turn_cells->clear();
        std::lock_guard lock(instance->mutex);
        if (instance->turn_cells == turn_cells) instance->turn_cells.reset();
        if (instance->turn_id == id) instance->pending = false;
        instance->last_activity = std::chrono::system_clock::now();
        turn.turn_id = id;
        turn.result = instance->result;
        return turn;
    };
    try {
        const auto reply = conversation->send(
            std::move(user_message),
            {.stop = stop, .turn_tag = std::to_string(id), .wait_for_tools = true});
        DialogTurn turn;
        turn.text = reply.text;
        turn.usage = reply.turn_usage;
        return finish(std::move(turn));
    } catch (const CancelledError& error) {
        return finish({DialogTurnStatus::cancelled,
                       0,
                       "The turn was cancelled.",
                       {},
                       error.code(),
                       std::current_exception()});
    } catch (const Error& error) {
        std::optional<InterruptedTurn> interrupted;
        {
            std::lock_guard lock(instance->mutex);
            interrupted = instance->interrupted;
        }
        // A record left by an earlier, cancelled turn that finished late is not this failure's.
        if (interrupted && interrupted->code != error.code()) interrupted.reset();
        const auto text =
            failure_text(interrupted.value_or(InterruptedTurn{error.code(), error.message(), 0}));
        return finish({DialogTurnStatus::failed,
                       0,
                       text.value_or(error.message()),
                       {},
                       error.code(),
                       std::current_exception()});
    }
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
