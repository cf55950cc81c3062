#include <ullm/conversation/context_manager.hpp>

#include <ullm/core/error.hpp>
#include <ullm/detail/json_checks.hpp>

#include <algorithm>
#include <limits>
#include <utility>
#include <variant>

#include "../core/arithmetic.hpp"
#include "../core/text.hpp"
#include "tool_sequence.hpp"

namespace ullm {

namespace {

constexpr ErrorCode invalid_output_code = ErrorCode::invalid_context_manager_output;
constexpr const char* summary_heading = "Summary of the earlier conversation:\n";

[[noreturn]] void invalid_output(std::size_t index, const std::string& rule) {
    throw InvalidOptionError(invalid_output_code, "context manager output, message " +
                                                      std::to_string(index) + ": " + rule);
}

[[noreturn]] void invalid_window(const std::string& message) {
    throw InvalidOptionError(ErrorCode::invalid_context_window, message);
}

bool has_tool_calls(const Message& message) {
    return std::any_of(message.parts.begin(), message.parts.end(),
                       [](const Part& part) { return std::holds_alternative<ToolCallPart>(part); });
}

// Messages that are kept or dropped together: one message, or an assistant message with tool
// calls and the tool messages that answer it. [begin, end) indexes the message list.
struct Unit {
    std::size_t begin;
    std::size_t end;
};

std::vector<Unit> group_units(const std::vector<Message>& messages) {
    std::vector<Unit> units;
    for (std::size_t i = 0; i < messages.size();) {
        std::size_t end = i + 1;
        if (messages[i].role == Role::assistant && has_tool_calls(messages[i])) {
            while (end < messages.size() && messages[end].role == Role::tool) ++end;
        }
        units.push_back({i, end});
        i = end;
    }
    return units;
}

bool unit_pinned(const std::vector<Message>& messages, const Unit& unit) {
    for (std::size_t i = unit.begin; i < unit.end; ++i) {
        if (is_pinned(messages[i])) return true;
    }
    return false;
}

// The index of the latest user message: where the turn being answered begins.
std::optional<std::size_t> latest_user(const std::vector<Message>& messages) {
    for (std::size_t i = messages.size(); i > 0; --i) {
        if (messages[i - 1].role == Role::user) return i - 1;
    }
    return std::nullopt;
}
}  // namespace

std::int64_t estimate_tokens(const Message& message) {
    const std::string text = message_to_json(message, /*include_replay=*/false)
                                 .dump(-1, ' ', false, json::error_handler_t::replace);
    return std::max<std::int64_t>(1, static_cast<std::int64_t>((text.size() + 3) / 4));
}

bool is_pinned(const Message& message) {
    if (!message.metadata.is_object()) return false;
    const auto it = message.metadata.find("pinned");
    return it != message.metadata.end() && it->is_boolean() && it->get<bool>();
}

void validate_context(const std::vector<Message>& output, std::size_t input_size) {
    if (output.empty() && input_size > 0) {
        throw InvalidOptionError(invalid_output_code, "context manager output is empty for " +
                                                          std::to_string(input_size) +
                                                          " input message(s)");
    }
    // The rules a snapshot enforces, so that what is sent could also be stored.
    const detail::JsonRules rules{};
    for (std::size_t index = 0; index < output.size(); ++index) {
        const Message& message = output[index];
        if (message.role == Role::system) {
            invalid_output(index,
                           "has the system role; the conversation adds its system prompt itself");
        }
        const json encoded = message_to_json(message, /*include_replay=*/true);
        if (const auto violation = detail::check_json_rules(encoded, "", rules);
            !violation.constraint.empty()) {
            invalid_output(index, "at " + (violation.path.empty() ? "/" : violation.path) + ": " +
                                      violation.constraint);
        }
        try {
            (void)parse_message(encoded);
        } catch (const InvalidMessageError& error) {
            invalid_output(index, "is not a valid canonical message: at " +
                                      (error.path().empty() ? "/" : error.path()) + ": " +
                                      error.constraint());
        }
    }
    if (const auto violation = detail::check_tool_sequence(output)) {
        invalid_output(violation->message, violation->pointer.empty() ? violation->rule
                                                                      : "at " + violation->pointer +
                                                                            ": " + violation->rule);
    }
}

// --- SlidingWindowStrategy ---------------------------------------------------------------------

SlidingWindowStrategy::SlidingWindowStrategy(SlidingWindowOptions options) : options_(options) {
    if (!options_.max_messages && !options_.max_tokens) {
        invalid_window("a sliding window needs max_messages, max_tokens or both");
    }
    if (options_.max_messages && *options_.max_messages == 0) {
        invalid_window("max_messages must be at least 1");
    }
    if (options_.max_tokens && *options_.max_tokens < 1) {
        invalid_window("max_tokens must be at least 1");
    }
}

bool SlidingWindowStrategy::should_trim(std::vector<Message> messages) {
    if (options_.max_messages && messages.size() > *options_.max_messages) return true;
    if (!options_.max_tokens) return false;
    std::int64_t tokens = 0;
    for (const auto& message : messages)
        tokens = detail::saturating_add(tokens, estimate_tokens(message));
    return tokens > *options_.max_tokens;
}

std::vector<Message> SlidingWindowStrategy::trim(std::vector<Message> messages) {
    if (messages.empty()) return messages;
    const std::vector<Unit> units = group_units(messages);
    std::vector<std::int64_t> tokens(units.size(), 0);
    for (std::size_t k = 0; k < units.size(); ++k) {
        for (std::size_t i = units[k].begin; i < units[k].end; ++i) {
            tokens[k] = detail::saturating_add(tokens[k], estimate_tokens(messages[i]));
        }
    }
    std::vector<bool> keep(units.size(), false);
    std::size_t kept_messages = 0;
    std::int64_t kept_tokens = 0;
    const auto take = [&](std::size_t k) {
        keep[k] = true;
        kept_messages += units[k].end - units[k].begin;
        kept_tokens = detail::saturating_add(kept_tokens, tokens[k]);
    };

    // Kept whatever the limits say: pinned messages, and the turn being answered (the latest
    // user message and the tool rounds after it, without which the model would lose its task
    // or repeat its tool calls).
    const auto current_turn = latest_user(messages);
    for (std::size_t k = 0; k < units.size(); ++k) {
        if ((current_turn && units[k].end > *current_turn) || unit_pinned(messages, units[k])) {
            take(k);
        }
    }
    // Then the most recent units, newest first, while they fit.
    for (std::size_t k = units.size(); k > 0; --k) {
        if (keep[k - 1]) continue;
        const Unit& unit = units[k - 1];
        const std::size_t count = kept_messages + (unit.end - unit.begin);
        const std::int64_t total = detail::saturating_add(kept_tokens, tokens[k - 1]);
        if ((options_.max_messages && count > *options_.max_messages) ||
            (options_.max_tokens && total > *options_.max_tokens)) {
            break;
        }
        take(k - 1);
    }
    // Never send nothing: without a user message or pinned message, the newest unit stays.
    if (std::none_of(keep.begin(), keep.end(), [](bool kept) { return kept; })) {
        keep.back() = true;
    }

    std::vector<Message> out;
    out.reserve(kept_messages);
    for (std::size_t k = 0; k < units.size(); ++k) {
        if (!keep[k]) continue;
        for (std::size_t i = units[k].begin; i < units[k].end; ++i) {
            out.push_back(std::move(messages[i]));
        }
    }
    return out;
}

// --- SummarisationStrategy ---------------------------------------------------------------------

SummarisationStrategy::SummarisationStrategy(SummarisationOptions options)
    : options_(std::move(options)) {
    if (options_.max_messages < 2) invalid_window("max_messages must be at least 2");
    if (options_.keep_last_messages == 0) invalid_window("keep_last_messages must be at least 1");
    if (options_.keep_last_messages >= options_.max_messages) {
        invalid_window("keep_last_messages must be less than max_messages");
    }
    if (!options_.summarizer) invalid_window("a summarisation strategy needs a summarizer");
}

bool SummarisationStrategy::should_trim(std::vector<Message> messages) {
    return messages.size() > options_.max_messages;
}

std::vector<Message> SummarisationStrategy::trim(std::vector<Message> messages) {
    if (messages.size() <= options_.max_messages) return messages;

    // The tail sent verbatim: the last messages, moved earlier so that it starts neither with
    // a tool message (its call would be summarised away) nor after the latest user message.
    std::size_t tail = messages.size() - options_.keep_last_messages;
    while (tail > 0 && messages[tail].role == Role::tool) --tail;
    if (const auto current_turn = latest_user(messages); current_turn && *current_turn < tail) {
        tail = *current_turn;
    }

    // Before the tail: pinned units stay verbatim, everything else is summarised.
    std::vector<Message> summarised;
    std::vector<Message> pinned;
    for (const Unit& unit : group_units(messages)) {
        if (unit.begin >= tail) break;
        auto& target = unit_pinned(messages, unit) ? pinned : summarised;
        for (std::size_t i = unit.begin; i < unit.end; ++i) target.push_back(messages[i]);
    }
    if (summarised.empty()) return messages;

    // Reuse the remembered summary when it covers the start of what is to be summarised now.
    std::optional<Message> previous;
    std::size_t covered = 0;
    {
        const std::lock_guard lock(mutex_);
        if (summary_ && summarised_prefix_.size() <= summarised.size() &&
            std::equal(summarised_prefix_.begin(), summarised_prefix_.end(), summarised.begin())) {
            previous = summary_;
            covered = summarised_prefix_.size();
        }
    }

    Message summary;
    if (previous && covered == summarised.size()) {
        summary = std::move(*previous);
    } else {
        std::vector<Message> input;
        if (previous) {
            input.reserve(1 + summarised.size() - covered);
            input.push_back(std::move(*previous));
            input.insert(input.end(), summarised.begin() + static_cast<std::ptrdiff_t>(covered),
                         summarised.end());
        } else {
            input = summarised;
        }
        // Called without the lock: a summariser may take long or call back into the library.
        std::string text = options_.summarizer(input);
        if (detail::is_blank(text)) {
            throw InvalidOptionError(invalid_output_code,
                                     "the summariser returned an empty summary");
        }
        summary = Message::user(summary_heading + text);
        summary.metadata = {{"summary", true}, {"summarised_messages", summarised.size()}};
        const std::lock_guard lock(mutex_);
        summarised_prefix_ = std::move(summarised);
        summary_ = summary;
    }

    std::vector<Message> out;
    out.reserve(1 + pinned.size() + messages.size() - tail);
    out.push_back(std::move(summary));
    for (auto& message : pinned) out.push_back(std::move(message));
    for (std::size_t i = tail; i < messages.size(); ++i) out.push_back(std::move(messages[i]));
    return out;
}

}  // namespace ullm
