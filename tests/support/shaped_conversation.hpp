#pragma once

/// A conversation with a turn shape of its own (how dialogs store tool results, answer an
/// unknown tool or an empty reply), made through the library's internal `TurnHooks` seam, so
/// that the conversation layer's part of that shape is tested without a dialog.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>

#include <memory>
#include <optional>
#include <utility>

#include "../../src/conversation/turn_hooks.hpp"

namespace ullm::test {

/// Hooks that set the shape and add nothing else: no round context, the snapshot stored as it
/// is. An interrupted turn keeps its transcript, with no closing message.
class ShapeHooks final : public detail::TurnHooks {
public:
    explicit ShapeHooks(Shape shape) : shape_(std::move(shape)) {}
    [[nodiscard]] const Shape& shape() const override { return shape_; }
    std::string round_context() override { return {}; }
    std::optional<Message> interrupted(const InterruptedTurn&) override { return std::nullopt; }
    json stored_form(json snapshot) override { return snapshot; }
    Restored restore(const json& stored) override { return {&stored, "", nullptr}; }
    void session_gone() override {}

private:
    Shape shape_;
};

[[nodiscard]] inline Conversation shaped_conversation(const Client& client,
                                                      ConversationOptions options,
                                                      detail::TurnHooks::Shape shape) {
    return detail::HookedConversation::make(client, std::move(options),
                                            std::make_shared<ShapeHooks>(std::move(shape)));
}

}  // namespace ullm::test
