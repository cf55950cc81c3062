#include <ullm/conversation/conversation.hpp>

#include <ullm/conversation/markdown.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/session_store.hpp>
#include <ullm/tools/tool_registry.hpp>

#include "conversation_state.hpp"
#include "tool_sequence.hpp"

#include <cmath>
#include <mutex>
#include <random>

namespace ullm {

namespace {

using WallClock = std::chrono::system_clock;

// Milliseconds precision, as snapshots store time.
WallClock::time_point now_ms() {
    return std::chrono::time_point_cast<std::chrono::milliseconds>(WallClock::now());
}

std::string generate_session_id() {
    std::random_device device;
    std::uniform_int_distribution<int> digit(0, 15);
    std::string id = "conv_";
    for (int i = 0; i < 32; ++i) id += "0123456789abcdef"[digit(device)];
    return id;
}

void check_max_tokens(const std::optional<std::int64_t>& max_tokens) {
    if (max_tokens && *max_tokens <= 0) {
        throw InvalidOptionError(ErrorCode::invalid_max_tokens, "max_tokens must be positive");
    }
}

// A forced tool choice needs tools, and a named one that tool.
void check_tool_choice(const std::optional<ToolChoice>& tool_choice,
                       const std::vector<Tool>& tools) {
    if (!tool_choice) return;
    const auto& choice = *tool_choice;
    const bool forced =
        choice.mode == ToolChoice::Mode::required || choice.mode == ToolChoice::Mode::tool;
    if (forced && tools.empty()) {
        throw InvalidOptionError(ErrorCode::invalid_tool_choice,
                                 "tool_choice forces a tool call but no tools are given");
    }
    if (choice.mode == ToolChoice::Mode::tool &&
        std::none_of(tools.begin(), tools.end(),
                     [&](const Tool& tool) { return tool.name() == choice.name; })) {
        throw InvalidOptionError(ErrorCode::unknown_tool_choice,
                                 "tool_choice names \"" + choice.name +
                                     "\", which is not one of the conversation's tools");
    }
}

// Checks every option that can be checked without routing; fills in a session id.
void check_options(ConversationOptions& options) {
    if (options.session_id.empty()) options.session_id = generate_session_id();
    validate_session_key(options.tenant, options.session_id);
    if (options.max_tool_rounds < 0 || options.max_tool_rounds > 100) {
        throw InvalidOptionError(ErrorCode::invalid_max_tool_rounds,
                                 "max_tool_rounds must be an integer from 0 to 100, not " +
                                     std::to_string(options.max_tool_rounds));
    }
    if (options.tool_execution_timeout <= std::chrono::milliseconds::zero() ||
        options.tool_execution_timeout > std::chrono::milliseconds(300'000)) {
        throw InvalidOptionError(
            ErrorCode::invalid_tool_execution_timeout,
            "tool_execution_timeout must be positive and at most 300000 ms, not " +
                std::to_string(options.tool_execution_timeout.count()) + " ms");
    }
    if (options.max_parallel_tool_calls < 1 || options.max_parallel_tool_calls > 256) {
        throw InvalidOptionError(ErrorCode::invalid_max_parallel_tool_calls,
                                 "max_parallel_tool_calls must be from 1 to 256, not " +
                                     std::to_string(options.max_parallel_tool_calls));
    }
    if (options.tool_validation != ValidationMode::strict &&
        options.tool_validation != ValidationMode::permissive) {
        throw InvalidOptionError(ErrorCode::invalid_tool_validation,
                                 "tool_validation must be strict or permissive");
    }
    check_max_tokens(options.max_tokens);
    if (options.temperature && (!std::isfinite(*options.temperature) || *options.temperature < 0 ||
                                *options.temperature > 2)) {
        throw InvalidOptionError(ErrorCode::invalid_temperature,
                                 "temperature must be a number from 0 to 2");
    }
    detail::check_budget(options.budget_usd, "budget_usd");
    detail::check_budget_action(options.budget_action);
    detail::check_poll_options(options.background_poll);
    if (!options.provider_options.is_object()) {
        throw InvalidOptionError(ErrorCode::invalid_provider_options,
                                 "provider_options must be a JSON object");
    }
    validate_tools(options.tools);
    check_tool_choice(options.tool_choice, options.tools);
}

}  // namespace

namespace detail {

void check_send_options(const SendOptions& options) {
    detail::check_budget(options.budget_usd, "a turn's budget_usd");
    check_max_tokens(options.max_tokens);
    if (options.budget_action) detail::check_budget_action(*options.budget_action);
}

std::vector<Message> without_replay(std::vector<Message> messages) {
    for (auto& message : messages) message.replay.reset();
    return messages;
}

}  // namespace detail

Conversation::Conversation(const Client& client, ConversationOptions options)
    : Conversation(client, std::move(options), nullptr) {}

Conversation::Conversation(const Client& client, ConversationOptions options,
                           std::shared_ptr<detail::TurnHooks> hooks)
    : state_(std::make_shared<State>(client)) {
    check_options(options);
    auto& state = *state_;
    state.hooks = std::move(hooks);
    state.route = client.route(options.model);
    state.model_spec = std::string(state.route.provider->name()) + "/" + state.route.model;
    state.registry = std::make_shared<const ToolRegistry>(options.tools);
    if (options.use_session_store) {
        state.store = options.session_store ? options.session_store : client.session_store();
    }
    state.options = std::move(options);
    state.created_at = state.updated_at = now_ms();
    if (state.store) state.reload();
}

std::vector<Message> Conversation::history(bool include_replay) const {
    std::lock_guard lock(state_->mutex);
    return include_replay ? state_->history : detail::without_replay(state_->history);
}

std::vector<Message> Conversation::to_messages() const {
    std::vector<Message> messages;
    if (!state_->options.system.empty()) {
        messages.push_back(Message::system(state_->options.system));
    }
    auto stored = history();
    messages.insert(messages.end(), std::make_move_iterator(stored.begin()),
                    std::make_move_iterator(stored.end()));
    return messages;
}

ConversationTotals Conversation::totals() const {
    std::lock_guard lock(state_->mutex);
    return state_->totals;
}

std::string Conversation::to_markdown() const {
    return render_markdown(to_messages(),
                           MarkdownHeader{.session_id = state_->options.session_id,
                                          .tenant = state_->options.tenant,
                                          .provider = std::string(state_->route.provider->name()),
                                          .model = state_->route.model,
                                          .totals = totals()});
}

json Conversation::serialise() const {
    std::lock_guard lock(state_->mutex);
    return snapshot_to_json(ConversationSnapshot{.session_id = state_->options.session_id,
                                                 .tenant = state_->options.tenant,
                                                 .messages = state_->history,
                                                 .totals = state_->totals,
                                                 .created_at = state_->created_at,
                                                 .updated_at = state_->updated_at});
}

void Conversation::append(std::vector<Message> messages) {
    // Checked as a stored message is, so that what is appended could also be restored.
    for (std::size_t index = 0; index < messages.size(); ++index) {
        // (Built by appending: g++ 12 -O2 warns falsely about "/" + std::string.)
        std::string at = "/";
        at += std::to_string(index);
        if (messages[index].role == Role::system) {
            throw InvalidMessageError(at + "/role",
                                      "the conversation adds its system prompt itself");
        }
        validate_message(messages[index], at);
    }
    state_->queue->run_exclusive([&] {
        std::vector<Message> history;
        ConversationTotals totals;
        {
            std::lock_guard lock(state_->mutex);
            history = state_->history;
            totals = state_->totals;
        }
        const std::size_t first = history.size();
        history.insert(history.end(), messages.begin(), messages.end());
        const auto violation = detail::check_tool_sequence(history);
        if (violation && violation->message >= first) {
            throw InvalidMessageError(
                "/" + std::to_string(violation->message - first) + violation->pointer,
                violation->rule);
        }
        if (!history.empty() && !history.back().tool_calls().empty()) {
            throw InvalidMessageError("/" + std::to_string(messages.size() - 1),
                                      "leaves its tool calls unanswered; append their results "
                                      "too");
        }
        state_->commit(std::move(history), totals, first);
    });
}

void Conversation::set_tools(std::vector<Tool> tools) {
    check_tool_choice(state_->options.tool_choice, tools);
    auto registry = std::make_shared<const ToolRegistry>(std::move(tools));
    std::lock_guard lock(state_->mutex);
    state_->registry = std::move(registry);
}

std::vector<Tool> Conversation::tools() const {
    std::lock_guard lock(state_->mutex);
    return state_->registry->tools();
}

void Conversation::clear() {
    state_->queue->run_exclusive([&] {
        ConversationTotals totals;
        {
            std::lock_guard lock(state_->mutex);
            totals = state_->totals;
        }
        state_->commit({}, totals, 0);
    });
}

const std::string& Conversation::id() const noexcept {
    return state_->options.session_id;
}

const std::string& Conversation::tenant() const noexcept {
    return state_->options.tenant;
}

std::uint64_t Conversation::version() const {
    std::lock_guard lock(state_->mutex);
    return state_->version;
}

const Route& Conversation::route() const noexcept {
    return state_->route;
}

Conversation Client::conversation(ConversationOptions options) const {
    return Conversation(*this, std::move(options));
}

namespace detail {

Conversation HookedConversation::make(const Client& client, ConversationOptions options,
                                      std::shared_ptr<TurnHooks> hooks) {
    return Conversation(client, std::move(options), std::move(hooks));
}

}  // namespace detail

}  // namespace ullm
