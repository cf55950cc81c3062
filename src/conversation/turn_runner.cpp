// One conversation turn: the pull-driven state machine behind `Conversation::send` and
// `Conversation::send_stream`.

#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/providers/provider_errors.hpp>

#include "../client/conversation_calls.hpp"
#include "../client/structured_reply.hpp"
#include "../core/event_queue.hpp"
#include "../core/strand.hpp"
#include "../core/thread_pool.hpp"
#include "../core/work_thread.hpp"
#include "conversation_state.hpp"
#include "tool_runner.hpp"
#include "tool_sequence.hpp"

#include <exception>
#include <mutex>
#include <thread>

namespace ullm {

namespace {

// Gives each kept message of `trimmed` back the replay state of the original it equals, in
// order; summaries and changed messages get none.
void restore_replay(std::vector<Message>& trimmed, const std::vector<Message>& originals,
                    const std::vector<Message>& visible) {
    std::size_t from = 0;
    for (auto& message : trimmed) {
        for (std::size_t i = from; i < visible.size(); ++i) {
            if (visible[i] == message) {
                message.replay = originals[i].replay;
                from = i + 1;
                break;
            }
        }
    }
}

}  // namespace

namespace detail {

// The structured-output part of a `send_object` turn: the format sent, the schema its final
// reply must pass, and what came of it.
struct ObjectTurn {
    ResponseFormat format;
    CompiledSchema schema;
    ObjectDecoder decode;
    int max_repairs = 0;
    int repairs = 0;
    bool repair_pending =
        false;  ///< The last two turn messages are a refused reply and its repair.
    /// The final reply's verdict (good or refused); `skipped` until there is one, and after a
    /// budget skip.
    ReplyVerdict verdict{ReplyVerdict::Kind::skipped};
};

// One turn, as a pull-driven state machine shared by `send` (which drains it) and
// `send_stream` (which hands its events to the consumer).
class TurnRunner {
public:
    TurnRunner(std::shared_ptr<Conversation::State> state, Message user, SendOptions options,
               bool streaming, ObjectTurn* object = nullptr)
        : state_(std::move(state)),
          user_(std::move(user)),
          options_(std::move(options)),
          streaming_(streaming),
          object_(object),
          on_caller_stop_(options_.stop, [this] { stop_.request_stop(); }) {
        check_send_options(options_);
        if (user_.role != Role::user) {
            throw InvalidMessageError("/role", "a turn starts with a user message");
        }
        // The same checks a stored message passes, so a turn never commits what a restore
        // would refuse.
        validate_message(user_);
    }

    TurnRunner(const TurnRunner&) = delete;
    TurnRunner& operator=(const TurnRunner&) = delete;

    ~TurnRunner() {
        stop_.request_stop();
        // An abandoned turn is a cancelled one: its spend is counted, its slot freed.
        if (phase_ != Phase::finished) fail(nullptr);
    }

    // Stops the turn. When no `next()` is running, the turn ends here (slot freed, spend
    // counted); otherwise the running `next()` throws `CancelledError` and ends it.
    void cancel() noexcept {
        stop_.request_stop();
        if (async()) return;  // the operation under way ends soon, and the turn with it
        std::lock_guard lock(control_);
        if (!in_next_ && phase_ != Phase::finished) {
            fail(std::make_exception_ptr(CancelledError("the turn was cancelled")));
        }
    }

    std::optional<StreamEvent> next() {
        {
            std::lock_guard lock(control_);
            if (failure_) std::rethrow_exception(failure_);
            in_next_ = true;
        }
        const auto done = [this] {
            std::lock_guard lock(control_);
            in_next_ = false;
        };
        try {
            auto event = advance();
            done();
            return event;
        } catch (...) {
            fail(abort_error_ ? abort_error_ : std::current_exception());
            done();
            if (abort_error_) std::rethrow_exception(abort_error_);
            throw;
        }
    }

    [[nodiscard]] const std::optional<ConversationReply>& reply() const noexcept { return reply_; }

    // Makes this an async turn: a step that would wait starts its operation instead and
    // `next()` returns nullopt before the turn is `finished()`. When the operation ends,
    // `resume(step)` is called (on any thread); its caller runs `step` on `strand` and pulls
    // `next()` again. A streamed round's events go to `round_events` on `strand`.
    void run_async(std::shared_ptr<Executor> strand,
                   std::function<void(std::function<void()>)> resume,
                   std::function<void(const StreamEvent&)> round_events) {
        strand_ = std::move(strand);
        resume_ = std::move(resume);
        round_events_ = std::move(round_events);
    }

    // Async: ends the turn with `error` (a consumer's callback threw) as soon as no operation
    // is under way; the one that is, is cancelled.
    void abort(std::exception_ptr error) noexcept {
        if (!abort_error_) abort_error_ = std::move(error);
        stop_.request_stop();
    }

    [[nodiscard]] bool finished() const noexcept { return phase_ == Phase::finished; }

    // Async: takes the turn's place in the FIFO now, on the calling thread, instead of at the
    // first `next()` on the strand, so that turns queue in the order their calls were made (a
    // `send_async` before a `send` that another thread starts just after it). The rules of
    // `TurnQueue::acquire_async` apply as on the caller's thread: a tool callback's own thread
    // is refused. If it throws (bad_alloc), the turn is as before and `next()` tries again.
    void take_place() {
        try {
            begin();
        } catch (...) {
            phase_ = Phase::waiting;
            throw;
        }
    }

