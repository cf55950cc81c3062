#pragma once

/// `generate_object`: structured output with tools. The model may call the caller's dialog
/// tools (and the built-ins, when on) and ends by calling `presentResult` with the object.

#include <ullm/client/client.hpp>
#include <ullm/core/message.hpp>
#include <ullm/core/usage.hpp>
#include <ullm/dialog/cell_space.hpp>
#include <ullm/dialog/dialog.hpp>
#include <ullm/dialog/dialog_tool.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ullm {

/// Settings of `generate_object`; written with designated initialisers.
struct GenerateObjectOptions {
    /// The object's JSON schema (required, except for `generate_object<T>`, where null means
    /// `json_schema_of<T>()`); `presentResult` takes it.
    json schema;
    /// As `DialogOptions::result_check`: a rule the schema cannot say; what it throws answers
    /// the `presentResult` call with an error, for the model to try again.
    std::function<void(const json& result)> result_check;
    std::string system;  ///< The system prompt.
    std::string model;   ///< As `Client::route` understands it; the client's default when empty.
    std::vector<DialogTool> tools;         ///< Tools the model may call before answering.
    bool builtin_tools = false;            ///< The six dialog built-ins (off unless asked for).
    std::vector<NamedCell> context_cells;  ///< Listed under `# Available Cells`.
    int max_tool_rounds = 5;               ///< Tool rounds, the `presentResult` round included.
    std::chrono::milliseconds tool_execution_timeout{30'000};
};

/// What `generate_object` produced.
struct GeneratedObject {
    json object;  ///< The arguments of the first `presentResult` call, valid against the schema.
    /// The input messages followed by the turn's messages (assistant tool calls, tool results,
    /// the `presentResult` call and its echo), replay state included: hand them to
    /// `Dialog::append` unchanged to go on from there.
    std::vector<Message> messages;
    Usage usage;          ///< Summed over the model requests.
    double cost_usd = 0;  ///< Spend of the model requests (0 without a price).
    /// Keeps the run cells `messages` and `object` mention (an `invoke`'s `@resultLocation`)
    /// while this object or a copy lives, so that they are still there when the messages go on
    /// in a `Dialog` (which keeps them from then on).
    CellHold cells;
};

/// Runs a model turn over `messages` (the last one a user message) that must end with a call
/// of `presentResult`: the first round asks for a tool call, the model may use `tools` first,
/// and the turn ends after the round that calls `presentResult` (the other calls of that round
/// still run). Arguments that break the schema are answered with the validation error, so the
/// model can try again within `max_tool_rounds`. Throws `MissingStructuredResultError` when the
/// model answers without calling it, `InvalidMessageError` for bad `messages`, `DialogError`
/// for a bad schema or tool, and the provider's `Error` when a request fails.
[[nodiscard]] GeneratedObject generate_object(const Client& client,
                                              std::shared_ptr<CellSpace> space,
                                              std::vector<Message> messages,
                                              GenerateObjectOptions options);

/// As above, with one user message.
[[nodiscard]] GeneratedObject generate_object(const Client& client,
                                              std::shared_ptr<CellSpace> space, std::string prompt,
                                              GenerateObjectOptions options);

/// What `generate_object<T>` produced: the `GeneratedObject`, and its object decoded.
template <class T>
struct GeneratedObjectOf : GeneratedObject {
    T value;
};

/// As `generate_object`, decoding the object into `T`: the schema is `json_schema_of<T>()`
/// unless `options.schema` is set, and a `presentResult` call whose arguments pass the schema
/// but do not decode is answered with the problem (as a `result_check` failure), so the model
/// can try again. Throws what `generate_object` throws.
template <StructuredObject T>
[[nodiscard]] GeneratedObjectOf<T> generate_object(const Client& client,
                                                   std::shared_ptr<CellSpace> space,
                                                   std::vector<Message> messages,
                                                   GenerateObjectOptions options) {
    if (options.schema.is_null()) options.schema = json_schema_of<T>();
    options.result_check = [check = std::move(options.result_check)](const json& result) {
        std::optional<T> decoded;
        detail::decode_object(result, decoded);
        if (check) check(result);
    };
    GeneratedObject generated =
        generate_object(client, std::move(space), std::move(messages), std::move(options));
    std::optional<T> decoded = decode_result<T>(generated.object);
    return GeneratedObjectOf<T>{std::move(generated), std::move(*decoded)};
}

/// As above, with one user message.
template <StructuredObject T>
[[nodiscard]] GeneratedObjectOf<T> generate_object(const Client& client,
                                                   std::shared_ptr<CellSpace> space,
                                                   std::string prompt,
                                                   GenerateObjectOptions options) {
    std::vector<Message> messages;
    messages.push_back(Message::user(std::move(prompt)));
    return generate_object<T>(client, std::move(space), std::move(messages), std::move(options));
}

}  // namespace ullm
