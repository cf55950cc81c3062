#pragma once

/// Tools a model may call: `ToolContext`, `ToolDefinition`, `Tool`, `define_tool` (untyped and
/// typed) and the definition rules checked by `validate_tool` / `validate_tools`.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/tools/reflect.hpp>
#include <ullm/tools/validator.hpp>

#include <chrono>
#include <concepts>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace ullm {

/// What a running tool may know about the call it serves. The conversation layer fills it in
/// for each call; the callback owns it for the duration of the call and may read it from the
/// calling thread (the stop token itself may be signalled from any thread).
struct ToolContext {
    /// Signalled when the call should stop (timeout, cancelled turn); pass it on to blocking
    /// work.
    std::stop_token stop_token;
    /// When the call times out; `time_point::max()` means no deadline.
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    std::string session_id;    ///< The conversation's session id, when there is one.
    std::string tenant;        ///< The tenant the conversation runs for, when there is one.
    std::string model;         ///< The model that asked for the call.
    std::string provider;      ///< The provider that served that model.
    std::string tool_call_id;  ///< The provider's id of this tool call.
    std::string turn_tag;      ///< The caller's label of the turn (`SendOptions::turn_tag`).
    /// Set by the callback to end the turn after this round: the round's results are stored
    /// and no further model request is made; the turn's reply is the response that asked for
    /// the calls. For a tool whose call is the answer (a structured result, a hand-off).
    bool end_turn = false;

    /// Whether the call should stop: a stop was requested or the deadline has passed.
    /// Does not throw; thread-safe.
    [[nodiscard]] bool stop_requested() const noexcept {
        return stop_token.stop_requested() || std::chrono::steady_clock::now() >= deadline;
    }
};

/// The callback of a tool: receives the arguments (a JSON object) and the call's context and
/// returns the result shown to the model. Exceptions it throws become error results.
using ToolCallback = std::function<json(const json& arguments, ToolContext& context)>;

/// What a provider is told about a tool: its name, description and parameter schema. Used
/// on its own where tools are only advertised (a stateless request) and not run.
struct ToolDeclaration {
    std::string name;
    std::string description;
    json parameters = json::object();
    friend bool operator==(const ToolDeclaration&, const ToolDeclaration&) = default;
};

/// Everything that defines an untyped tool; written with designated initialisers.
struct ToolDefinition {
    /// The name the model calls the tool by; must match `[A-Za-z0-9_-]{1,64}`.
    std::string name;
    /// What the tool does, for the model; must not be empty or only whitespace.
    std::string description;
    /// The JSON Schema of the arguments (root `type: "object"`); see `ullm::schema`.
    json parameters;
    /// The callback; must be set.
    ToolCallback execute;
};

/// A tool with arguments decoded into `Args` (through nlohmann's `from_json`, e.g.
/// `NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE`) after validation; its callback may return any type
/// convertible to `json`.
template <class Args>
struct TypedToolDefinition {
    std::string name;         ///< As `ToolDefinition::name`.
    std::string description;  ///< As `ToolDefinition::description`.
    /// As `ToolDefinition::parameters`; should describe `Args`. Left null (unset), it is
    /// `json_schema_of<Args>()` when `Args` is `Reflectable` (e.g. described with
    /// `ULLM_REFLECT`).
    json parameters;
    /// The callback; receives the decoded arguments. Must be set.
    std::function<json(const Args& arguments, ToolContext& context)> execute;
};

/// A defined tool: a cheap, copyable handle to an immutable definition. Copies share the same
/// definition (identity is preserved: `a.same_as(b)`). Thread-safe: every member is const, and
/// `execute` may run concurrently if the callback allows it.
class Tool {
public:
    /// Wraps `definition` without validating it (see `validate_tool`). Throws only
    /// `bad_alloc`.
    explicit Tool(ToolDefinition definition)
        : definition_(std::make_shared<const ToolDefinition>(std::move(definition))) {}

    /// The name the model calls the tool by.
    [[nodiscard]] const std::string& name() const noexcept { return definition_->name; }
    /// The description shown to the model.
    [[nodiscard]] const std::string& description() const noexcept {
        return definition_->description;
    }
    /// The JSON Schema of the arguments.
    [[nodiscard]] const json& parameters() const noexcept { return definition_->parameters; }
    /// The whole definition.
    [[nodiscard]] const ToolDefinition& definition() const noexcept { return *definition_; }
    /// The name, description and parameters, as a provider advertises them.
    [[nodiscard]] ToolDeclaration declaration() const {
        return {definition_->name, definition_->description, definition_->parameters};
    }
    /// Whether `other` is a copy of this tool (the same `define_tool` call).
    [[nodiscard]] bool same_as(const Tool& other) const noexcept {
        return definition_ == other.definition_;
    }

