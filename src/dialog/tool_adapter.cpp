#include <ullm/dialog/tool_adapter.hpp>

#include <utility>

namespace ullm {

std::vector<DialogTool> dialog_tools(const std::vector<Tool>& tools, CellSpace& space) {
    std::vector<DialogTool> out;
    out.reserve(tools.size());
    for (const auto& tool : tools) {
        validate_tool(tool);
        const CellLink handler = space.add_handler(
            {.description = tool.description(),
             .input_schema = tool.parameters(),
             .writes = {},
             .run = [tool](const json& input, CellWriter& cells, const HandlerContext& call) {
                 json arguments = input;
                 const CellLink result = parse_link(arguments.at("result"));
                 arguments.erase("result");
                 ToolContext context;
                 context.stop_token = call.stop_token;
                 context.deadline = call.deadline;
                 cells.set(result, tool.execute(arguments, context));
             }});
        out.push_back(DialogTool::handler(tool.name(), handler, tool.description()));
    }
    return out;
}

}  // namespace ullm
