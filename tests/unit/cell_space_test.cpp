#include <ullm/dialog/cell_space.hpp>

#include <ullm/core/error.hpp>
#include <ullm/tools/validator.hpp>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"

namespace cell_space_test {

using ullm::CellLink;
using ullm::CellSpace;
using ullm::json;
using ullm::test::error_code_of;

namespace {

const std::string id_a = "notes-0123456789abcdefgh";
const std::string id_b = "items-0123456789abcdefgh";

// The message of the `DialogError` that `f` throws, or "no error".
template <class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const ullm::Error& error) {
        return error.message();
    }
    return "no error";
}

const std::string piece_handle =
    "Target must include a piece handle, e.g. \"/of:fid1:abc123/path\".";
const std::string slash_first = "Target must start with a slash.";

json link_json(const std::string& text) {
    return json{{"@link", text}};
}

}  // namespace

TEST_CASE("parse_link accepts a bare string, an object and a string holding an object",
          "[cell_space]") {
    const CellLink expected{id_a, "/items/0"};
    CHECK(ullm::parse_link("/of:" + id_a + "/items/0") == expected);
    CHECK(ullm::parse_link(link_json("/of:" + id_a + "/items/0")) == expected);
    CHECK(ullm::parse_link(link_json("/of:" + id_a + "/items/0").dump()) == expected);
    CHECK(ullm::parse_link("  " + link_json("/of:" + id_a + "/items/0").dump() + " ") == expected);
    CHECK(ullm::parse_link(link_json("  /of:" + id_a + "/items/0/  ")) == expected);
}

TEST_CASE("parse_link trims spaces and ignores a trailing slash", "[cell_space]") {
    CHECK(ullm::parse_link("  /of:" + id_a + "/items/  ") == CellLink{id_a, "/items"});
    CHECK(ullm::parse_link("\t/of:" + id_a + "\n") == CellLink{id_a, ""});
    CHECK(ullm::parse_link("/of:" + id_a + "/") == CellLink{id_a, ""});
    CHECK(ullm::parse_link("/of:fid1:abc123abc123abc123/path") ==
          CellLink{"fid1:abc123abc123abc123", "/path"});
}

TEST_CASE("parse_link keeps ~0 and ~1 escapes and rejects a stray tilde", "[cell_space]") {
    const CellLink link = ullm::parse_link("/of:" + id_a + "/a~1b/c~0d");
    CHECK(link.pointer == "/a~1b/c~0d");
    CellSpace space;
    const CellLink cell = space.create(json{{"a/b", json{{"c~d", 7}}}}, std::nullopt, id_a);
    CHECK(space.get(link) == 7);
    CHECK(cell.child("a/b").child("c~d") == link);
    CHECK(error_code_of([&] { (void)ullm::parse_link("/of:" + id_a + "/a~2"); }) == "invalid_link");
    CHECK(error_code_of([&] { (void)ullm::parse_link("/of:" + id_a + "/a~"); }) == "invalid_link");
}

TEST_CASE("parse_link reports the exact messages shown to the model", "[cell_space]") {
    CHECK(message_of([] { (void)ullm::parse_link("/notes/items"); }) == piece_handle);
    CHECK(message_of([] { (void)ullm::parse_link("/of:"); }) == piece_handle);
    CHECK(message_of([] { (void)ullm::parse_link("of:" + id_a + "/items"); }) == slash_first);
    CHECK(message_of([] { (void)ullm::parse_link(""); }) == slash_first);
    CHECK(message_of([] { (void)ullm::parse_link(link_json("notes")); }) == slash_first);
    CHECK(message_of([] { (void)ullm::parse_link("/of:notes/items"); }) ==
          "\"notes\" is a name, not a cell id: use the link shown under # Available Cells, e.g. "
          "{\"@link\": \"/of:<id>/path\"}.");
    CHECK(error_code_of([] { (void)ullm::parse_link("/of:notes/items"); }) == "invalid_link");
    CHECK(error_code_of([] { (void)ullm::parse_link(json(42)); }) == "invalid_link");
    CHECK(error_code_of([] { (void)ullm::parse_link(json{{"link", "/of:x"}}); }) == "invalid_link");
    CHECK(message_of([] { (void)ullm::parse_link("{not json"); }) == slash_first);
    // 19 characters is a name; 20 is an id.
    CHECK(error_code_of([] { (void)ullm::parse_link("/of:" + std::string(19, 'x')); }) ==
          "invalid_link");
    CHECK(ullm::parse_link("/of:" + std::string(20, 'x')).cell_id == std::string(20, 'x'));
}

TEST_CASE("CellLink renders as /of:<id><pointer> and {\"@link\": ...}", "[cell_space]") {
    const CellLink link{id_a, "/items/0"};
    CHECK(link.to_string() == "/of:" + id_a + "/items/0");
    CHECK(link.to_json() == link_json("/of:" + id_a + "/items/0"));
    CHECK(ullm::parse_link(link.to_json()) == link);
    CHECK(ullm::is_link_object(link.to_json()));
    CHECK_FALSE(ullm::is_link_object(json{{"@link", 1}}));
    CHECK_FALSE(ullm::is_link_object(json{{"@link", "/of:x"}, {"other", 1}}));
}

