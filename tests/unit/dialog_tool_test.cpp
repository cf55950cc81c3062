#include <ullm/dialog/dialog_tool.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/schema.hpp>

#include <mutex>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace dialog_tool_test {

using ullm::json;

namespace {

// A cell space with a notes list, a handler that appends to it and a pattern that counts.
struct Notes {
    std::shared_ptr<ullm::CellSpace> space = std::make_shared<ullm::CellSpace>();
    ullm::CellLink notes = space->create(json::array({"buy milk"}),
                                         json{{"type", "array"}, {"items", {{"type", "string"}}}},
                                         "notes-list-0123456789abcdef");
    ullm::CellLink add_note = space->add_handler(
        {.description = "Append a note",
         .input_schema = ullm::schema::object({{"text", ullm::schema::string()}}, {"text"}),
         .writes = {notes},
         .run = [this](const json& input, ullm::CellWriter& cells) {
             json list = cells.get(notes);
             list.push_back(input["text"]);
             cells.set(notes, list);
             cells.set(ullm::parse_link(input["result"]), {{"count", list.size()}});
         }});
    ullm::CellLink count_words = space->add_pattern(
        {.description = "Count the words of the notes",
         .argument_schema = ullm::schema::object(
             {{"notes", {{"type", {"string", "object"}}, {"description", "A link to the notes"}}},
              {"min", ullm::schema::integer()}},
             {"notes"}),
         .result_schema = ullm::schema::object({{"words", ullm::schema::integer()}}),
         .run = [](const json& argument, const ullm::CellReader& cells, std::stop_token) -> json {
             std::size_t words = 0;
             for (const auto& note : cells.get(ullm::parse_link(argument["notes"]))) {
                 const auto text = note.get<std::string>();
                 words += static_cast<std::size_t>(std::count(text.begin(), text.end(), ' ')) + 1;
             }
             return {{"words", words}};
         }});

    ullm::DialogInstanceState state;
    std::mutex mutex;
    bool current = true;
    ullm::ToolContext context;
    ullm::DialogCall call{&state, &mutex, [this] { return current; }, &context};

    ullm::DialogToolRegistry registry(std::vector<ullm::DialogTool> tools = {},
                                      ullm::DialogCatalogOptions options = {}) {
        if (tools.empty()) {
            tools = {ullm::DialogTool::handler("add_note", add_note),
                     ullm::DialogTool::pattern("count_words", count_words,
                                               {{"notes", notes.to_json()}})};
        }
        return ullm::DialogToolRegistry(space, std::move(tools), std::move(options));
    }
};

std::string reserved_message(const std::function<void()>& build) {
    try {
        build();
    } catch (const ullm::DialogError& error) {
        CHECK(error.code() == "reserved_tool_name");
        return error.message();
    }
    return "no error";
}

}  // namespace

TEST_CASE("dialog tool names of the built-ins are reserved while they are on", "[dialog_tool]") {
    Notes n;
    for (const auto name : ullm::dialog_builtin_tool_names) {
        const std::string text(name);
        CHECK(reserved_message([&] {
                  (void)n.registry({ullm::DialogTool::handler(text, n.add_note)});
              }) == "A tool may not be named \"" + text +
                        "\": it is a built-in tool of the dialog. Rename it, or pass "
                        "builtinTools: false to run without the built-ins.");
        CHECK(reserved_message([&] {
                  (void)n.registry({ullm::DialogTool::handler(text, n.add_note)},
                                   {.builtin_tools = false});
              }) == "no error");
    }
    for (const bool builtins : {true, false}) {
        CHECK(reserved_message([&] {
                  (void)n.registry({ullm::DialogTool::handler("presentResult", n.add_note)},
                                   {.builtin_tools = builtins});
              }) ==
              "A tool may not be named \"presentResult\": the dialog stores the call "
              "carrying that name as its structured result.");
    }
}

TEST_CASE("dialog catalog order: caller tools, built-ins, then presentResult", "[dialog_tool]") {
    Notes n;
    const json result_schema = {{"type", "object"},
                                {"properties", {{"summary", {{"$ref", "#/$defs/text"}}}}},
                                {"required", {"summary"}},
                                {"$defs", {{"text", {{"type", "string"}}}}}};
    const auto all = n.registry({}, {.result_schema = result_schema});
    CHECK(all.names() == std::vector<std::string>{"add_note", "count_words", "read", "invoke",
                                                  "pin", "unpin", "updateArgument", "schema",
                                                  "presentResult"});
    // presentResult's parameters are the result schema with references inlined.
    CHECK(all.declarations().back().parameters ==
          json{{"type", "object"},
               {"properties", {{"summary", {{"type", "string"}}}}},
               {"required", {"summary"}}});
    const auto bare = n.registry({}, {.builtin_tools = false, .result_schema = result_schema});
    CHECK(bare.names() == std::vector<std::string>{"add_note", "count_words", "presentResult"});
    CHECK(n.registry({}, {.builtin_tools = false}).names() ==
          std::vector<std::string>{"add_note", "count_words"});
    // A built-in that is not advertised cannot be called either.
    const auto outcome = bare.run("read", {{"path", n.notes.to_string()}}, n.call);
    CHECK(outcome.is_error);
    CHECK(outcome.result == "Tool has neither pattern nor handler");
    // The pattern's pre-filled parameter is not advertised; the handler's result is injected.
    const auto& count = all.declarations()[1].parameters;
    CHECK_FALSE(count["properties"].contains("notes"));
    CHECK(count["required"] == json::array());
}