    // The reply of a finished turn, moved out.
    [[nodiscard]] ConversationReply take_reply() { return std::move(*reply_); }
    [[nodiscard]] const std::shared_ptr<TurnQueue>& queue() const noexcept { return state_->queue; }
    // Drops the runner's references to the error it ended with, so that the caller's copy is
    // the last one and is freed on the caller's thread, not on ours behind its back.
    void release_failure() noexcept {
        std::lock_guard lock(control_);
        failure_ = nullptr;
        abort_error_ = nullptr;
    }

private:
    // `awaiting`: an async turn's operation is under way; `continuation_` is set when it ended.
    enum class Phase { waiting, round_start, streaming, awaiting, finished };

    std::optional<StreamEvent> advance() {
        for (;;) {
            if (!pending_.empty()) {
                return pending_.take();
            }
            if (phase_ == Phase::finished) return std::nullopt;
            if (phase_ != Phase::awaiting) {
                if (abort_error_) std::rethrow_exception(abort_error_);
                if (stop_.stop_requested()) throw CancelledError("the turn was cancelled");
            }
            switch (phase_) {
                case Phase::waiting:
                    begin();
                    break;
                case Phase::round_start:
                    start_round();
                    break;
                case Phase::streaming:
                    pull_round_event();
                    break;
                case Phase::awaiting:
                    if (!continuation_) return std::nullopt;  // still under way
                    std::exchange(continuation_, nullptr)();  // sets the next phase
                    break;
                case Phase::finished:
                    break;
            }
        }
    }

    [[nodiscard]] bool async() const noexcept { return static_cast<bool>(resume_); }

    // Async: the completion of an operation the turn now waits for. It hands `then(outcome)`
    // to the turn's strand, where the next `next()` runs it.
    template <class Outcome>
    std::function<void(Outcome)> resumer(std::function<void(Outcome)> then) {
        phase_ = Phase::awaiting;
        return [this, resume = resume_, then = std::move(then)](Outcome outcome) mutable {
            resume([this, then = std::move(then), outcome = std::move(outcome)]() mutable {
                continuation_ = [then = std::move(then), outcome = std::move(outcome)]() mutable {
                    then(std::move(outcome));
                };
            });
        };
    }

    void begin() {
        if (async()) {
            state_->queue->acquire_async(
                stop_.get_token(), options_.wait_for_tools,
                resumer<std::exception_ptr>([this](const std::exception_ptr& refused) {
                    if (refused) std::rethrow_exception(refused);
                    granted();
                }));
            return;
        }
        state_->queue->acquire(stop_.get_token(), options_.wait_for_tools);
        granted();
    }

    void granted() {
        holds_slot_ = true;
        {
            std::lock_guard lock(state_->mutex);
            base_history_ = state_->history;
            persisted_spend_ = state_->totals.cost_usd;
            tools_ = state_->registry;  // the turn keeps these whatever set_tools does
        }
        turn_messages_.push_back(user_);
        phase_ = Phase::round_start;
    }

    [[nodiscard]] const ConversationOptions& conversation() const { return state_->options; }

    // How the turn is answered and stored: the owner's shape, or the plain one.
    [[nodiscard]] const TurnHooks::Shape& shape() const {
        static const TurnHooks::Shape plain;
        return state_->hooks ? state_->hooks->shape() : plain;
    }

    // Whether an interrupted turn keeps what it has (see `keep_interrupted`).
    [[nodiscard]] bool keeps_interrupted() const {
        return state_->hooks || conversation().on_interrupted_turn;
    }

    ChatRequest build_request() {
        const auto& options = conversation();
        ChatRequest request;
        request.model = state_->model_spec;
        request.system = options.system;
        const auto add_context = [&request](const std::string& context) {
            if (!context.empty()) {
                request.system += (request.system.empty() ? "" : "\n\n") + context;
            }
        };
        if (options.system_context) add_context(options.system_context());
        if (state_->hooks) add_context(state_->hooks->round_context());
        std::vector<Message> messages = base_history_;
        messages.insert(messages.end(), turn_messages_.begin(), turn_messages_.end());
        if (options.context_manager) {
            // The manager sees copies without replay state (it may hand them to another
            // model); what it does to them is discarded.
            const std::vector<Message> visible = without_replay(messages);
            if (options.context_manager->should_trim(visible)) {
                const std::size_t before = messages.size();
                std::vector<Message> trimmed = options.context_manager->trim(visible);
                validate_context(trimmed, before);
                if (options.on_compaction) {
                    options.on_compaction(CompactionEvent{before, trimmed.size(), trimmed});
                }
                restore_replay(trimmed, messages, visible);
                messages = std::move(trimmed);
            }
        }
        request.messages = std::move(messages);
        for (const auto& tool : tools_->tools()) request.tools.push_back(tool.declaration());
        request.tool_choice = options.tool_choice;
        if (model_rounds_ > 0 && !options.keep_tool_choice && request.tool_choice &&
            (request.tool_choice->mode == ToolChoice::Mode::required ||
             request.tool_choice->mode == ToolChoice::Mode::tool)) {
            request.tool_choice = ToolChoice::automatic();
        }
        request.max_tokens = options_.max_tokens ? options_.max_tokens : options.max_tokens;
        request.temperature = options.temperature;
        request.response_format = object_ ? object_->format : options.response_format;
        request.provider_options = options.provider_options;
        return request;
    }