TEST_CASE("create generates long ids and checks given ones", "[cell_space]") {
    CellSpace space;
    const CellLink first = space.create(json{{"n", 1}});
    const CellLink second = space.create(json{{"n", 2}});
    CHECK(first.cell_id.size() >= ullm::min_cell_id_length);
    CHECK(first.cell_id.rfind("cell-", 0) == 0);
    CHECK(first.cell_id != second.cell_id);
    CHECK(first.pointer.empty());
    CHECK(space.get(first) == json{{"n", 1}});
    CHECK(space.kind(first) == ullm::CellKind::data);

    CHECK(space.create(1, std::nullopt, id_a).cell_id == id_a);
    CHECK(error_code_of([&] { space.create(1, std::nullopt, id_a); }) == "invalid_cell_id");
    CHECK(error_code_of([&] { space.create(1, std::nullopt, "short-id"); }) == "invalid_cell_id");
    CHECK(error_code_of([&] { space.create(1, std::nullopt, "has/slash-0123456789abc"); }) ==
          "invalid_cell_id");
    CHECK(error_code_of([&] { space.create(1, std::nullopt, "has space-0123456789abc"); }) ==
          "invalid_cell_id");
}

TEST_CASE("get and set read and write values at pointers", "[cell_space]") {
    CellSpace space;
    const CellLink notes = space.create(json{{"title", "todo"}, {"items", json::array({"a"})}});
    CHECK(space.get(notes.child("title")) == "todo");
    space.set(notes.child("title"), "done");
    space.set(notes.child("items").child("-"), "b");
    space.set(notes.child("items").child("2"), "c");
    space.set(notes.child("items").child("0"), "A");
    space.set(notes.child("new"), true);
    CHECK(space.get(notes) ==
          json{{"title", "done"}, {"items", json::array({"A", "b", "c"})}, {"new", true}});
    space.set(notes, 5);
    CHECK(space.get(notes) == 5);

    space.set(notes, json{{"items", json::array()}});
    CHECK(error_code_of([&] { space.set(notes.child("items").child("5"), 1); }) == "invalid_link");
    CHECK(error_code_of([&] {
              space.set(CellLink{notes.cell_id, "/missing/x"}, 1);
          }) == "invalid_link");
    CHECK(error_code_of([&] {
              (void)space.get(CellLink{notes.cell_id, "/nope"});
          }) == "invalid_link");
    CHECK(error_code_of([&] {
              (void)space.get(CellLink{notes.cell_id, "/items/01"});
          }) == "invalid_link");
    CHECK(error_code_of([&] {
              (void)space.get(CellLink{std::string(24, 'z'), ""});
          }) == "unknown_cell");
    CHECK(error_code_of([&] {
              space.set(CellLink{std::string(24, 'z'), ""}, 1);
          }) == "unknown_cell");
    CHECK(error_code_of([&] { space.set(notes, std::nan("")); }) == "invalid_cell_value");
    CHECK(error_code_of([&] { space.set(notes, json{{"__proto__", 1}}); }) == "invalid_cell_value");
}

