#pragma once

/// `dialog_tools`: ordinary ullm `Tool`s (a `define_tool`, the tools of an MCP server from
/// `mcp_tools`) as handler tools of a `Dialog`.

#include <ullm/dialog/cell_space.hpp>
#include <ullm/dialog/dialog_tool.hpp>
#include <ullm/tools/tool.hpp>

#include <vector>

namespace ullm {

/// Makes each tool a handler cell of `space` bound to no cell but its result cell, and returns
/// a `DialogTool::handler` of each, with the tool's name and description. The handler checks
/// the model's input against the tool's parameters (without the dialog's `result` member),
/// runs the tool with the call's stop token and deadline, and writes what it returns to the
/// result cell; what the tool throws is the call's error result. Throws `DialogError`
/// (`invalid_cell_schema`) for a tool whose parameters a cell cannot take, and what
/// `validate_tool` throws. The tools are kept (copies share their definitions). Thread-safe as
/// `CellSpace::add_handler`.
[[nodiscard]] std::vector<DialogTool> dialog_tools(const std::vector<Tool>& tools,
                                                   CellSpace& space);

}  // namespace ullm
