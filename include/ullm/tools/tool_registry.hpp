#pragma once

/// `ToolRegistry`: the validated set of tools a conversation may run, and `ToolOutcome`, the
/// result of running one.

#include <ullm/core/json.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/validator.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// What running a tool produced: the callback's result, or an error text for the model.
struct ToolOutcome {
    /// The callback's result; for an error, a string the model can act on.
    json result;
    /// Whether the call failed (unknown tool, invalid arguments, or the callback threw).
    bool is_error = false;
    /// Empty on success; otherwise `unknown_tool`, `invalid_tool_arguments`,
    /// `tool_execution_failed`, or the `code()` of a `ullm::Error` the callback threw.
    std::string error_code;
};

/// A set of validated tools with unique names, kept in insertion order. Owns copies of the
/// `Tool` handles (which share their definitions with the caller's copies) and each tool's
/// parameters compiled once (`CompiledSchema`), so that `run` compiles no pattern. Const members
/// (`find`, `tools`, `names`, `run`) may be called from many threads at once; `add` must not
/// run concurrently with anything else on the same registry.
class ToolRegistry {
public:
    /// An empty registry.
    ToolRegistry() = default;

    /// A registry of `tools`, validated as a whole (`validate_tools`): either every tool is
    /// accepted or `ToolDefinitionError` is thrown and nothing is constructed.
    explicit ToolRegistry(std::vector<Tool> tools);

    /// Validates `tool` and appends it; throws `ToolDefinitionError` (any code of
    /// `validate_tool`, or `duplicate_tool_name` when a tool with exactly that name exists)
    /// and leaves the registry unchanged. Not thread-safe.
    void add(Tool tool);

    /// The tool called exactly `name`, or null. Does not throw; thread-safe.
    [[nodiscard]] const Tool* find(std::string_view name) const noexcept;

    /// The tools in insertion order. Thread-safe.
    [[nodiscard]] const std::vector<Tool>& tools() const noexcept { return tools_; }

    /// The tool names in insertion order. Throws only `bad_alloc`; thread-safe.
    [[nodiscard]] std::vector<std::string> names() const;

    /// How many tools the registry holds.
    [[nodiscard]] std::size_t size() const noexcept { return tools_.size(); }

    /// Whether the registry holds no tool.
    [[nodiscard]] bool empty() const noexcept { return tools_.empty(); }

    /// Runs the tool called `name` on `arguments`: checks that the tool exists and that the
    /// arguments are an object, validates them against the tool's parameters when `mode` is
    /// strict, then calls the callback. Every failure, including any exception the callback
    /// throws, becomes an error outcome whose result is text the model can act on; only
    /// `bad_alloc` while building an outcome escapes. A `ToolResultError` becomes an error
    /// outcome with its message verbatim. Thread-safe and reentrant (a callback may
    /// run other tools of the same registry).
    [[nodiscard]] ToolOutcome run(std::string_view name, const json& arguments,
                                  ToolContext& context,
                                  ValidationMode mode = ValidationMode::strict) const;

private:
    std::vector<Tool> tools_;
    std::vector<CompiledSchema> parameters_;  // parallel to tools_
    std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace ullm