TEST_CASE("a cell's schema is checked on create and on every set", "[cell_space]") {
    CellSpace space;
    const json schema = {{"type", "object"},
                         {"properties",
                          {{"count", {{"type", "integer"}, {"minimum", 0}}},
                           {"tags", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
                         {"required", {"count"}}};
    CHECK(error_code_of([&] {
              space.create(json{{"count", "x"}}, schema);
          }) == "invalid_cell_value");
    CHECK(error_code_of([&] { space.create(json::object(), schema); }) == "invalid_cell_value");
    const CellLink cell = space.create(json{{"count", 1}, {"tags", json::array()}}, schema);
    space.set(cell.child("count"), 2);
    space.set(cell.child("tags").child("-"), "red");
    CHECK(space.get(cell) == json{{"count", 2}, {"tags", {"red"}}});

    CHECK(error_code_of([&] { space.set(cell.child("count"), -1); }) == "invalid_cell_value");
    CHECK(message_of([&] { space.set(cell.child("tags").child("-"), 3); }) ==
          "The value at \"/of:" + cell.cell_id + "/tags/1\" must be a string, got number 3.");
    CHECK(error_code_of([&] { space.set(cell, json::object()); }) == "invalid_cell_value");
    // A refused write leaves the cell unchanged.
    CHECK(space.get(cell) == json{{"count", 2}, {"tags", {"red"}}});

    // Schemas may describe any root type; unsupported keywords are refused.
    const CellLink number = space.create(3, json{{"type", "number"}});
    CHECK(error_code_of([&] { space.set(number, "three"); }) == "invalid_cell_value");
    CHECK(error_code_of([&] {
              space.create(1, json{{"nullable", true}});
          }) == "invalid_cell_schema");
}

TEST_CASE("schema narrows to the pointer", "[cell_space]") {
    CellSpace space;
    const json schema = {
        {"type", "object"},
        {"properties",
         {{"items", {{"type", "array"}, {"items", {{"$ref", "#/$defs/item"}}}}},
          {"extra", {{"type", "object"}, {"additionalProperties", {{"type", "boolean"}}}}}}},
        {"$defs",
         {{"item", {{"type", "object"}, {"properties", {{"name", {{"type", "string"}}}}}}}}}};
    const CellLink cell = space.create(
        json{{"items", json::array({json{{"name", "a"}}})}, {"extra", {{"x", true}}}}, schema);
    CHECK(space.schema(cell) == schema);
    const auto item = space.schema(cell.child("items").child("0"));
    REQUIRE(item);
    CHECK((*item)["$ref"] == "#/$defs/item");
    CHECK(item->contains("$defs"));
    CHECK(space.schema(cell.child("items").child("0").child("name")) == json{{"type", "string"}});
    CHECK(space.schema(cell.child("extra").child("x")) == json{{"type", "boolean"}});
    CHECK_FALSE(space.create(1).cell_id.empty());
    CHECK_FALSE(space.schema(space.create(1)).has_value());
}

TEST_CASE("get follows links stored inside values", "[cell_space]") {
    CellSpace space;
    const CellLink b = space.create(json{{"name", "milk"}, {"qty", 2}}, std::nullopt, id_b);
    const CellLink a =
        space.create(json{{"items", json::array({b.to_json()})}}, std::nullopt, id_a);
    CHECK(space.get(CellLink{id_a, "/items/0/name"}) == "milk");
    // Landing exactly on a link resolves it: `read` shows the value.
    CHECK(space.get(CellLink{id_a, "/items/0"}) == json{{"name", "milk"}, {"qty", 2}});
    // Links nested inside the returned value stay links.
    CHECK(space.get(a) == json{{"items", json::array({b.to_json()})}});
    // A write through a stored link lands in the linked cell.
    space.set(CellLink{id_a, "/items/0/qty"}, 3);
    CHECK(space.get(b.child("qty")) == 3);
    // A write at the link's own place replaces the link.
    space.set(CellLink{id_a, "/items/0"}, "plain");
    CHECK(space.get(a) == json{{"items", {"plain"}}});
    CHECK(space.get(b) == json{{"name", "milk"}, {"qty", 3}});

    // A link into a sub-path, and a schema found through the link.
    const CellLink typed = space.create(
        json{{"deep", {{"v", 1}}}},
        json{{"type", "object"},
             {"properties",
              {{"deep", {{"type", "object"}, {"properties", {{"v", {{"type", "integer"}}}}}}}}}});
    const CellLink holder = space.create(json{{"ref", typed.child("deep").to_json()}});
    CHECK(space.get(holder.child("ref").child("v")) == 1);
    CHECK(space.schema(holder.child("ref").child("v")) == json{{"type", "integer"}});
    CHECK(error_code_of([&] { space.set(holder.child("ref").child("v"), "x"); }) ==
          "invalid_cell_value");
}

TEST_CASE("stored link cycles, long chains and broken links are invalid_link", "[cell_space]") {
    CellSpace space;
    const std::string id_c = "cycle-c-0123456789abcdef";
    const std::string id_d = "cycle-d-0123456789abcdef";
    space.create(link_json("/of:" + id_d), std::nullopt, id_c);
    space.create(link_json("/of:" + id_c), std::nullopt, id_d);
    CHECK(error_code_of([&] { (void)space.get(CellLink{id_c, ""}); }) == "invalid_link");
    const std::string cycle = message_of([&] { (void)space.get(CellLink{id_c, "/x"}); });
    CHECK(cycle.find("cycle") != std::string::npos);
    CHECK(cycle.find(id_d) != std::string::npos);

    // A link to a growing path never repeats: the hop bound stops it.
    const std::string id_e = "grow-e-0123456789abcdefg";
    space.create(link_json("/of:" + id_e + "/x"), std::nullopt, id_e);
    const std::string growing = message_of([&] { (void)space.get(CellLink{id_e, ""}); });
    CHECK(growing.find(std::to_string(ullm::max_link_hops)) != std::string::npos);

    const CellLink broken = space.create(json{{"l", link_json("/of:short")}});
    CHECK(error_code_of([&] { (void)space.get(broken.child("l")); }) == "invalid_link");
    const CellLink dangling = space.create(json{{"l", link_json("/of:" + std::string(22, 'q'))}});
    CHECK(error_code_of([&] { (void)space.get(dangling.child("l")); }) == "unknown_cell");
    CHECK(space.get(dangling) == json{{"l", link_json("/of:" + std::string(22, 'q'))}});
}

TEST_CASE("render_for_model drops $ keys, keeps links and cuts at depth 100", "[cell_space]") {
    const json value = {{"$secret", 1},
                        {"name", "n"},
                        {"child", {{"$meta", {{"x", 1}}}, {"ok", true}}},
                        {"link", link_json("/of:" + id_b)},
                        {"list", json::array({json{{"$k", 1}, {"v", 2}}})}};
    CHECK(CellSpace::render_for_model(value) == json{{"name", "n"},
                                                     {"child", {{"ok", true}}},
                                                     {"link", link_json("/of:" + id_b)},
                                                     {"list", json::array({json{{"v", 2}}})}});
    CHECK(CellSpace::render_for_model("text") == "text");

    json deep = 0;
    for (int i = 0; i < 150; ++i) deep = json::array({deep});
    const json shown = CellSpace::render_for_model(deep);
    std::size_t depth = 0;
    const json* node = &shown;
    while (node->is_array()) {
        ++depth;
        node = &(*node)[0];
    }
    CHECK(depth == ullm::max_render_depth);
    CHECK(*node == "\u2026");

    json exact = 0;
    for (std::size_t i = 0; i < ullm::max_render_depth; ++i) exact = json::array({exact});
    CHECK(CellSpace::render_for_model(exact) == exact);
}

TEST_CASE("a handler writes only its bound cells and its result cell", "[cell_space]") {
    CellSpace space;
    const CellLink list = space.create(json{{"items", json::array()}});
    const CellLink other = space.create(json{{"secret", 1}});
    std::string denied;
    const CellLink add = space.add_handler(
        {.description = "Append an item",
         .input_schema = {{"type", "object"},
                          {"properties", {{"item", {{"type", "string"}}}}},
                          {"required", {"item"}}},
         .writes = {list.child("items")},
         .run = [&](const json& input, ullm::CellWriter& cells) {
             cells.set(list.child("items").child("-"), input["item"]);
             cells.set(ullm::parse_link(input["result"]), json{{"added", input["item"]}});
             denied = error_code_of([&] { cells.set(other.child("secret"), 2); });
             CHECK(cells.get(other.child("secret")) == 1);
             CHECK(cells.may_write(list.child("items").child("0")));
             CHECK_FALSE(cells.may_write(list.child("itemsx")));
             CHECK_FALSE(cells.may_write(list));
         }});
    CHECK(space.kind(add) == ullm::CellKind::handler);
    REQUIRE(space.handler(add));
    CHECK(space.pattern(add) == nullptr);
    CHECK(error_code_of([&] { (void)space.get(add); }) == "not_a_data_cell");

    const ullm::HandlerRun run = space.run_handler(add, json{{"item", "milk"}});
    CHECK(denied == "handler_write_denied");
    CHECK(run.value == json{{"added", "milk"}});
    CHECK(space.get(run.result) == run.value);
    CHECK(space.get(list) == json{{"items", {"milk"}}});
    CHECK(space.get(other) == json{{"secret", 1}});

    // A stored link to a handler cell reads as the link and cannot be written into.
    const CellLink tools = space.create(json{{"add", add.to_json()}});
    CHECK(space.get(tools.child("add")) == add.to_json());
    CHECK(error_code_of([&] { space.set(tools.child("add").child("x"), 1); }) == "not_a_data_cell");
    CHECK(error_code_of([&] { (void)space.get(tools.child("add").child("x")); }) ==
          "not_a_data_cell");
    CHECK(space.get(tools) == json{{"add", add.to_json()}});

    // The model may name a result location of an earlier call as its result cell, but not
    // any other cell outside the handler's own.
    CHECK(space.run_handler(add, json{{"item", "eggs"}, {"result", run.result.to_json()}}).value ==
          json{{"added", "eggs"}});
    CHECK(space.get(run.result) == json{{"added", "eggs"}});
    const CellLink mine = space.create(nullptr);
    CHECK(error_code_of([&] {
              space.run_handler(add, json{{"item", "eggs"}, {"result", mine.to_json()}});
          }) == "handler_write_denied");
    CHECK(space.get(mine) == nullptr);
    CHECK(space.get(list) == json{{"items", {"milk", "eggs"}}});

    CHECK(error_code_of([&] {
              space.run_handler(add, json{{"item", 3}});
          }) == "invalid_tool_arguments");
    CHECK(error_code_of([&] { space.run_handler(list, json::object()); }) == "not_a_handler_cell");
}

TEST_CASE("a handler cannot write through a stored link to an unbound cell", "[cell_space]") {
    CellSpace space;
    const CellLink target = space.create(json{{"v", 1}});
    const CellLink bound = space.create(json{{"ref", target.to_json()}});
    ullm::CellWriter writer(space, {bound});
    CHECK(error_code_of([&] { writer.set(bound.child("ref").child("v"), 2); }) ==
          "handler_write_denied");
    CHECK(space.get(target) == json{{"v", 1}});
    writer.set(bound.child("ref"), 5);  // replaces the link inside the bound cell
    CHECK(space.get(bound) == json{{"ref", 5}});
}

TEST_CASE("a pattern runs read-only and its result is checked", "[cell_space]") {
    CellSpace space;
    const CellLink list = space.create(json{{"items", {1, 2, 3}}});
    const CellLink sum = space.add_pattern(
        {.description = "Sum a list",
         .argument_schema = {{"type", "object"},
                             {"properties", {{"list", {{"type", {"string", "object"}}}}}}},
         .result_schema = {{"type", "integer"}},
         .run = [](const json& argument, const ullm::CellReader& cells, std::stop_token) -> json {
             int total = 0;
             for (const auto& n : cells.get(ullm::parse_link(argument["list"]))) {
                 total += n.get<int>();
             }
             return total;
         }});
    CHECK(space.kind(sum) == ullm::CellKind::pattern);
    const ullm::PatternRun run =
        space.run_pattern(sum, json{{"list", list.child("items").to_json()}});
    CHECK(run.value == 6);
    CHECK(space.get(run.result) == 6);
    CHECK(space.get(run.argument) == json{{"list", list.child("items").to_json()}});

    const CellLink wrong = space.add_pattern(
        {.description = "Returns the wrong type",
         .argument_schema = {{"type", "object"}},
         .result_schema = {{"type", "integer"}},
         .run = [](const json&, const ullm::CellReader&, std::stop_token) -> json { return "x"; }});
    CHECK(error_code_of([&] { space.run_pattern(wrong, json::object()); }) ==
          "invalid_pattern_result");
    CHECK(error_code_of([&] { space.run_pattern(list, json::object()); }) == "not_a_pattern_cell");
    CHECK(error_code_of([&] { space.run_pattern(sum, json::array()); }) ==
          "invalid_tool_arguments");
}

TEST_CASE("a pattern that writes the space another way gets pattern_write_denied", "[cell_space]") {
    CellSpace space;
    const CellLink state = space.create(json{{"count", 0}});
    std::string set_code;
    std::string create_code;
    const CellLink sneaky = space.add_pattern(
        {.description = "Tries to write caller state",
         .argument_schema = {{"type", "object"}},
         .result_schema = json::object(),
         .run = [&](const json&, const ullm::CellReader&, std::stop_token) -> json {
             set_code = error_code_of([&] { space.set(state.child("count"), 1); });
             create_code = error_code_of([&] { space.create(1); });
             space.set(state.child("count"), 2);  // escapes as the pattern's failure
             return nullptr;
         }});
    CHECK(error_code_of([&] { space.run_pattern(sneaky, json::object()); }) ==
          "pattern_write_denied");
    CHECK(set_code == "pattern_write_denied");
    CHECK(create_code == "pattern_write_denied");
    CHECK(space.get(state) == json{{"count", 0}});
    // The mark ends with the run.
    space.set(state.child("count"), 3);
    CHECK(space.get(state.child("count")) == 3);
}

TEST_CASE("handler and pattern cells check their definitions", "[cell_space]") {
    CellSpace space;
    CHECK(error_code_of([&] { space.add_handler({.description = "no run"}); }) ==
          "invalid_cell_value");
    CHECK(error_code_of([&] {
              space.add_handler({.description = "bad schema",
                                 .input_schema = {{"type", "string"}},
                                 .run = [](const json&, ullm::CellWriter&) {}});
          }) == "invalid_cell_schema");
    CHECK(error_code_of([&] {
              space.add_handler({.description = "unknown bound cell",
                                 .input_schema = {{"type", "object"}},
                                 .writes = {CellLink{std::string(24, 'u'), ""}},
                                 .run = [](const json&, ullm::CellWriter&) {}});
          }) == "unknown_cell");
    CHECK(error_code_of([&] {
              space.add_pattern({.description = "bad result schema",
                                 .argument_schema = {{"type", "object"}},
                                 .result_schema = {{"nullable", true}},
                                 .run = [](const json&, const ullm::CellReader&,
                                           std::stop_token) -> json { return 1; }});
          }) == "invalid_cell_schema");
}

TEST_CASE("validate_value checks values of any root type", "[cell_space]") {
    CHECK_NOTHROW(ullm::validate_value_schema(json{{"type", "array"}}));
    CHECK_NOTHROW(ullm::validate_value_schema(json::object()));
    CHECK(error_code_of([] {
              ullm::validate_schema(json{{"type", "array"}});
          }) == "invalid_tool_schema");
    CHECK_NOTHROW(ullm::validate_value(json{{"type", "array"}, {"items", {{"type", "integer"}}}},
                                       json{1, 2}));
    try {
        ullm::validate_value(json{{"type", "array"}, {"items", {{"type", "integer"}}}},
                             json{1, "x"});
        FAIL("expected a failure");
    } catch (const ullm::ToolArgumentError& error) {
        CHECK(error.path() == "/1");
    }
}

TEST_CASE("cell space get and set from 8 threads", "[cell_space]") {
    CellSpace space;
    const CellLink counters =
        space.create(json{{"values", json::array()}},
                     json{{"type", "object"}, {"properties", {{"values", {{"type", "array"}}}}}});
    constexpr int threads = 8;
    constexpr int rounds = 200;
    for (int t = 0; t < threads; ++t) space.set(counters.child("values").child("-"), 0);
    std::atomic<int> failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            const CellLink mine = counters.child("values").child(std::to_string(t));
            for (int i = 1; i <= rounds; ++i) {
                space.set(mine, i);
                if (space.get(mine) != i) ++failures;
                (void)space.get(counters);
                (void)CellSpace::render_for_model(space.reader().get(counters));
            }
        });
    }
    for (auto& worker : workers) worker.join();
    CHECK(failures == 0);
    CHECK(space.get(counters.child("values")) == json(std::vector<int>(threads, rounds)));
}

