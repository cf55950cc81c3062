#include <ullm/dialog/dialog_tool.hpp>

#include <ullm/core/error.hpp>

#include <algorithm>
#include <set>

namespace ullm {

namespace {

constexpr const char* cancelled_text =
    "The turn that made this call was cancelled or replaced; nothing was changed.";

bool is_builtin(std::string_view name) {
    return std::find(dialog_builtin_tool_names.begin(), dialog_builtin_tool_names.end(), name) !=
           dialog_builtin_tool_names.end();
}

ToolOutcome ok(json result) {
    return {std::move(result), false, {}};
}

ToolOutcome error(ErrorCode code, std::string text) {
    return {std::move(text), true, detail::report(code)};
}

// The parameter schema of a path-taking built-in. A link may arrive as a string or as
// {"@link": …}; a malformed one gets the dialog's own message.
json path_parameters(json extra_properties = json::object(),
                     const std::vector<std::string>& extra_required = {}) {
    json properties = {
        {"path",
         {{"type", {"string", "object"}},
          {"description",
           "A link to a cell or a value inside it, e.g. \"/of:<id>/items/0\" or "
           "{\"@link\": \"/of:<id>/items/0\"}, as listed under # Available Cells."}}}};
    for (auto& [key, value] : extra_properties.items()) properties[key] = value;
    json required = json::array({"path"});
    for (auto& key : extra_required) required.push_back(key);
    return {{"type", "object"}, {"properties", std::move(properties)}, {"required", required}};
}

std::vector<ToolDeclaration> builtin_declarations() {
    return {
        {"read", "Read the current value of a cell (or a value inside it) and its schema.",
         path_parameters()},
        {"invoke",
         "Run the handler or pattern a link points to. Pass its input as `args` (an object) or "
         "as the other fields of this call.",
         path_parameters(
             {{"args",
               {{"type", "object"}, {"description", "The input of the handler or pattern."}}}})},
        {"pin",
         "Pin a cell so that it is listed, with its current value, under # Available Cells from "
         "the next step on.",
         path_parameters({{"name", {{"type", "string"}, {"description", "A short label."}}}},
                         {"name"})},
        {"unpin", "Remove a pin made with pin().", path_parameters()},
        {"updateArgument",
         "Change fields of the argument of a pattern started with invoke(); it runs again with "
         "the merged argument.",
         path_parameters({{"updates",
                           {{"type", "object"},
                            {"description",
                             "The fields to set, as an object of field names and "
                             "values."}}}},
                         {"updates"})},
        {"schema", "Show the JSON schema of a cell (derived from its value when it has none).",
         path_parameters()},
    };
}

// `schema` without the named properties (pre-filled or injected ones).
json without_properties(json schema, const std::vector<std::string>& names) {
    if (!schema.is_object()) return schema;
    for (const auto& name : names) {
        if (auto properties = schema.find("properties");
            properties != schema.end() && properties->is_object()) {
            properties->erase(name);
        }
        if (auto required = schema.find("required");
            required != schema.end() && required->is_array()) {
            required->erase(std::remove(required->begin(), required->end(), json(name)),
                            required->end());
        }
    }
    return schema;
}

std::string failure_text(const std::string& tool, const std::exception& failure) {
    if (const auto* ours = dynamic_cast<const Error*>(&failure)) {
        return "Tool \"" + tool + "\" failed: " + ours->message();
    }
    return "Tool \"" + tool + "\" failed: " + failure.what();
}

}  // namespace

DialogTool DialogTool::handler(std::string name, CellLink handler_cell, std::string description) {
    return DialogTool(std::move(name), Kind::handler, std::move(handler_cell), json::object(),
                      std::move(description));
}

DialogTool DialogTool::pattern(std::string name, CellLink pattern_cell, json prefilled,
                               std::string description) {
    if (!prefilled.is_object()) {
        throw ToolDefinitionError(
            ErrorCode::invalid_tool_schema,
            "the pre-filled parameters of \"" + name + "\" must be a JSON object");
    }
    return DialogTool(std::move(name), Kind::pattern, std::move(pattern_cell), std::move(prefilled),
                      std::move(description));
}

json schema_of_value(const json& value) {
    switch (value.type()) {
        case json::value_t::object: {
            json properties = json::object();
            json required = json::array();
            for (const auto& [key, item] : value.items()) {
                properties[key] = schema_of_value(item);
                required.push_back(key);
            }
            return {{"type", "object"}, {"properties", properties}, {"required", required}};
        }
        case json::value_t::array:
            return value.empty() ? json{{"type", "array"}}
                                 : json{{"type", "array"}, {"items", schema_of_value(value[0])}};
        case json::value_t::string:
            return {{"type", "string"}};
        case json::value_t::boolean:
            return {{"type", "boolean"}};
        case json::value_t::number_integer:
        case json::value_t::number_unsigned:
            return {{"type", "integer"}};
        case json::value_t::number_float:
            return {{"type", "number"}};
        default:
            return {{"type", "null"}};
    }
}

DialogToolRegistry::DialogToolRegistry(std::shared_ptr<CellSpace> space,
                                       std::vector<DialogTool> tools, DialogCatalogOptions options)
    : space_(std::move(space)), tools_(std::move(tools)), options_(std::move(options)) {
    for (const auto& tool : tools_) {
        if (tool.name() == present_result_tool_name) {
            throw DialogError(ErrorCode::reserved_tool_name,
                              "A tool may not be named \"presentResult\": the dialog stores the "
                              "call carrying that name as its structured result.");
        }
        if (options_.builtin_tools && is_builtin(tool.name())) {
            throw DialogError(ErrorCode::reserved_tool_name,
                              "A tool may not be named \"" + tool.name() +
                                  "\": it is a built-in tool of the dialog. Rename it, or pass "
                                  "builtinTools: false to run without the built-ins.");
        }
    }
    for (const auto& tool : tools_) {
        ToolDeclaration declaration{tool.name(), tool.description(), json::object()};
        if (tool.kind() == DialogTool::Kind::handler) {
            const auto handler = space_->handler(tool.cell());
            if (!handler) {
                throw DialogError(ErrorCode::unknown_cell, "the cell of tool \"" + tool.name() +
                                                               "\" does not hold a handler");
            }
            if (declaration.description.empty()) declaration.description = handler->description;
            declaration.parameters = without_properties(handler->input_schema, {"result"});
        } else {
            const auto pattern = space_->pattern(tool.cell());
            if (!pattern) {
                throw DialogError(ErrorCode::unknown_cell, "the cell of tool \"" + tool.name() +
                                                               "\" does not hold a pattern");
            }
            if (declaration.description.empty()) declaration.description = pattern->description;
            std::vector<std::string> prefilled;
            for (const auto& [key, value] : tool.prefilled().items()) prefilled.push_back(key);
            declaration.parameters = without_properties(pattern->argument_schema, prefilled);
        }
        declarations_.push_back(std::move(declaration));
    }
    if (options_.builtin_tools) {
        for (auto& declaration : builtin_declarations()) {
            declarations_.push_back(std::move(declaration));
        }
    }
    if (options_.result_schema) {
        result_schema_ = inline_schema_refs(*options_.result_schema);
        declarations_.push_back({std::string(present_result_tool_name),
                                 "Present the final structured result of this conversation. Call "
                                 "it once the result is complete.",
                                 *result_schema_});
    }
    validate_declarations(declarations_);
    std::vector<CellLink> cells;
    for (const auto& tool : tools_) cells.push_back(tool.cell());
    cells_ = space_->hold(cells);
}

std::vector<std::string> DialogToolRegistry::names() const {
    std::vector<std::string> out;
    out.reserve(declarations_.size());
    for (const auto& declaration : declarations_) out.push_back(declaration.name);
    return out;
}

ToolOutcome DialogToolRegistry::run(std::string_view name, const json& input,
                                    DialogCall& call) const {
    try {
        for (const auto& tool : tools_) {
            if (tool.name() == name) return run_caller_tool(tool, input, call);
        }
        if (options_.builtin_tools && is_builtin(name)) return run_builtin(name, input, call);
        if (result_schema_ && name == present_result_tool_name) return ok(input);
        return error(ErrorCode::unknown_tool, std::string(dialog_unknown_tool_text));
    } catch (const DialogError& failure) {
        return error(failure.error_code(), failure.message());
    } catch (const Error& failure) {
        return error(failure.error_code(), failure_text(std::string(name), failure));
    } catch (const std::bad_alloc&) {
        throw;
    } catch (const std::exception& failure) {
        return error(ErrorCode::tool_execution_failed, failure_text(std::string(name), failure));
    } catch (...) {
        return error(ErrorCode::tool_execution_failed,
                     "Tool \"" + std::string(name) + "\" failed with an unknown error.");
    }
}

namespace {

json with_prefilled(json argument, const json& prefilled) {
    for (const auto& [key, value] : prefilled.items()) argument[key] = value;
    return argument;
}

// What the model is shown, with every cell it mentions kept in the call's hold first: the
// model now knows those links (called while the run that made them still holds them).
ToolOutcome shown(json result, const DialogCall& call) {
    if (call.hold != nullptr) call.hold->keep_mentioned(result);
    return ok(std::move(result));
}

// What a handler is told of its call: the stop token and deadline of the tool call.
HandlerContext handler_context(const DialogCall& call) {
    if (call.context == nullptr) return {};
    return {call.context->stop_token, call.context->deadline};
}

// Refuses a handler's writes once its turn was cancelled or replaced; the check and the write
// happen under the instance's lock, so a cancel cannot fall between them.
CellWriteGuard turn_guard(const DialogCall& call) {
    if (!call.current || call.mutex == nullptr) return {};
    return [&call](const std::function<void()>& write) {
        std::lock_guard lock(*call.mutex);
        if (!call.current()) throw DialogError(ErrorCode::cancelled, cancelled_text);
        write();
    };
}

}  // namespace

ToolOutcome DialogToolRegistry::run_caller_tool(const DialogTool& tool, json input,
                                                DialogCall& call) const {
    if (!input.is_object()) {
        return error(ErrorCode::invalid_tool_arguments,
                     "The input of \"" + tool.name() + "\" must be a JSON object.");
    }
    if (call.current && !call.current()) return error(ErrorCode::cancelled, cancelled_text);
    // The run's own cells are not shown (only their value), so they go once the call is over.
    if (tool.kind() == DialogTool::Kind::handler) {
        const HandlerRun run =
            space_->run_handler(tool.cell(), input, turn_guard(call), handler_context(call));
        return shown(CellSpace::render_for_model(run.value), call);
    }
    const std::stop_token stop =
        call.context != nullptr ? call.context->stop_token : std::stop_token();
    const PatternRun run =
        space_->run_pattern(tool.cell(), with_prefilled(std::move(input), tool.prefilled()), stop);
    return shown(CellSpace::render_for_model(run.value), call);
}

ToolOutcome DialogToolRegistry::run_builtin(std::string_view name, const json& input,
                                            DialogCall& call) const {
    if (!input.is_object() || !input.contains("path")) {
        return error(ErrorCode::invalid_tool_arguments,
                     "The input needs a \"path\": a link to a cell.");
    }
    const CellLink link = parse_link(input["path"]);
    const std::stop_token stop =
        call.context != nullptr ? call.context->stop_token : std::stop_token();
    const auto guarded = [&](const auto& change) -> ToolOutcome {
        std::unique_lock<std::mutex> lock;
        if (call.mutex != nullptr) lock = std::unique_lock(*call.mutex);
        if (call.current && !call.current()) return error(ErrorCode::cancelled, cancelled_text);
        return change();
    };

    if (name == "read") {
        if (space_->kind(link) != CellKind::data) {
            return error(ErrorCode::not_a_data_cell,
                         "Path resolves to a handler; use invoke() instead.");
        }
        json out = {{"type", "json"}, {"value", CellSpace::render_for_model(space_->get(link))}};
        if (auto schema = space_->schema(link)) out["schema"] = std::move(*schema);
        return shown(std::move(out), call);
    }
    if (name == "schema") {
        switch (space_->kind(link)) {
            case CellKind::handler:
                return ok(space_->handler(link)->input_schema);
            case CellKind::pattern:
                return ok(space_->pattern(link)->argument_schema);
            case CellKind::data:
                break;
        }
        if (auto schema = space_->schema(link)) return ok(std::move(*schema));
        return ok(schema_of_value(space_->get(link)));
    }
    if (name == "invoke") {
        json args = json::object();
        if (const auto given = input.find("args"); given != input.end() && given->is_object()) {
            args = *given;
        } else {
            args = input;
            args.erase("path");
        }
        const CellKind kind = space_->kind(link);
        if (kind == CellKind::handler) {
            if (call.current && !call.current()) return error(ErrorCode::cancelled, cancelled_text);
            const HandlerRun run =
                space_->run_handler(link, args, turn_guard(call), handler_context(call));
            if (run.value.is_null()) return ok(nullptr);
            return shown({{"@resultLocation", run.result.to_string()},
                          {"result", CellSpace::render_for_model(run.value)},
                          {"schema", schema_of_value(run.value)}},
                         call);
        }
        if (kind == CellKind::pattern) {
            const auto pattern = space_->pattern(link);
            const PatternRun run = space_->run_pattern(link, args, stop);
            return guarded([&] {
                call.state->pattern_instances.push_back({link, run.argument, run.result});
                if (call.hold != nullptr) (void)call.hold->keep(run.argument);
                return shown({{"@resultLocation", run.result.to_string()},
                              {"result", CellSpace::render_for_model(run.value)},
                              {"schema", pattern->result_schema}},
                             call);
            });
        }
        return error(ErrorCode::invalid_link,
                     "target does not resolve to a handler stream or pattern.");
    }
    if (name == "pin") {
        const auto label = input.find("name");
        if (label == input.end() || !label->is_string() || label->get<std::string>().empty()) {
            return error(ErrorCode::invalid_tool_arguments, "pin needs a \"name\": a short label.");
        }
        return guarded([&] {
            auto& pins = call.state->pins;
            if (std::any_of(pins.begin(), pins.end(),
                            [&](const auto& pin) { return pin.link == link; })) {
                return ok({{"success", false}, {"message", "Already pinned"}});
            }
            (void)space_->kind(link);  // Only existing cells can be pinned.
            pins.push_back({label->get<std::string>(), link});
            return ok({{"success", true}});
        });
    }
    if (name == "unpin") {
        return guarded([&] {
            auto& pins = call.state->pins;
            const auto found = std::find_if(pins.begin(), pins.end(),
                                            [&](const auto& pin) { return pin.link == link; });
            if (found == pins.end()) return ok({{"success", false}, {"message", "Not found"}});
            pins.erase(found);
            return ok({{"success", true}});
        });
    }
    // updateArgument
    const auto updates = input.find("updates");
    if (updates == input.end() || !updates->is_object()) {
        return error(ErrorCode::invalid_tool_arguments,
                     "updates must be an object with field names and values");
    }
    std::optional<DialogInstanceState::PatternInstance> instance;
    {
        std::unique_lock<std::mutex> lock;
        if (call.mutex != nullptr) lock = std::unique_lock(*call.mutex);
        for (const auto& running : call.state->pattern_instances) {
            if (running.argument.cell_id == link.cell_id ||
                running.result.cell_id == link.cell_id) {
                instance = running;
            }
        }
    }
    if (!instance) {
        return error(ErrorCode::invalid_link,
                     "Target is not a pattern instance - no argument cell found. Use invoke() on "
                     "a pattern first and pass its @resultLocation.");
    }
    json argument = space_->get(instance->argument);
    for (const auto& [key, value] : updates->items()) argument[key] = value;
    // The run's fresh cells go once the call is over: the instance's own cells take its values.
    const PatternRun run = space_->run_pattern(instance->pattern, argument, stop);
    return guarded([&] {
        space_->set(instance->argument, argument);
        space_->set(instance->result, run.value);
        return shown({{"success", true},
                      {"@resultLocation", instance->result.to_string()},
                      {"result", CellSpace::render_for_model(run.value)}},
                     call);
    });
}

}  // namespace ullm