TEST_CASE("a handler tool writes its bound state and returns what it put in result",
          "[dialog_tool]") {
    Notes n;
    const auto registry = n.registry();
    const auto outcome = registry.run("add_note", {{"text", "call mum"}}, n.call);
    REQUIRE_FALSE(outcome.is_error);
    CHECK(outcome.result == json{{"count", 2}});
    CHECK(n.space->get(n.notes) == json{"buy milk", "call mum"});
}

TEST_CASE("a pattern tool computes read-only with pre-filled parameters winning", "[dialog_tool]") {
    Notes n;
    const auto registry = n.registry();
    // The model tries to point the pattern elsewhere; the pre-filled link wins.
    const auto outcome =
        registry.run("count_words", {{"notes", "/of:somewhere-else-0123456789"}}, n.call);
    REQUIRE_FALSE(outcome.is_error);
    CHECK(outcome.result == json{{"words", 2}});

    // A pattern that writes caller state through a captured space is refused.
    auto sneaky = n.space->add_pattern(
        {.description = "Tries to write",
         .argument_schema = ullm::schema::object(),
         .result_schema = json::object(),
         .run = [&](const json&, const ullm::CellReader&, std::stop_token) -> json {
             n.space->set(n.notes, json::array());
             return "wrote";
         }});
    const auto writer = n.registry({ullm::DialogTool::pattern("sneaky", sneaky)})
                            .run("sneaky", json::object(), n.call);
    CHECK(writer.is_error);
    CHECK(writer.error_code == "pattern_write_denied");
    CHECK(n.space->get(n.notes) == json{"buy milk"});
}

TEST_CASE("dialog built-ins read, schema and their errors", "[dialog_tool]") {
    Notes n;
    const auto registry = n.registry();
    auto outcome = registry.run("read", {{"path", n.notes.to_string() + "/0"}}, n.call);
    REQUIRE_FALSE(outcome.is_error);
    CHECK(outcome.result["type"] == "json");
    CHECK(outcome.result["value"] == "buy milk");
    outcome = registry.run("read", {{"path", {{"@link", n.notes.to_string()}}}}, n.call);
    CHECK(outcome.result["value"] == json{"buy milk"});
    CHECK(outcome.result["schema"]["type"] == "array");
    outcome = registry.run("read", {{"path", n.add_note.to_string()}}, n.call);
    CHECK(outcome.is_error);
    CHECK(outcome.result == "Path resolves to a handler; use invoke() instead.");
    outcome = registry.run("read", {{"path", "notes/items"}}, n.call);
    CHECK(outcome.result == "Target must start with a slash.");
    outcome = registry.run("read", {{"path", "/notes/items"}}, n.call);
    CHECK(outcome.result == "Target must include a piece handle, e.g. \"/of:fid1:abc123/path\".");

    outcome = registry.run("schema", {{"path", n.notes.to_string()}}, n.call);
    CHECK(outcome.result == json{{"type", "array"}, {"items", {{"type", "string"}}}});
    const auto untyped = n.space->create({{"title", "x"}, {"done", false}});
    outcome = registry.run("schema", {{"path", untyped.to_string()}}, n.call);
    CHECK(outcome.result["properties"]["done"] == json{{"type", "boolean"}});
}

TEST_CASE("dialog built-in invoke runs handlers and patterns", "[dialog_tool]") {
    Notes n;
    const auto registry = n.registry();
    auto outcome = registry.run(
        "invoke", {{"path", n.add_note.to_string()}, {"args", {{"text", "pay rent"}}}}, n.call);
    REQUIRE_FALSE(outcome.is_error);
    CHECK(outcome.result["result"] == json{{"count", 2}});
    CHECK(outcome.result["@resultLocation"].get<std::string>().rfind("/of:", 0) == 0);
    // Without `args`, the rest of the input is the input.
    outcome = registry.run(
        "invoke", {{"path", n.count_words.to_string()}, {"notes", n.notes.to_json()}}, n.call);
    REQUIRE_FALSE(outcome.is_error);
    CHECK(outcome.result["result"] == json{{"words", 4}});
    CHECK(outcome.result["schema"]["properties"].contains("words"));
    CHECK(n.state.pattern_instances.size() == 1);
    outcome = registry.run("invoke", {{"path", n.notes.to_string()}}, n.call);
    CHECK(outcome.result == "target does not resolve to a handler stream or pattern.");
}