namespace {

// A space with a counter, a handler that counts and writes the count as its result, and a
// pattern that returns the count: the cells a caller makes, and tools whose runs make cells.
struct Runs {
    explicit Runs(ullm::CellSpaceOptions options = {}) : space(options) {}

    CellSpace space;
    CellLink counter = space.create(0, std::nullopt, id_a);
    CellLink add =
        space.add_handler({.description = "Count one",
                           .input_schema = {{"type", "object"}},
                           .writes = {counter},
                           .run = [this](const json& input, ullm::CellWriter& cells) {
                               const int next = cells.get(counter).get<int>() + 1;
                               cells.set(counter, next);
                               cells.set(ullm::parse_link(input["result"]), json{{"count", next}});
                           }});
    CellLink count =
        space.add_pattern({.description = "Read the count",
                           .argument_schema = {{"type", "object"}},
                           .result_schema = {{"type", "integer"}},
                           .run = [this](const json&, const ullm::CellReader& cells,
                                         std::stop_token) -> json { return cells.get(counter); }});
    const std::size_t caller_cells = 3;
};

}  // namespace

TEST_CASE("run cells nothing needs are released by collect; caller cells stay", "[cell_space]") {
    Runs r;
    REQUIRE(r.space.cell_count() == r.caller_cells);
    std::vector<CellLink> made;
    for (int i = 0; i < 10; ++i) made.push_back(r.space.run_handler(r.add, json::object()).result);
    for (int i = 0; i < 5; ++i) {
        const auto run = r.space.run_pattern(r.count, json::object());
        made.push_back(run.argument);
        made.push_back(run.result);
    }
    CHECK(r.space.cell_count() == r.caller_cells + 20);
    CHECK(r.space.collect() == 20);
    CHECK(r.space.cell_count() == r.caller_cells);
    for (const auto& link : made) {
        CHECK(error_code_of([&] { (void)r.space.get(link); }) == "unknown_cell");
    }
    // A released result cell is no longer accepted as the result location of a later call.
    CHECK(error_code_of([&] {
              (void)r.space.run_handler(r.add, json{{"result", made.front().to_json()}});
          }) == "handler_write_denied");
    CHECK(r.space.get(r.counter) == 10);  // caller cells keep their values
    CHECK(r.space.collect() == 0);
}

