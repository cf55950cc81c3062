#pragma once

// Internal: the seam through which the owner of a conversation (a dialog instance) shapes the
// conversation's turns and keeps its own state in the conversation's stored snapshot, instead
// of options in `ConversationOptions` that only it would set.

#include <ullm/conversation/conversation.hpp>
#include <ullm/core/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace ullm::detail {

class TurnHooks {
public:
    TurnHooks() = default;
    TurnHooks(const TurnHooks&) = delete;
    TurnHooks& operator=(const TurnHooks&) = delete;
    virtual ~TurnHooks() = default;

    /// How the owner's turns are answered and stored; read as each turn needs it.
    struct Shape {
        /// Each tool result is stored as a tool message of its own, in call order, instead of
        /// one tool message per round. Providers receive the same request either way.
        bool tool_message_per_call = false;
        /// Told to the model for a call of a tool the conversation does not have; empty for the
        /// registry's text, which names the tools that exist.
        std::string unknown_tool_text;
        /// Stored and returned for a final reply with neither text nor tool calls; empty keeps
        /// the reply as it came.
        std::string empty_reply_text;
    };
    [[nodiscard]] virtual const Shape& shape() const = 0;

    /// Appended (after a blank line) to the system prompt of each model round, after what
    /// `ConversationOptions::system_context` gave; empty for nothing. What it throws fails the
    /// turn.
    virtual std::string round_context() = 0;

    /// A turn that was cancelled or failed after it started keeps its user message and its
    /// finished rounds, every call answered, then the message this returns, if any (as
    /// `ConversationOptions::on_interrupted_turn`, which it replaces for the owner's
    /// conversation). What it throws drops the kept messages.
    virtual std::optional<Message> interrupted(const InterruptedTurn& turn) = 0;

    /// The stored form of a conversation snapshot: the snapshot with the owner's state beside
    /// it. The conversation takes it apart again with `restore` before writing it, so that
    /// nothing a load would refuse is stored.
    [[nodiscard]] virtual json stored_form(json snapshot) = 0;

    /// What `restore` found in a stored value.
    struct Restored {
        /// The conversation's snapshot, not yet checked: a part of the stored value, valid as
        /// long as that value is.
        const json* snapshot = nullptr;
        std::string snapshot_at;  ///< Its JSON pointer in the stored value, for errors.
        /// Applies the owner's state; called once the whole value passed every check.
        std::function<void()> apply;
    };
    /// Takes a stored value apart, checking the owner's part. Throws
    /// `InvalidConversationSnapshotError` with the JSON pointer of the fault; nothing is
    /// applied then.
    [[nodiscard]] virtual Restored restore(const json& stored) = 0;

    /// The stored session is gone (removed by someone else): the owner starts afresh, as the
    /// conversation does.
    virtual void session_gone() = 0;
};

/// Makes a conversation whose turns `hooks` shape (see `TurnHooks`); otherwise as
/// `Client::conversation`. The hooks are called on the turn's thread, without locks held.
struct HookedConversation {
    [[nodiscard]] static Conversation make(const Client& client, ConversationOptions options,
                                           std::shared_ptr<TurnHooks> hooks);
};

}  // namespace ullm::detail