    // The budget guard before a model round. Returns false when the round is skipped.
    bool admit(const ChatRequest& request) {
        const auto& options = conversation();
        const auto& conversation_cap = options.budget_usd;
        const auto& turn_cap = options_.budget_usd;
        if (!conversation_cap && !turn_cap) return true;
        // Without a price no budget can be enforced: unknown_model_pricing.
        const CostEstimate estimate = state_->client.estimate(request);
        std::string scope;
        double cap = 0;
        double remaining = std::numeric_limits<double>::infinity();
        if (conversation_cap) {
            remaining = *conversation_cap - persisted_spend_ - turn_totals_.cost_usd;
            scope = "conversation";
            cap = *conversation_cap;
        }
        if (turn_cap && *turn_cap - turn_totals_.cost_usd < remaining) {
            remaining = *turn_cap - turn_totals_.cost_usd;
            scope = "turn";
            cap = *turn_cap;
        }
        if (estimate.max_cost_usd <= remaining) return true;
        const double left = std::max(0.0, remaining);
        const std::string message =
            "the next request to " + std::string(state_->route.provider->name()) + "/" +
            state_->route.model + " could cost up to " + detail::format_usd(estimate.max_cost_usd) +
            ", but only " + detail::format_usd(left) + " of the " + scope + " budget of " +
            detail::format_usd(cap) + " remains";
        const BudgetWarning over{.scope = scope,
                                 .budget_usd = cap,
                                 .remaining_usd = left,
                                 .estimated_usd = estimate.max_cost_usd,
                                 .model = state_->route.model,
                                 .provider = std::string(state_->route.provider->name()),
                                 .message = message};
        const BudgetAction action = options_.budget_action.value_or(options.budget_action);
        // The callback hears of the first warning of a turn only.
        const bool first_warning = !warned_;
        if (action == BudgetAction::warn) warned_ = true;
        if (detail::admit_over_budget(over, action,
                                      first_warning
                                          ? options.on_budget_warning
                                          : std::function<void(const BudgetWarning&)>{})) {
            return true;
        }
        skip(message);
        return false;
    }

    void skip(const std::string& message) {
        if (object_ && object_->repair_pending) {
            // A skipped repair round: the refused reply and the repair request are not kept, so
            // the turn commits as a skipped one (its spend still counts).
            turn_messages_.resize(turn_messages_.size() - 2);
        }
        ChatResponse synthetic = detail::budget_skipped_response(
            message, state_->route.model, std::string(state_->route.provider->name()));
        if (streaming_) {
            StreamEvent usage;
            usage.type = StreamEvent::Type::usage_update;
            usage.usage = synthetic.usage;
            pending_.push(std::move(usage));
        }
        commit(std::move(synthetic), true);
    }

    void start_round() {
        ChatRequest request = build_request();
        if (!admit(request)) return;
        ++model_rounds_;
        // A round counts once its request is under way, even if it never answers.
        turn_totals_ += ConversationTotals{.rounds = 1};
        if (async()) {
            AsyncOptions call{.stop = stop_.get_token(), .lane = lane()};
            auto answered = resumer<Result<ChatResponse>>(
                [this](Result<ChatResponse> reply) { round_answered(std::move(reply).value()); });
            if (streaming_) {
                call.executor = strand_;  // the round's events, then its end, on the strand
                detail::ConversationCalls::stream_async(
                    state_->client, std::move(request), std::move(call),
                    {.on_event =
                         [this](const StreamEvent& event) {
                             if (event.type != StreamEvent::Type::done) round_events_(event);
                         },
                     .on_done = std::move(answered)});
            } else {
                detail::ConversationCalls::complete_async(state_->client, std::move(request),
                                                          std::move(call), std::move(answered));
            }
        } else if (streaming_) {
            round_stream_.emplace(detail::ConversationCalls::stream(
                state_->client, std::move(request), stop_.get_token(), lane()));
            phase_ = Phase::streaming;
        } else {
            round_answered(detail::ConversationCalls::complete(state_->client, std::move(request),
                                                               stop_.get_token(), lane()));
        }
    }

    // The conversation's lane in its provider's queue: one per session (two sessions share
    // one only when their hashes collide, which costs them fairness, nothing else).
    [[nodiscard]] std::uint64_t lane() const {
        const auto& options = conversation();
        return std::hash<std::string>{}(options.tenant + '\n' + options.session_id);
    }

