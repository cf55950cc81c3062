#pragma once

/// `DialogTool` and `DialogToolRegistry`: the tools a dialog offers a model — the caller's
/// handler and pattern tools, the six built-ins over the cell space, and `presentResult`.

#include <ullm/dialog/cell_space.hpp>
#include <ullm/tools/schema.hpp>
#include <ullm/tools/tool.hpp>
#include <ullm/tools/tool_registry.hpp>

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ullm {

/// One caller tool of a dialog. The kind decides what it may touch: a *handler* tool writes
/// caller state through the cells its handler is bound to; a *pattern* tool computes a result
/// from its inputs and cannot write caller state. A value type.
class DialogTool {
public:
    enum class Kind { handler, pattern };

    /// A handler tool called `name` running the handler held in `handler_cell`. The model's
    /// input arrives with `result` set to the link of a fresh result cell (unless the model sent
    /// its own `result`); what the handler writes there is the tool's result (`null` when it
    /// writes nothing); its return value is ignored. The description defaults to the handler's.
    [[nodiscard]] static DialogTool handler(std::string name, CellLink handler_cell,
                                            std::string description = {});

    /// A pattern tool called `name` running the pattern held in `pattern_cell` on the model's
    /// input with `prefilled` merged over it (pre-filled parameters win and are not advertised).
    [[nodiscard]] static DialogTool pattern(std::string name, CellLink pattern_cell,
                                            json prefilled = json::object(),
                                            std::string description = {});

    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] Kind kind() const noexcept { return kind_; }
    [[nodiscard]] const CellLink& cell() const noexcept { return cell_; }
    [[nodiscard]] const json& prefilled() const noexcept { return prefilled_; }
    [[nodiscard]] const std::string& description() const noexcept { return description_; }

private:
    DialogTool(std::string name, Kind kind, CellLink cell, json prefilled, std::string description)
        : name_(std::move(name)),
          kind_(kind),
          cell_(std::move(cell)),
          prefilled_(std::move(prefilled)),
          description_(std::move(description)) {}

    std::string name_;
    Kind kind_;
    CellLink cell_;
    json prefilled_;
    std::string description_;
};

/// The built-in tools in catalog order.
inline constexpr std::array<std::string_view, 6> dialog_builtin_tool_names = {
    "read", "invoke", "pin", "unpin", "updateArgument", "schema"};

/// The tool whose call carries a dialog's structured result.
inline constexpr std::string_view present_result_tool_name = "presentResult";

/// What the model is told when it calls a tool that is neither a built-in nor in the catalog.
inline constexpr std::string_view dialog_unknown_tool_text = "Tool has neither pattern nor handler";

/// How a dialog's catalog is built.
struct DialogCatalogOptions {
    /// Advertise (and dispatch) the six built-ins. Only exactly `false` turns them off.
    bool builtin_tools = true;
    /// The schema of the structured result; when set, `presentResult` is in the catalog
    /// whatever `builtin_tools` says.
    std::optional<json> result_schema;
};

/// What one dialog instance keeps between tool calls: its pins and the pattern instances
/// `invoke` started. Guarded by the instance; the registry mutates it only through a
/// `DialogCall` whose turn is still current.
struct DialogInstanceState {
    struct Pin {
        std::string name;
        CellLink link;
    };
    struct PatternInstance {
        CellLink pattern;   ///< The pattern cell.
        CellLink argument;  ///< Its own argument cell.
        CellLink result;    ///< Its own result cell (`@resultLocation`).
    };
    std::vector<Pin> pins;
    std::vector<PatternInstance> pattern_instances;
};

/// The instance a tool call runs for: its state, the lock guarding it, whether the turn that
/// made the call is still the instance's current turn, the call's `ToolContext` (whose stop
/// token and deadline a handler gets as its `HandlerContext`), and where the call keeps the
/// cells it made known to the model.
struct DialogCall {
    DialogInstanceState* state = nullptr;
    std::mutex* mutex = nullptr;
    std::function<bool()> current;  ///< False once the turn was cancelled or replaced.
    ToolContext* context = nullptr;
    /// When set, the call keeps here, before its run lets go of them, every cell its result
    /// mentions (an `invoke`'s `@resultLocation`, links inside a value shown) and the cells of
    /// the pattern instances it records. A dialog passes the running turn's hold and, once the
    /// turn is over, keeps what its transcript mentions. Without one, those cells are kept only
    /// as long as something else needs them (see `CellSpace`).
    CellHold* hold = nullptr;
};

/// The catalog of a dialog and the dispatch of its calls. Built once per dialog; const members
/// are thread-safe (instance state is guarded by the `DialogCall`'s mutex). Holds the cells of
/// its tools (so that they cannot be released while it lives).
class DialogToolRegistry {
public:
    /// Builds the catalog: the caller's tools in insertion order, then (unless
    /// `builtin_tools` is false) `read`, `invoke`, `pin`, `unpin`, `updateArgument`, `schema`,
    /// then `presentResult` when a result schema is set. Throws `DialogError`
    /// `reserved_tool_name` with the exact messages of the spec for `presentResult` (always)
    /// and for the six built-in names (while the built-ins are on), `ToolDefinitionError` for
    /// an invalid or duplicate name or schema, and `DialogError` `unknown_cell` when a tool's
    /// cell does not hold a handler or pattern of the right kind.
    DialogToolRegistry(std::shared_ptr<CellSpace> space, std::vector<DialogTool> tools,
                       DialogCatalogOptions options = {});

    /// The advertised tool names, in catalog order.
    [[nodiscard]] std::vector<std::string> names() const;

    /// The advertised tools as a provider sees them, in catalog order.
    [[nodiscard]] const std::vector<ToolDeclaration>& declarations() const noexcept {
        return declarations_;
    }

    /// The cell space the tools work over.
    [[nodiscard]] const std::shared_ptr<CellSpace>& space() const noexcept { return space_; }

    /// Whether the six built-ins are in the catalog.
    [[nodiscard]] bool builtins_enabled() const noexcept { return options_.builtin_tools; }

    /// The result schema, with local `$ref`s inlined, when one is set.
    [[nodiscard]] const std::optional<json>& result_schema() const noexcept {
        return result_schema_;
    }

    /// Runs the call `name(input)` for `call`'s instance and returns what the model is shown:
    /// the tool's result, or an error result with the dialog's exact message (`Tool has neither
    /// pattern nor handler` for a name outside the catalog). Never throws for bad input; only
    /// `bad_alloc` escapes. `presentResult` returns an echo; storing it is the dialog's job.
    [[nodiscard]] ToolOutcome run(std::string_view name, const json& input, DialogCall& call) const;

private:
    ToolOutcome run_caller_tool(const DialogTool& tool, json input, DialogCall& call) const;
    ToolOutcome run_builtin(std::string_view name, const json& input, DialogCall& call) const;

    std::shared_ptr<CellSpace> space_;
    std::vector<DialogTool> tools_;
    DialogCatalogOptions options_;
    std::optional<json> result_schema_;
    std::vector<ToolDeclaration> declarations_;
    CellHold cells_;
};

/// A JSON Schema describing `value`'s shape: types, object properties (all required) and the
/// item schema of the first array element. Thread-safe.
[[nodiscard]] json schema_of_value(const json& value);

}  // namespace ullm