TEST_CASE("dialog built-ins pin, unpin and updateArgument", "[dialog_tool]") {
    Notes n;
    const auto registry = n.registry();
    const json pin = {{"path", n.notes.to_string()}, {"name", "Notes"}};
    CHECK(registry.run("pin", pin, n.call).result == json{{"success", true}});
    CHECK(registry.run("pin", pin, n.call).result ==
          json{{"success", false}, {"message", "Already pinned"}});
    REQUIRE(n.state.pins.size() == 1);
    CHECK(n.state.pins[0].name == "Notes");
    CHECK(registry.run("unpin", {{"path", n.notes.to_string()}}, n.call).result ==
          json{{"success", true}});
    CHECK(registry.run("unpin", {{"path", n.notes.to_string()}}, n.call).result ==
          json{{"success", false}, {"message", "Not found"}});

    auto outcome = registry.run("updateArgument",
                                {{"path", n.notes.to_string()}, {"updates", "min=3"}}, n.call);
    CHECK(outcome.result == "updates must be an object with field names and values");
    outcome = registry.run("updateArgument",
                           {{"path", n.notes.to_string()}, {"updates", {{"min", 3}}}}, n.call);
    CHECK(outcome.result.get<std::string>().rfind(
              "Target is not a pattern instance - no argument cell found.", 0) == 0);
    const auto started = registry.run(
        "invoke", {{"path", n.count_words.to_string()}, {"args", {{"notes", n.notes.to_json()}}}},
        n.call);
    const auto location = started.result["@resultLocation"];
    n.space->set(n.notes, json{"one two three"});
    outcome =
        registry.run("updateArgument", {{"path", location}, {"updates", {{"min", 1}}}}, n.call);
    REQUIRE_FALSE(outcome.is_error);
    CHECK(outcome.result["result"] == json{{"words", 3}});
    CHECK(n.space->get(n.state.pattern_instances[0].argument)["min"] == 1);

    // A cancelled turn commits nothing.
    n.current = false;
    CHECK(registry.run("pin", pin, n.call).error_code == "cancelled");
    CHECK(n.state.pins.empty());
}

TEST_CASE("a call keeps the cells it showed; the cells of handler and pattern tools go",
          "[dialog_tool]") {
    Notes n;
    const auto registry = n.registry();
    ullm::CellHold hold = n.space->hold();
    n.call.hold = &hold;
    const std::size_t caller_cells = n.space->cell_count();
    // A tool's result is a value: its own cells are shown to no one and go.
    CHECK_FALSE(registry.run("add_note", {{"text", "eggs"}}, n.call).is_error);
    CHECK_FALSE(registry.run("count_words", json::object(), n.call).is_error);
    CHECK(hold.size() == 0);
    CHECK(n.space->collect() == 3);

    // invoke shows a result location: the call keeps it, and a pattern instance's two cells.
    const auto invoked = registry.run(
        "invoke", {{"path", n.add_note.to_string()}, {"args", {{"text", "tea"}}}}, n.call);
    const auto location = ullm::parse_link(invoked.result["@resultLocation"]);
    CHECK(hold.holds(location));
    const auto started = registry.run(
        "invoke", {{"path", n.count_words.to_string()}, {"args", {{"notes", n.notes.to_json()}}}},
        n.call);
    REQUIRE(n.state.pattern_instances.size() == 1);
    CHECK(hold.holds(n.state.pattern_instances[0].argument));
    CHECK(hold.holds(n.state.pattern_instances[0].result));
    CHECK(n.space->collect() == 0);
    const auto updated = registry.run(
        "updateArgument", {{"path", started.result["@resultLocation"]}, {"updates", {{"min", 1}}}},
        n.call);
    CHECK_FALSE(updated.is_error);
    CHECK(n.space->collect() == 2);  // the rerun's own cells
    CHECK(n.space->cell_count() == caller_cells + 3);
    CHECK(n.space->get(n.state.pattern_instances[0].argument)["min"] == 1);

    // The registry holds its tools' cells while it lives.
    CHECK(ullm::test::error_code_of([&] { n.space->release(n.add_note); }) == "cell_in_use");
}

TEST_CASE("a handler tool gets the call's stop token as its HandlerContext", "[dialog_tool]") {
    Notes n;
    bool saw_stop = false;
    const auto watch = n.space->add_handler(
        {.description = "Reports its stop",
         .input_schema = ullm::schema::object(),
         .run = [&saw_stop](const json&, ullm::CellWriter&, const ullm::HandlerContext& context) {
             saw_stop = context.stop_token.stop_requested();
         }});
    const auto registry = n.registry({ullm::DialogTool::handler("watch", watch)});
    std::stop_source stop;
    n.context.stop_token = stop.get_token();
    CHECK_FALSE(registry.run("watch", json::object(), n.call).is_error);
    CHECK_FALSE(saw_stop);
    stop.request_stop();
    CHECK_FALSE(registry.run("invoke", {{"path", watch.to_string()}}, n.call).is_error);
    CHECK(saw_stop);
}

}  // namespace dialog_tool_test