    // A round's reply: a finished one goes on; a background reply is waited for; a cancelled
    // one fails the round. (A background stream ends with its finished response, or throws.)
    void round_answered(ChatResponse response) {
        switch (response.status) {
            case ResponseStatus::finished:
                finish_round(std::move(response));
                return;
            case ResponseStatus::cancelled:
                throw_cancelled_response(response.response_id,
                                         {std::string(state_->route.provider->name()),
                                          state_->route.model, response.request_id});
            case ResponseStatus::queued:
            case ResponseStatus::in_progress:
                break;
        }
        const Client& client = state_->client;
        if (!async()) {
            round_answered(client.wait_response(state_->model_spec, response.response_id,
                                                conversation().background_poll, stop_.get_token()));
            return;
        }
        // Polling is blocking code: it waits on a thread of the tool pool, not the strand.
        auto answered = resumer<Result<ChatResponse>>(
            [this](Result<ChatResponse> reply) { round_answered(std::move(reply).value()); });
        auto poll = [client, model = state_->model_spec, id = response.response_id,
                     options = conversation().background_poll, stop = stop_.get_token(),
                     answered]() mutable {
            std::optional<Result<ChatResponse>> reply;
            try {
                reply.emplace(client.wait_response(model, id, options, stop));
            } catch (...) {
                reply.emplace(std::current_exception());
            }
            answered(std::move(*reply));
        };
        if (!detail::ConversationCalls::tool_pool(client).post(poll)) poll();
    }

    void pull_round_event() {
        std::optional<StreamEvent> event = round_stream_->next();
        if (!event || event->type == StreamEvent::Type::done) {
            // (A conditional of an rvalue and a const lvalue would copy the response.)
            ChatResponse response;
            if (event && event->response) {
                response = std::move(*event->response);
            } else {
                response = *round_stream_->response();
            }
            round_stream_.reset();
            finish_round(std::move(response));
            return;
        }
        pending_.push(std::move(*event));
    }

    void finish_round(ChatResponse response) {
        if (object_) object_->repair_pending = false;
        turn_usage_ += response.usage;
        turn_totals_.add_tokens(response.usage);
        // A reply that lands after a cancel belongs to no turn: it is counted, never stored.
        if (stop_.stop_requested()) throw CancelledError("the turn was cancelled");
        response.message.role = Role::assistant;
        const std::vector<ToolCallPart> calls = response.message.tool_calls();
        if (calls.empty() && response.text.empty() && !shape().empty_reply_text.empty() &&
            !object_) {
            response.text = shape().empty_reply_text;
            response.message.parts.emplace_back(TextPart{response.text});
        }
        turn_messages_.push_back(response.message);
        if (calls.empty()) {
            if (object_ && !settle_object(response)) {
                phase_ = Phase::round_start;
                return;
            }
            commit(std::move(response), false);
            return;
        }
        if (tool_rounds_ >= conversation().max_tool_rounds) {
            throw MaxToolRoundsError(conversation().max_tool_rounds);
        }
        ++tool_rounds_;
        if (streaming_) {
            // The round's own `done` stays inside the turn; its usage is reported.
            StreamEvent usage;
            usage.type = StreamEvent::Type::usage_update;
            usage.usage = response.usage;
            pending_.push(std::move(usage));
        }
        detail::ToolRoundSettings settings{
            .pool = &detail::ConversationCalls::tool_pool(state_->client),
            .timeout = conversation().tool_execution_timeout,
            .validation = conversation().tool_validation,
            .sequential = conversation().sequential_tool_calls,
            .max_parallel = conversation().max_parallel_tool_calls,
            .session_id = conversation().session_id,
            .tenant = conversation().tenant,
            .model = state_->route.model,
            .provider = std::string(state_->route.provider->name()),
            .turn_tag = options_.turn_tag,
            .unknown_tool_text = shape().unknown_tool_text,
            // Deadlines are timed on the client's callback thread, no thread waits for them.
            .timer = [callbacks = detail::ConversationCalls::callbacks(state_->client)](
                         std::chrono::steady_clock::duration delay, std::function<void()> work) {
                callbacks->post_after(delay, std::move(work));
            }};
        if (async()) {
            // (Moved into the continuation: a std::function must be copyable, a response is.)
            detail::start_tool_round(
                tools_, state_->queue, calls, std::move(settings), stop_.get_token(),
                resumer<detail::ToolRound>(
                    [this, response = std::move(response)](detail::ToolRound round) mutable {
                        after_tools(std::move(round), std::move(response));
                    }));
            return;
        }
        after_tools(
            detail::run_tool_round(tools_, state_->queue, calls, settings, stop_.get_token()),
            std::move(response));
    }

    // The rest of a round once its tools have run.
    void after_tools(detail::ToolRound round, ChatResponse response) {
        if (round.cancelled) {
            // Every call is answered, so a kept interrupted turn leaves none dangling.
            unrun_calls_ += round.cancelled_calls;
            push_results(turn_messages_, std::move(round.results));
            throw CancelledError("the turn was cancelled while its tools ran");
        }
        for (const auto& result : round.results) {
            StreamEvent event;
            event.type = StreamEvent::Type::tool_call_result;
            event.tool_call_id = result.tool_call_id;
            event.tool_name = result.name;
            event.tool_result = result;
            pending_.push(std::move(event));
        }
        push_results(turn_messages_, std::move(round.results));
        if (round.end_turn) {
            if (object_) {
                throw StructuredOutputError(
                    ErrorCode::structured_output_not_json,
                    "a tool ended the turn (ToolContext::end_turn) "
                    "before the model answered with the JSON value",
                    response.text, {}, turn_usage_,
                    {response.provider, response.model, response.request_id});
            }
            commit(std::move(response), false);
            return;
        }
        phase_ = Phase::round_start;
    }