    /// Runs the callback on `arguments` without validating them (`ToolRegistry::run` does
    /// that); throws whatever the callback throws (a typed tool throws `ToolArgumentError`
    /// when the arguments do not decode), or `ToolDefinitionError` (`missing_tool_execute`)
    /// when there is no callback. Thread-safe if the callback is.
    json execute(const json& arguments, ToolContext& context) const;

private:
    std::shared_ptr<const ToolDefinition> definition_;
};

/// Defines an untyped tool; cheap and not validated here: the definition is checked when it
/// reaches a registry or a provider (`validate_tool`). Throws only `bad_alloc`.
[[nodiscard]] inline Tool define_tool(ToolDefinition definition) {
    return Tool(std::move(definition));
}

namespace detail {

/// Turns an exception thrown while decoding tool arguments into a `ToolArgumentError`.
[[noreturn]] void throw_argument_decode_error(const std::exception_ptr& error);

}  // namespace detail

/// Types the typed `define_tool` can decode arguments into.
template <class Args>
concept ToolArguments = std::move_constructible<Args> && requires(const json& value) {
    { value.template get<Args>() } -> std::convertible_to<Args>;
};

/// Defines a typed tool: after validation the arguments are decoded with
/// `arguments.get<Args>()`; a decode failure is a `ToolArgumentError` with a model-readable
/// reason (and an error result when run through a registry). Unset parameters are derived from
/// `Args` (see `TypedToolDefinition::parameters`). Not validated here (see `validate_tool`).
/// Throws only `bad_alloc`, or what `json_schema_of<Args>` throws.
template <ToolArguments Args>
[[nodiscard]] Tool define_tool(TypedToolDefinition<Args> definition) {
    ToolCallback callback;
    if (definition.execute) {
        callback = [typed = std::move(definition.execute)](const json& arguments,
                                                           ToolContext& context) -> json {
            std::optional<Args> decoded;
            try {
                decoded.emplace(arguments.template get<Args>());
            } catch (...) {
                detail::throw_argument_decode_error(std::current_exception());
            }
            return typed(*decoded, context);
        };
    }
    if constexpr (Reflectable<Args>) {
        if (definition.parameters.is_null()) definition.parameters = json_schema_of<Args>();
    }
    return Tool(ToolDefinition{.name = std::move(definition.name),
                               .description = std::move(definition.description),
                               .parameters = std::move(definition.parameters),
                               .execute = std::move(callback)});
}

/// Checks a declaration against the definition rules: name matches `[A-Za-z0-9_-]{1,64}`
/// (`invalid_tool_name`), description is valid UTF-8 and not empty or only whitespace
/// (`invalid_tool_description`), parameters pass `validate_schema` (`invalid_tool_schema`,
/// `unsupported_schema_keyword`). Throws `ToolDefinitionError`. Thread-safe.
void validate_declaration(const ToolDeclaration& declaration);

/// Checks every declaration with `validate_declaration`, then that no two share a name
/// (compared exactly and case-sensitively; `duplicate_tool_name`). Thread-safe.
void validate_declarations(const std::vector<ToolDeclaration>& declarations);

/// Checks one tool against the definition rules: name matches `[A-Za-z0-9_-]{1,64}`
/// (`invalid_tool_name`), description is valid UTF-8 and not empty or only whitespace
/// (`invalid_tool_description`), parameters pass `validate_schema` (`invalid_tool_schema`,
/// `unsupported_schema_keyword`) and the callback is set (`missing_tool_execute`). Throws
/// `ToolDefinitionError`. Thread-safe.
void validate_tool(const Tool& tool);

/// Checks every tool with `validate_tool`, then that no two share a name (compared exactly
/// and case-sensitively; `duplicate_tool_name`). Throws `ToolDefinitionError`. Thread-safe.
void validate_tools(const std::vector<Tool>& tools);

namespace detail {

/// `validate_tool(tool)`, returning the tool's parameters compiled (what `ToolRegistry` keeps
/// to validate arguments). Throws like `validate_tool`; thread-safe.
[[nodiscard]] CompiledSchema validate_tool_compiled(const Tool& tool);

/// `validate_tools(tools)`, returning each tool's parameters compiled, in order. Throws like
/// `validate_tools`; thread-safe.
[[nodiscard]] std::vector<CompiledSchema> validate_tools_compiled(const std::vector<Tool>& tools);

}  // namespace detail

}  // namespace ullm