TEST_CASE("a run's hold keeps its cells while it or a copy lives", "[cell_space]") {
    Runs r;
    ullm::PatternRun copy;
    CellLink handler_result;
    {
        const auto handler_run = r.space.run_handler(r.add, json::object());
        const auto pattern_run = r.space.run_pattern(r.count, json::object());
        handler_result = handler_run.result;
        copy = pattern_run;
        CHECK(handler_run.hold.holds(handler_result));
        CHECK(pattern_run.hold.size() == 2);
        CHECK(r.space.collect() == 0);
        CHECK(r.space.get(handler_result) == json{{"count", 1}});
    }
    // The handler's run is gone; the pattern's lives on in its copy.
    CHECK(r.space.collect() == 1);
    CHECK(error_code_of([&] { (void)r.space.get(handler_result); }) == "unknown_cell");
    CHECK(r.space.get(copy.result) == 1);
    CHECK(r.space.get(copy.argument) == json::object());
    copy = {};
    CHECK(r.space.collect() == 2);
}

TEST_CASE("a cell a kept cell mentions is kept: stored links, /of: texts, chains, bound cells",
          "[cell_space]") {
    Runs r;
    auto one = r.space.run_handler(r.add, json::object());
    auto two = r.space.run_handler(r.add, json::object());
    auto three = r.space.run_handler(r.add, json::object());
    auto four = r.space.run_handler(r.add, json::object());
    // one: a stored link in a caller cell; two: a link in a caller cell's text; three: a
    // stored link in one; four: the cell a handler is bound to.
    r.space.set(one.result.child("next"), three.result.to_json());
    const CellLink index =
        r.space.create(json{{"kept", one.result.to_json()},
                            {"note", "see /of:" + two.result.cell_id + ", it has the count"}});
    const CellLink bound = r.space.add_handler({.description = "Writes a run cell",
                                                .input_schema = {{"type", "object"}},
                                                .writes = {four.result},
                                                .run = [](const json&, ullm::CellWriter&) {}});
    const std::vector<CellLink> links{one.result, two.result, three.result, four.result};
    one = {};
    two = {};
    three = {};
    four = {};
    CHECK(r.space.collect() == 0);
    CHECK(r.space.get(links[2].child("count")) == 3);
    CHECK(r.space.get(CellLink{index.cell_id, "/kept/next/count"}) == 3);

    // Without the caller cells that mention them, all four go.
    r.space.set(index, json::object());
    r.space.release(bound);
    CHECK(r.space.collect() == 4);
    CHECK(r.space.cell_count() == r.caller_cells + 1);
    // A stored link to a released cell reads as unknown_cell, as any dangling link does.
    r.space.set(index, json{{"kept", links[0].to_json()}});
    CHECK(error_code_of([&] { (void)r.space.get(index.child("kept")); }) == "unknown_cell");
}