    // Judges the final reply of a `send_object` turn: true when the turn may commit (a good or
    // refused reply); false when the problem was sent back for another round. Throws when the
    // reply is unusable and no repair is left.
    bool settle_object(const ChatResponse& response) {
        ReplyVerdict verdict = judge_reply(response, object_->schema, object_->decode, turn_usage_);
        if (verdict.kind != ReplyVerdict::Kind::problem) {
            object_->verdict = std::move(verdict);
            return true;
        }
        if (object_->repairs >= object_->max_repairs) {
            throw_unusable_reply(verdict, response, object_->repairs, turn_usage_);
        }
        ++object_->repairs;
        turn_messages_.push_back(repair_request(verdict.problem));
        object_->repair_pending = true;
        return false;
    }

    // Appends a round's results to `messages`: one tool message, or one per call.
    void push_results(std::vector<Message>& messages, std::vector<ToolResultPart> results) const {
        if (!shape().tool_message_per_call) {
            messages.push_back(Message::tool_results(std::move(results)));
            return;
        }
        for (auto& result : results) messages.push_back(Message::tool_results({std::move(result)}));
    }

    void commit(ChatResponse final_response, bool skipped) {
        // Everything that can fail is done before the write, so that a committed turn never
        // reports a failure.
        ConversationReply reply;
        static_cast<ChatResponse&>(reply) = std::move(final_response);
        reply.turn_usage = turn_usage_;
        reply.model_rounds = model_rounds_;
        reply.tool_rounds = tool_rounds_;
        reply.budget_skipped = skipped;
        reply.messages = without_replay(turn_messages_);
        reply.message.replay.reset();
        StreamEvent done;
        done.type = StreamEvent::Type::done;
        done.usage = reply.usage;
        done.response = static_cast<const ChatResponse&>(reply);

        store_turn(turn_messages_);
        pending_.push(std::move(done));
        reply_ = std::move(reply);
        phase_ = Phase::finished;
        release_slot();
    }

    // A failed turn commits nothing to the history (unless `on_interrupted_turn` keeps what it
    // has), but what it spent stays in the totals (and is persisted when possible) so that
    // budgets count it.
    void fail(const std::exception_ptr& error) noexcept {
        failure_ = error;
        phase_ = Phase::finished;
        pending_.clear();
        round_stream_.reset();
        if (holds_slot_ && !totals_committed_ && keeps_interrupted()) {
            try {
                keep_interrupted(error);
            } catch (...) {
                // Kept messages that cannot be stored are dropped; the totals still count.
            }
        }
        if (holds_slot_ && !totals_committed_ && turn_totals_.rounds > 0) {
            totals_committed_ = true;
            state_->add_spend(turn_totals_);
        }
        release_slot();
    }

    // Commits the user message and the finished rounds of an interrupted turn, every call
    // answered, then the message `on_interrupted_turn` (or the owner's hook) returns.
    void keep_interrupted(const std::exception_ptr& error) {
        InterruptedTurn interrupted{std::string(to_string(ErrorCode::cancelled)),
                                    "the turn was abandoned", unrun_calls_};
        if (!error) {
            detail::note_reported(ErrorCode::cancelled);
        } else {
            try {
                std::rethrow_exception(error);
            } catch (const SessionStoreConflictError&) {
                return;  // The stored session moved on; this turn's base is stale.
            } catch (const Error& failure) {
                interrupted.code = failure.code();
                interrupted.message = failure.message();
            } catch (const std::exception& failure) {
                interrupted.code = detail::report(ErrorCode::turn_failed);
                interrupted.message = failure.what();
            }
        }
        std::vector<Message> kept = turn_messages_;
        if (kept.empty()) return;
        if (const auto calls = kept.back().tool_calls();
            kept.back().role == Role::assistant && !calls.empty()) {
            // Calls the failure left unrun (a round over max_tool_rounds, say).
            std::vector<ToolResultPart> results;
            results.reserve(calls.size());
            for (const auto& call : calls) {
                results.push_back({call.id, call.name,
                                   interrupted.code == to_string(ErrorCode::cancelled)
                                       ? std::string(detail::tool_call_cancelled_text)
                                       : "Tool call not run: " + interrupted.message,
                                   true});
            }
            interrupted.unrun_calls += calls.size();
            push_results(kept, std::move(results));
        }
        // The callback runs under the busy guard, as a tool does: a turn it starts on this
        // conversation (from whatever thread called cancel) is refused, not deadlocked.
        std::optional<Message> extra;
        state_->queue->tool_started();
        try {
            extra = state_->hooks ? state_->hooks->interrupted(interrupted)
                                  : conversation().on_interrupted_turn(interrupted);
        } catch (...) {
            state_->queue->tool_finished();
            throw;
        }
        state_->queue->tool_finished();
        if (extra) {
            if (extra->role == Role::system || extra->role == Role::tool) {
                throw InvalidMessageError("/role",
                                          "an interrupted turn's message must be a "
                                          "user or assistant message");
            }
            validate_message(*extra);
            kept.push_back(std::move(*extra));
        }
        store_turn(kept);
    }

