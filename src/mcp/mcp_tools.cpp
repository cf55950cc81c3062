#include <ullm/mcp/mcp_tools.hpp>

#include <ullm/tools/validator.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

namespace ullm {

namespace {

constexpr std::size_t max_tool_name = 64;
constexpr std::size_t kept_before_hash = 55;

bool name_character(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

bool valid_tool_name(const std::string& name) {
    return !name.empty() && name.size() <= max_tool_name &&
           std::all_of(name.begin(), name.end(), name_character);
}

// `<alias>__<name>` by the rule documented on `mcp_tools`.
std::string prefixed_name(const std::string& alias, const std::string& name) {
    std::string out = alias + "__" + name;
    for (char& c : out) {
        if (!name_character(c)) c = '_';
    }
    if (out.size() <= max_tool_name) return out;
    std::uint32_t hash = 2166136261U;  // FNV-1a of the whole name
    for (const char c : alias + "__" + name) {
        hash ^= static_cast<unsigned char>(c);
        hash *= 16777619U;
    }
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", hash);
    return out.substr(0, kept_before_hash) + "_" + hex;
}

// The tool result shown to the model (see `mcp_tools`).
json result_for_model(const McpToolResult& result) {
    if (!result.structured_content.is_null()) return result.structured_content;
    bool all_text = true;
    for (const auto& block : result.content) {
        if (!block.is_object() || block.value("type", json()) != "text") all_text = false;
    }
    if (all_text) return result.text();
    json blocks = json::array();
    for (const auto& block : result.content) {
        json shown = block;
        if (shown.is_object()) shown.erase("_meta");
        blocks.push_back(std::move(shown));
    }
    return blocks;
}

Tool make_tool(McpClient client, const McpToolInfo& info, std::string exposed_name,
               CompiledSchema parameters) {
    std::string description = info.description;
    if (description.find_first_not_of(" \t\r\n") == std::string::npos) description = info.title;
    if (description.find_first_not_of(" \t\r\n") == std::string::npos) {
        description = "Tool " + info.name + " of the MCP server " + client.alias();
    }
    json schema = parameters.schema();
    return define_tool(
        {.name = std::move(exposed_name),
         .description = std::move(description),
         .parameters = std::move(schema),
         .execute = [client, server_name = info.name, parameters = std::move(parameters)](
                        const json& arguments, ToolContext& context) mutable -> json {
             parameters.validate_arguments(arguments);  // before the server sees anything
             McpCallOptions call;
             call.stop_token = context.stop_token;
             call.deadline = context.deadline;
             const McpToolResult result = client.call_tool(server_name, arguments, call);
             if (result.is_error) {
                 std::string text = result.text();
                 if (text.empty()) text = "the tool failed";
                 throw ToolResultError(text);
             }
             return result_for_model(result);
         }});
}

}  // namespace

McpToolSet mcp_tools(const std::vector<McpClient>& clients, const McpToolsOptions& options) {
    struct Listed {
        const McpClient* client;
        McpToolInfo info;
    };
    std::vector<Listed> listed;
    McpToolSet out;
    std::map<std::string, int> counts;  // how many listed tools want each bare name
    for (const auto& client : clients) {
        McpClient handle = client;
        for (auto& info : handle.list_tools()) {
            const json execution = info.raw.value("execution", json());
            if (execution.is_object() && execution.value("taskSupport", json()) == "required") {
                out.rejected.push_back({client.alias(), info.name, ErrorCode::unsupported_option,
                                        "tool " + info.name +
                                            " requires task augmentation, which ullm does not "
                                            "support"});
                continue;
            }
            ++counts[info.name];
            listed.push_back({&client, std::move(info)});
        }
    }
    std::set<std::string> taken(options.taken_names.begin(), options.taken_names.end());
    std::set<std::string> used;
    for (auto& [client, info] : listed) {
        std::string name = info.name;
        if (!valid_tool_name(name) || counts[name] > 1 || taken.count(name) != 0) {
            name = prefixed_name(client->alias(), info.name);
        }
        try {
            if (taken.count(name) != 0 || used.count(name) != 0) {
                throw ToolDefinitionError(ErrorCode::duplicate_tool_name,
                                          "tool " + info.name + " of the MCP server " +
                                              client->alias() + " would be called " + name +
                                              ", which another tool already is");
            }
            if (!info.input_schema.is_object()) {
                throw ToolDefinitionError(ErrorCode::invalid_tool_schema,
                                          "tool " + info.name + " has no inputSchema object");
            }
            Tool tool =
                make_tool(*client, info, name, CompiledSchema::parameters(info.input_schema));
            validate_tool(tool);
            used.insert(name);
            out.tools.push_back(std::move(tool));
        } catch (const ToolDefinitionError& error) {
            out.rejected.push_back({client->alias(), info.name, error.error_code(), error.what()});
        }
    }
    return out;
}

McpToolSet mcp_tools(const McpClient& client, const McpToolsOptions& options) {
    return mcp_tools(std::vector<McpClient>{client}, options);
}

}  // namespace ullm
