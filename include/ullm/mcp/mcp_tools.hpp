#pragma once

/// `mcp_tools`: the tools of MCP servers as ullm `Tool`s, for conversations.

#include <ullm/core/error_code.hpp>
#include <ullm/mcp/mcp_client.hpp>
#include <ullm/tools/tool.hpp>

#include <string>
#include <vector>

namespace ullm {

/// A tool of an MCP server that `mcp_tools` refused, and why.
struct McpRejectedTool {
    std::string server;   ///< The client's `alias()`.
    std::string name;     ///< The server's name of the tool.
    ErrorCode code;       ///< e.g. `unsupported_schema_keyword`, `invalid_tool_schema`.
    std::string message;  ///< The rule it broke, as `ToolDefinitionError::what()` says it.
};

/// What `mcp_tools` made: the tools, and the server tools it refused. Converts to the
/// `std::vector<Tool>` that `ConversationOptions::tools` takes.
struct McpToolSet {
    std::vector<Tool> tools;
    std::vector<McpRejectedTool> rejected;
    // NOLINTNEXTLINE(google-explicit-constructor): so that `.tools = mcp_tools(client)` reads.
    operator std::vector<Tool>() const { return tools; }
};

/// Options of `mcp_tools`.
struct McpToolsOptions {
    /// The names already taken (the conversation's own tools): an MCP tool never takes one.
    std::vector<std::string> taken_names;
};

/// The tools of `clients` (each `list_tools`) as ullm tools. Naming rule: a tool keeps its
/// server's name when that name is a valid ullm name (`[A-Za-z0-9_-]{1,64}`) that no other
/// tool of `clients` and no `taken_names` entry has; otherwise it is called `<alias>__<name>`,
/// where `alias` is the client's alias (`McpStdioOptions::alias`, else `serverInfo.name`) and
/// every character outside `[A-Za-z0-9_-]` becomes `_`, and a name over 64 characters keeps its
/// first 55 and adds `_` and 8 hex digits of a hash of the whole. The server is always called
/// by its own name. A tool's description is its own, else its title, else "Tool <name> of the
/// MCP server <alias>".
///
/// Each tool is checked by the rules of `define_tool` (`validate_tool`); one that breaks them
/// (its schema uses a keyword the strict validator cannot check, has an untyped `{}`, a name
/// still clashing) is left out and listed in `rejected` with its code, and so is a tool that
/// requires task augmentation (`execution.taskSupport: "required"`, code `unsupported_option`).
///
/// A tool's callback validates its arguments strictly against the schema before the server
/// sees them (`ToolArgumentError`), then calls the tool with the tool loop's deadline and
/// stop token: a timeout or a stop sends `notifications/cancelled` and fails the call
/// (`mcp_timeout`, `cancelled`). Its result is `structuredContent` when the server sent it,
/// else the text when every block is text, else the content blocks as the server sent them;
/// an `isError` result throws `ToolResultError` with the text, which the model sees.
/// Throws what `McpClient::list_tools` throws. Thread-safe.
[[nodiscard]] McpToolSet mcp_tools(const std::vector<McpClient>& clients,
                                   const McpToolsOptions& options = {});

/// `mcp_tools({client}, options)`.
[[nodiscard]] McpToolSet mcp_tools(const McpClient& client, const McpToolsOptions& options = {});

}  // namespace ullm