    // Persists the history with `messages` appended and the turn's spend added, then makes
    // that the conversation's state.
    void store_turn(const std::vector<Message>& messages) {
        std::vector<Message> history = base_history_;
        history.insert(history.end(), messages.begin(), messages.end());
        ConversationTotals totals;
        {
            std::lock_guard lock(state_->mutex);
            totals = state_->totals;
        }
        totals += turn_totals_;
        state_->commit(std::move(history), totals, base_history_.size());
        totals_committed_ = true;
    }

    void release_slot() noexcept {
        if (holds_slot_) {
            holds_slot_ = false;
            state_->queue->release();
        }
    }

    std::shared_ptr<Conversation::State> state_;
    Message user_;
    SendOptions options_;
    bool streaming_;
    ObjectTurn* object_;  ///< Set for a `send_object` turn; owned by the caller.
    std::stop_source stop_;
    std::stop_callback<std::function<void()>> on_caller_stop_;

    Phase phase_ = Phase::waiting;
    bool holds_slot_ = false;
    std::vector<Message> base_history_;
    std::shared_ptr<const ToolRegistry> tools_;
    std::vector<Message> turn_messages_;
    double persisted_spend_ = 0;
    Usage turn_usage_;
    ConversationTotals turn_totals_;
    bool totals_committed_ = false;
    int model_rounds_ = 0;
    int tool_rounds_ = 0;
    std::size_t unrun_calls_ = 0;  ///< Calls a cancel answered `Tool call cancelled`.
    bool warned_ = false;
    std::optional<ChatStream> round_stream_;
    detail::EventQueue<StreamEvent> pending_;
    std::optional<ConversationReply> reply_;
    std::exception_ptr failure_;
    // Async only (see `run_async`).
    std::shared_ptr<Executor> strand_;
    std::function<void(std::function<void()>)> resume_;
    std::function<void(const StreamEvent&)> round_events_;
    std::function<void()> continuation_;
    std::exception_ptr abort_error_;
    std::mutex control_;  ///< Orders `cancel()` from another thread against `next()`.
    bool in_next_ = false;
};

// Marks the calling thread, while alive, as running a step of an async turn of `queue`: a
// blocking turn that a callback starts there on the same conversation is refused, not left
// waiting for the turn that waits for the callback.
class AsyncStep {
public:
    explicit AsyncStep(std::shared_ptr<TurnQueue> queue) noexcept : queue_(std::move(queue)) {
        queue_->enter_async_step();
    }
    ~AsyncStep() { queue_->leave_async_step(); }
    AsyncStep(const AsyncStep&) = delete;
    AsyncStep& operator=(const AsyncStep&) = delete;

private:
    std::shared_ptr<TurnQueue> queue_;  ///< Held: the turn may end, and go, inside the step.
};

// One async turn: a `TurnRunner` pulled on a strand (the turn's executor, else the client's
// callback thread) each time an operation it waits for has ended, its events and its end handed
// to the caller's callbacks there. It holds itself until it has ended.
class AsyncTurn final : public std::enable_shared_from_this<AsyncTurn> {
public:
    // Throws what the turn's checks throw (invalid options, an invalid user message).
    AsyncTurn(const std::shared_ptr<Conversation::State>& state, Message user, SendOptions options,
              bool streaming, TurnCallbacks callbacks, const std::shared_ptr<Executor>& executor)
        : callbacks_thread_(ConversationCalls::callbacks(state->client)),
          strand_(std::make_shared<detail::Strand>(executor ? executor : callbacks_thread_)),
          callbacks_(std::move(callbacks)),
          runner_(state, std::move(user), std::move(options), streaming) {}

    // Starts the turn: it takes its place in the FIFO here, and its first step runs on the
    // strand, never inside this call.
    void start() {
        const auto owner = shared_from_this();
        self_ = owner;
        const std::weak_ptr<AsyncTurn> weak = weak_from_this();
        runner_.run_async(
            strand_,
            // Through the callback thread: an operation may end on any thread (a tool's, the
            // one that freed the slot), and the strand's executor runs from where it is posted.
            [weak, callbacks = callbacks_thread_](std::function<void()> step) {
                callbacks->post([weak, step = std::move(step)]() mutable {
                    const auto self = weak.lock();
                    if (!self) return;
                    self->strand_->post([self, step = std::move(step)] {
                        step();
                        self->drive();
                    });
                });
            },
            [weak](const StreamEvent& event) {
                // The consumer's callback: what it throws ends the round's stream, and the turn.
                if (const auto self = weak.lock(); self && self->callbacks_.on_event) {
                    self->callbacks_.on_event(event);
                }
            });
        try {
            runner_.take_place();
        } catch (...) {
            runner_.abort(std::current_exception());  // the first step ends the turn with it
        }
        // Not `self_`: from here the strand owns it. A turn refused on arrival may already
        // have run its steps there and ended (`self_` reset) while this call goes on.
        strand_->post([owner] { owner->drive(); });
    }

    void cancel() noexcept { runner_.cancel(); }