TEST_CASE("a CellHold keeps the cells it names until it lets go", "[cell_space]") {
    Runs r;
    ullm::CellHold hold = r.space.hold();
    CellLink first;
    CellLink second;
    {
        const auto a = r.space.run_handler(r.add, json::object());
        const auto b = r.space.run_handler(r.add, json::object());
        first = a.result;
        second = b.result;
        CHECK(hold.keep(a.result.child("count")));  // the pointer does not matter
        hold.keep_mentioned(json{{"@resultLocation", b.result.to_string()}, {"other", 1}});
    }
    CHECK(hold.size() == 2);
    CHECK(hold.holds(first));
    CHECK(r.space.collect() == 0);
    const ullm::CellHold copy = hold;  // copies share one hold
    hold.assign({second});
    CHECK_FALSE(copy.holds(first));
    CHECK(r.space.collect() == 1);
    CHECK_FALSE(hold.keep(first));  // released: nothing to keep
    CHECK_FALSE(hold.keep(CellLink{std::string(24, 'z'), ""}));
    hold.clear();
    CHECK(copy.size() == 0);
    CHECK(r.space.collect() == 1);

    const ullm::CellHold none;
    CHECK_FALSE(ullm::CellHold().keep(r.counter));
    CHECK(none.size() == 0);
    // A hold may outlive its space.
    ullm::CellHold orphan;
    {
        CellSpace gone;
        orphan = gone.hold({gone.create(1)});
        CHECK(orphan.size() == 1);
    }
    CHECK(orphan.size() == 0);
    CHECK_FALSE(orphan.keep(r.counter));
}

