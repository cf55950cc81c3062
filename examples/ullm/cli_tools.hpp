#pragma once

// The tools `ullm chat` offers the model: the current time, a calculator, and (with
// --allow-dir) reading text files under one directory.

#include <ullm/tools/tool.hpp>

#include <optional>
#include <string>
#include <vector>

namespace ullm_cli {

// Evaluates an arithmetic expression: numbers, + - * / % ^, parentheses, unary minus, the
// constants pi and e, and sqrt abs floor ceil round exp ln log10 sin cos tan. Throws
// `ullm::ToolResultError` naming the position of the first problem.
double calculate(const std::string& expression);

// `current_time` and `calculate`, plus `read_file` when `allow_dir` is set. Throws
// `std::runtime_error` when `allow_dir` is not a readable directory.
std::vector<ullm::Tool> builtin_tools(const std::optional<std::string>& allow_dir);

}  // namespace ullm_cli