    // Makes and starts a turn. A turn its checks refuse (invalid options, an invalid user
    // message) never starts: `on_done` is told the error on `executor` (else the client's
    // callback thread), and the handle is empty.
    static TurnHandle launch(const std::shared_ptr<Conversation::State>& state, Message user,
                             SendOptions options, bool streaming, TurnCallbacks callbacks,
                             const std::shared_ptr<Executor>& executor) {
        std::shared_ptr<AsyncTurn> turn;
        std::exception_ptr refused;
        try {
            turn = std::make_shared<AsyncTurn>(state, std::move(user), std::move(options),
                                               streaming, callbacks, executor);
        } catch (...) {
            refused = std::current_exception();
        }
        if (turn) {
            turn->start();
            return TurnHandle(turn);
        }
        // Posted outside the handler, so that the caller's copy of the error is its last one.
        auto tell = [on_done = std::move(callbacks.on_done), error = std::move(refused)]() mutable {
            if (!on_done) return;
            try {
                on_done(Result<ConversationReply>(std::move(error)));
            } catch (...) {
                // What `on_done` throws is dropped.
            }
        };
        if (executor) {
            executor->post(std::move(tell));
        } else {
            ConversationCalls::callbacks(state->client)->post(std::move(tell));
        }
        return {};
    }

private:
    // Pulls the turn until it waits for an operation or has ended.
    void drive() {
        if (!self_) return;  // ended already
        const AsyncStep step(runner_.queue());
        for (;;) {
            std::optional<StreamEvent> event;
            std::exception_ptr failure;
            try {
                event = runner_.next();
            } catch (...) {
                failure = std::current_exception();
            }
            if (failure) return fail(std::move(failure));  // outside the handler: see fail()
            if (!event) {
                if (runner_.finished()) end(Result<ConversationReply>(runner_.take_reply()));
                return;
            }
            if (!callbacks_.on_event) continue;
            try {
                callbacks_.on_event(*event);
            } catch (...) {
                failure = std::current_exception();
            }
            if (!failure) continue;
            if (event->type == StreamEvent::Type::done) return fail(std::move(failure));
            runner_.abort(std::move(failure));
        }
    }

    // Ends the turn with `failure`, holding no other reference to it (not in the runner, not in
    // an active handler), so the caller's copy is the last and is freed on the caller's thread.
    void fail(std::exception_ptr failure) {
        runner_.release_failure();
        end(Result<ConversationReply>(std::move(failure)));
    }

    void end(Result<ConversationReply> result) {
        const auto keep = std::move(self_);  // this call is the last use of the turn
        if (!callbacks_.on_done) return;
        try {
            callbacks_.on_done(std::move(result));
        } catch (...) {
            // What `on_done` throws is dropped.
        }
    }