TEST_CASE("release frees a cell now and refuses one still in use with cell_in_use",
          "[cell_space]") {
    Runs r;
    const CellLink spare = r.space.create(json{{"v", 1}});
    r.space.release(spare);
    CHECK(error_code_of([&] { (void)r.space.get(spare); }) == "unknown_cell");
    CHECK(error_code_of([&] { r.space.release(spare); }) == "unknown_cell");
    CHECK(error_code_of([&] { r.space.release(r.counter.child("x")); }) == "invalid_link");

    // Bound by a handler, linked from a kept cell, named by a hold.
    CHECK(error_code_of([&] { r.space.release(r.counter); }) == "cell_in_use");
    const CellLink target = r.space.create(1);
    const CellLink holder = r.space.create(json{{"ref", target.to_json()}});
    CHECK(message_of([&] { r.space.release(target); }).find("links to it") != std::string::npos);
    r.space.set(holder, nullptr);
    {
        const auto hold = r.space.hold({target});
        CHECK(message_of([&] { r.space.release(target); }).find("it is held") != std::string::npos);
    }
    r.space.release(target);
    CHECK(error_code_of([&] { (void)r.space.get(target); }) == "unknown_cell");

    // A run cell goes early once its run lets go of it; a link from a cell nothing keeps does
    // not keep it.
    auto run = r.space.run_handler(r.add, json::object());
    const CellLink result = run.result;
    CHECK(error_code_of([&] { r.space.release(result); }) == "cell_in_use");
    auto linker = r.space.run_handler(r.add, json::object());
    r.space.set(linker.result, result.to_json());
    run = {};
    linker = {};
    r.space.release(result);
    CHECK(error_code_of([&] { (void)r.space.get(result); }) == "unknown_cell");

    // Once its handler is gone, the counter can go too; a pattern cannot release anything.
    r.space.release(r.add);
    const CellLink release_counter = r.space.add_pattern(
        {.description = "Releases the counter",
         .argument_schema = {{"type", "object"}},
         .result_schema = json::object(),
         .run = [&r](const json&, const ullm::CellReader&, std::stop_token) -> json {
             r.space.release(r.counter);
             return nullptr;
         }});
    CHECK(error_code_of([&] { (void)r.space.run_pattern(release_counter, json::object()); }) ==
          "pattern_write_denied");
    r.space.release(r.counter);
    CHECK(error_code_of([&] { (void)r.space.get(r.counter); }) == "unknown_cell");
}

