#include <ullm/dialog/generate_object.hpp>

#include <ullm/core/error.hpp>

#include <string_view>
#include <utility>

#include "mentions.hpp"

namespace ullm {

GeneratedObject generate_object(const Client& client, std::shared_ptr<CellSpace> space,
                                std::vector<Message> messages, GenerateObjectOptions options) {
    if (messages.empty() || messages.back().role != Role::user) {
        throw InvalidMessageError("/" + std::to_string(messages.empty() ? 0 : messages.size() - 1),
                                  "generate_object needs messages that end with a user message");
    }
    if (!options.schema.is_object()) {
        throw DialogError(ErrorCode::invalid_cell_schema,
                          "generate_object needs a schema (a JSON object)");
    }
    Message prompt = std::move(messages.back());
    messages.pop_back();
    // Only `presentResult` may be called: the model is made to call it, not just any tool.
    const bool only_result = options.tools.empty() && !options.builtin_tools;
    // One instance of a dialog that lives as long as this call.
    Dialog dialog(
        client, std::move(space),
        DialogOptions{.system = std::move(options.system),
                      .model = std::move(options.model),
                      .tools = std::move(options.tools),
                      .builtin_tools = options.builtin_tools,
                      .result_schema = std::move(options.schema),
                      .result_check = std::move(options.result_check),
                      .context_cells = std::move(options.context_cells),
                      .max_tool_rounds = options.max_tool_rounds,
                      .tool_execution_timeout = options.tool_execution_timeout,
                      .tool_choice = only_result
                                         ? ToolChoice::tool(std::string(present_result_tool_name))
                                         : ToolChoice::required(),
                      .end_turn_at_result = true});
    const std::string instance = "generate_object";
    if (!messages.empty()) (void)dialog.append(instance, std::move(messages));
    DialogTurn turn = dialog.send(instance, std::move(prompt));
    if (turn.status != DialogTurnStatus::completed && turn.error) {
        std::rethrow_exception(turn.error);
    }
    if (!turn.result) {
        throw MissingStructuredResultError(
            "the model answered without calling " + std::string(present_result_tool_name) +
            (turn.text.empty() ? std::string() : ": \"" + turn.text.substr(0, 200) + "\""));
    }
    GeneratedObject generated{std::move(*turn.result), dialog.transcript(instance, true),
                              turn.usage};
    // Taken while the dialog, which keeps these cells until it is destroyed, still lives.
    std::vector<CellLink> mentioned;
    const auto add = [&](std::string_view id) { mentioned.push_back({std::string(id), {}}); };
    detail::for_each_mention(generated.object, add);
    detail::for_each_mention(generated.messages, add);
    generated.cells = dialog.registry().space()->hold(mentioned);
    return generated;
}

GeneratedObject generate_object(const Client& client, std::shared_ptr<CellSpace> space,
                                std::string prompt, GenerateObjectOptions options) {
    std::vector<Message> messages;
    messages.push_back(Message::user(std::move(prompt)));
    return generate_object(client, std::move(space), std::move(messages), std::move(options));
}

}  // namespace ullm