    std::shared_ptr<WorkThread> callbacks_thread_;  ///< The client's.
    std::shared_ptr<detail::Strand> strand_;
    TurnCallbacks callbacks_;
    TurnRunner runner_;
    std::shared_ptr<AsyncTurn> self_;  ///< From `start` until the turn has ended.
};

}  // namespace detail

void TurnHandle::cancel() const noexcept {
    if (const auto turn = turn_.lock()) turn->cancel();
}

TurnHandle Conversation::send_stream_async(Message user_message, TurnCallbacks callbacks,
                                           SendOptions options,
                                           const std::shared_ptr<Executor>& executor) {
    return detail::AsyncTurn::launch(state_, std::move(user_message), std::move(options), true,
                                     std::move(callbacks), executor);
}

TurnHandle Conversation::send_async(Message user_message,
                                    std::function<void(Result<ConversationReply>)> on_done,
                                    SendOptions options,
                                    const std::shared_ptr<Executor>& executor) {
    return detail::AsyncTurn::launch(state_, std::move(user_message), std::move(options), false,
                                     TurnCallbacks{.on_done = std::move(on_done)}, executor);
}

TurnHandle Conversation::send_async(std::string text,
                                    std::function<void(Result<ConversationReply>)> on_done,
                                    SendOptions options,
                                    const std::shared_ptr<Executor>& executor) {
    return send_async(Message::user(std::move(text)), std::move(on_done), std::move(options),
                      executor);
}

std::future<ConversationReply> Conversation::send_async(Message user_message, SendOptions options) {
    auto [future, handler] = detail::future_and_handler<ConversationReply>();
    send_async(std::move(user_message), std::move(handler), std::move(options));
    return std::move(future);
}

std::future<ConversationReply> Conversation::send_async(std::string text, SendOptions options) {
    return send_async(Message::user(std::move(text)), std::move(options));
}

Awaitable<ConversationReply> Conversation::co_send(Message user_message, SendOptions options,
                                                   std::shared_ptr<Executor> executor) {
    return Awaitable<ConversationReply>(
        [conversation = *this, user = std::move(user_message), options = std::move(options)](
            const std::shared_ptr<Executor>& resume_on,
            std::function<void(Result<ConversationReply>)> on_done) mutable {
            (void)conversation.send_async(std::move(user), std::move(on_done), std::move(options),
                                          resume_on);
        },
        std::move(executor));
}

Awaitable<ConversationReply> Conversation::co_send(Message user_message, SendOptions options) {
    return co_send(std::move(user_message), std::move(options), nullptr);
}

Awaitable<ConversationReply> Conversation::co_send(Message user_message) {
    return co_send(std::move(user_message), SendOptions{}, nullptr);
}

Awaitable<ConversationReply> Conversation::co_send(std::string text) {
    return co_send(Message::user(std::move(text)), SendOptions{}, nullptr);
}

AsyncEventStream Conversation::co_send_stream(Message user_message, SendOptions options,
                                              std::shared_ptr<Executor> resume_on) {
    return AsyncEventStream(
        [conversation = *this, user = std::move(user_message), options = std::move(options)](
            const std::shared_ptr<Executor>& batches,
            std::function<void(const StreamEvent&)> on_event,
            std::function<void(Result<ChatResponse>)> on_done) mutable {
            const TurnHandle handle = conversation.send_stream_async(
                std::move(user),
                {.on_event = std::move(on_event),
                 .on_done =
                     [on_done = std::move(on_done)](Result<ConversationReply> outcome) {
                         if (outcome) {
                             on_done(Result<ChatResponse>(
                                 static_cast<ChatResponse&&>(std::move(outcome).value())));
                         } else {
                             on_done(Result<ChatResponse>(std::move(outcome).error()));
                         }
                     }},
                std::move(options), batches);
            return std::function<void()>([handle] { handle.cancel(); });
        },
        std::move(resume_on));
}

AsyncEventStream Conversation::co_send_stream(Message user_message) {
    return co_send_stream(std::move(user_message), SendOptions{}, nullptr);
}

ConversationStream::ConversationStream(std::unique_ptr<detail::TurnRunner> runner)
    : runner_(std::move(runner)) {}
ConversationStream::ConversationStream(ConversationStream&&) noexcept = default;
ConversationStream& ConversationStream::operator=(ConversationStream&&) noexcept = default;
ConversationStream::~ConversationStream() = default;

std::optional<StreamEvent> ConversationStream::next() {
    if (!runner_) return std::nullopt;  // Moved from.
    return runner_->next();
}

void ConversationStream::cancel() noexcept {
    if (runner_) runner_->cancel();
}

const std::optional<ConversationReply>& ConversationStream::reply() const noexcept {
    static const std::optional<ConversationReply> none;
    return runner_ ? runner_->reply() : none;
}

ConversationReply Conversation::send(std::string text, SendOptions options) {
    return send(Message::user(std::move(text)), std::move(options));
}

ConversationReply Conversation::send(Message user_message, SendOptions options) {
    detail::TurnRunner runner(state_, std::move(user_message), std::move(options), false);
    while (runner.next()) {
    }
    return runner.take_reply();
}

ConversationObject<json> Conversation::send_object(std::string text, json schema,
                                                   const StructuredOutputOptions& options,
                                                   SendOptions send) {
    return run_object_turn(Message::user(std::move(text)), std::move(schema), options,
                           std::move(send), {});
}

ConversationObject<json> Conversation::send_object(Message user_message, json schema,
                                                   const StructuredOutputOptions& options,
                                                   SendOptions send) {
    return run_object_turn(std::move(user_message), std::move(schema), options, std::move(send),
                           {});
}

ConversationObject<json> Conversation::run_object_turn(Message user, json schema,
                                                       const StructuredOutputOptions& options,
                                                       SendOptions send,
                                                       const detail::ObjectDecoder& decode) {
    detail::check_object_options(options);
    if (options.budget) {
        throw InvalidOptionError(ErrorCode::invalid_budget,
                                 "StructuredOutputOptions::budget is for Client calls; a "
                                 "conversation turn's cap is SendOptions::budget_usd");
    }
    CompiledSchema compiled = CompiledSchema::value(std::move(schema));
    ResponseFormat format{options.name, compiled.schema(), options.strict};
    detail::ObjectTurn turn{.format = std::move(format),
                            .schema = std::move(compiled),
                            .decode = decode,
                            .max_repairs = options.max_repairs};
    detail::TurnRunner runner(state_, std::move(user), std::move(send), false, &turn);
    while (runner.next()) {
    }
    ConversationReply reply = runner.take_reply();
    ConversationObject<json> out;
    switch (turn.verdict.kind) {
        case detail::ReplyVerdict::Kind::good:
            out.value = std::move(turn.verdict.value);
            out.object = out.value;
            break;
        case detail::ReplyVerdict::Kind::refused:
            out.refusal = std::move(turn.verdict.problem);
            break;
        case detail::ReplyVerdict::Kind::skipped:
        case detail::ReplyVerdict::Kind::problem:
            break;
    }
    out.budget_skipped = reply.budget_skipped;
    out.usage = reply.turn_usage;
    out.repairs = turn.repairs;
    out.messages = std::move(reply.messages);
    out.model_rounds = reply.model_rounds;
    out.tool_rounds = reply.tool_rounds;
    out.response = std::move(static_cast<ChatResponse&>(reply));
    return out;
}

ConversationStream Conversation::send_stream(std::string text, SendOptions options) {
    return send_stream(Message::user(std::move(text)), std::move(options));
}

ConversationStream Conversation::send_stream(Message user_message, SendOptions options) {
    return ConversationStream(std::make_unique<detail::TurnRunner>(state_, std::move(user_message),
                                                                   std::move(options), true));
}

}  // namespace ullm