TEST_CASE("a space never passes max_cells: collections make room, a full one refuses",
          "[cell_space]") {
    Runs r({.max_cells = 8});
    CHECK(r.space.options().max_cells == 8);
    CHECK(CellSpace().options().max_cells == ullm::default_max_cells);
    std::size_t most = 0;
    for (int i = 0; i < 200; ++i) {
        (void)r.space.run_handler(r.add, json::object());
        (void)r.space.run_pattern(r.count, json::object());
        most = std::max(most, r.space.cell_count());
    }
    CHECK(most == 8);
    CHECK(r.space.get(r.counter) == 200);

    // When every cell is still held, the next cell is refused and nothing runs.
    (void)r.space.collect();
    std::vector<ullm::HandlerRun> held;
    while (r.space.cell_count() < 8) held.push_back(r.space.run_handler(r.add, json::object()));
    CHECK(error_code_of([&] { (void)r.space.run_handler(r.add, json::object()); }) ==
          "cell_space_full");
    CHECK(error_code_of([&] { (void)r.space.run_pattern(r.count, json::object()); }) ==
          "cell_space_full");
    CHECK(message_of([&] { r.space.create(1); }).find("its limit of 8 cells") != std::string::npos);
    CHECK(r.space.get(r.counter) == 205);
    CHECK(r.space.cell_count() == 8);
    held.pop_back();
    CHECK_NOTHROW(r.space.create(1));  // the collection it starts makes room
}

TEST_CASE("many runs keep the cell count bounded with no collect call", "[cell_space]") {
    Runs r;
    std::size_t most = 0;
    for (int i = 0; i < 3000; ++i) {
        (void)r.space.run_handler(r.add, json::object());
        (void)r.space.run_pattern(r.count, json::object());
        most = std::max(most, r.space.cell_count());
    }
    // 9000 cells were made; collections ran whenever 1024 more had piled up.
    CHECK(most <= r.caller_cells + 1024 + 4);
    CHECK(r.space.cell_count() <= most);
    CHECK(r.space.get(r.counter) == 3000);
}

TEST_CASE("runs, holds and collections from several threads", "[cell_space]") {
    Runs r({.max_cells = 64});
    std::atomic<int> failures{0};
    std::atomic<bool> done{false};
    std::vector<std::thread> workers;
    for (int t = 0; t < 4; ++t) {
        workers.emplace_back([&] {
            try {
                for (int i = 0; i < 150; ++i) {
                    const auto run = r.space.run_handler(r.add, json::object());
                    if (r.space.get(run.result) != run.value) ++failures;
                    const auto pattern = r.space.run_pattern(r.count, json::object());
                    if (r.space.get(pattern.result) != pattern.value) ++failures;
                    auto hold = r.space.hold({run.result});
                    hold.keep_mentioned(json{{"@link", pattern.argument.to_string()}});
                    if (hold.size() != 2) ++failures;
                }
            } catch (const ullm::Error&) {
                ++failures;
            }
        });
    }
    std::thread collector([&] {
        while (!done) {
            (void)r.space.collect();
            if (r.space.cell_count() > 64) ++failures;
        }
    });
    for (auto& worker : workers) worker.join();
    done = true;
    collector.join();
    CHECK(failures == 0);
    (void)r.space.collect();
    CHECK(r.space.cell_count() == r.caller_cells);
}

TEST_CASE("a handler may take a HandlerContext with its stop token and deadline", "[cell_space]") {
    CellSpace space;
    std::vector<bool> seen;
    const CellLink watch = space.add_handler(
        {.description = "Reports whether it should stop",
         .input_schema = {{"type", "object"}},
         .run = [&seen](const json&, ullm::CellWriter&, const ullm::HandlerContext& context) {
             seen.push_back(context.stop_requested());
         }});
    (void)space.run_handler(watch, json::object());
    std::stop_source stop;
    (void)space.run_handler(watch, json::object(), {}, {.stop_token = stop.get_token()});
    stop.request_stop();
    (void)space.run_handler(watch, json::object(), {}, {.stop_token = stop.get_token()});
    (void)space.run_handler(
        watch, json::object(), {},
        {.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1)});
    // Called as a handler was called before it had a context: no stop, no deadline.
    ullm::CellWriter writer(space, {});
    space.handler(watch)->run(json::object(), writer);
    CHECK(seen == std::vector<bool>{false, false, true, true, false});

    // An empty callable of either kind is no handler.
    const std::function<void(const json&, ullm::CellWriter&)> none;
    CHECK_FALSE(ullm::HandlerFunction(none));
    CHECK_FALSE(ullm::HandlerFunction(nullptr));
    CHECK(error_code_of([&] { space.add_handler({.description = "empty", .run = none}); }) ==
          "invalid_cell_value");
    void (*no_function)(const json&, ullm::CellWriter&, const ullm::HandlerContext&) = nullptr;
    CHECK(error_code_of([&] { space.add_handler({.description = "empty", .run = no_function}); }) ==
          "invalid_cell_value");
}

}  // namespace cell_space_test
