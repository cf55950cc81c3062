#include <ullm/dialog/generate_object.hpp>

#include <ullm/core/error.hpp>
#include <ullm/testing/scripted_provider.hpp>
#include <ullm/tools/reflect.hpp>
#include <ullm/tools/schema.hpp>

#include <algorithm>
#include <optional>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"

namespace generate_object_test {

using ullm::json;
using ullm::test::error_code_of;

struct Dinner {
    std::string dish;
    int minutes = 0;
};
ULLM_REFLECT(Dinner, dish, minutes)

// A rule the schema cannot say, enforced by decoding.
struct QuickDinner {
    std::string dish;
    int minutes = 0;
};
ULLM_REFLECT_SCHEMA(QuickDinner, dish, minutes)
inline void from_json(const json& in, QuickDinner& out) {
    in.at("dish").get_to(out.dish);
    in.at("minutes").get_to(out.minutes);
    if (out.minutes > 30) throw ullm::ToolArgumentError("/minutes", "must be at most 30");
}

namespace {

// A recipe space: a handler that adds an ingredient to a shopping list, and a result schema.
struct Recipes {
    ullm::test::ScriptedClient scripted;
    std::shared_ptr<ullm::ScriptedProvider>& provider = scripted.provider;
    ullm::Client& client = scripted.client;
    std::shared_ptr<ullm::CellSpace> space = std::make_shared<ullm::CellSpace>();
    ullm::CellLink list = space->create(json::array(), std::nullopt, "shopping-list-0123456789");
    ullm::CellLink add = space->add_handler(
        {.description = "Add an ingredient to the shopping list",
         .input_schema = ullm::schema::object({{"item", ullm::schema::string()}}, {"item"}),
         .writes = {list},
         .run = [this](const json& input, ullm::CellWriter& cells) {
             json items = cells.get(list);
             items.push_back(input["item"]);
             cells.set(list, items);
             cells.set(ullm::parse_link(input["result"]), {{"items", items.size()}});
         }});
    json schema = ullm::schema::object(
        {{"dish", ullm::schema::string()}, {"minutes", ullm::schema::integer()}},
        {"dish", "minutes"});

    ullm::GenerateObjectOptions options(bool with_tool = true) {
        ullm::GenerateObjectOptions out{.schema = schema, .system = "You plan dinners."};
        if (with_tool) out.tools = {ullm::DialogTool::handler("add_item", add)};
        return out;
    }
};

}  // namespace

TEST_CASE("generate_object runs tools and ends at the first presentResult", "[dialog]") {
    Recipes r;
    r.provider->push_tool_call("add_item", {{"item", "basil"}}, "", "call_add");
    r.provider->push_tool_call("presentResult", {{"dish", "pesto"}, {"minutes", 20}}, "",
                               "call_result");
    const auto generated = ullm::generate_object(r.client, r.space, "Plan dinner", r.options());
    CHECK(generated.object == json{{"dish", "pesto"}, {"minutes", 20}});
    CHECK(r.provider->remaining() == 0);  // No request after presentResult.
    CHECK(r.space->get(r.list) == json::array({"basil"}));
    const auto& messages = generated.messages;
    REQUIRE(messages.size() == 5);
    CHECK(messages[0].text() == "Plan dinner");
    CHECK(messages[2].tool_results().at(0).tool_call_id == "call_add");
    CHECK(messages[4].tool_results().at(0).tool_call_id == "call_result");
    // Every round was made to call a tool.
    for (const auto& request : r.provider->requests()) {
        CHECK(request.tool_choice == ullm::ToolChoice::required());
    }
}

TEST_CASE("generate_object messages feed a dialog unchanged, correlation intact", "[dialog]") {
    Recipes r;
    r.provider->push_tool_call("add_item", {{"item", "basil"}}, "", "call_add");
    ullm::ChatResponse result_call = ullm::test::parallel_calls(
        {{"call_result", "presentResult", {{"dish", "pesto"}, {"minutes", 20}}}});
    result_call.message.replay = ullm::ReplayState{"scripted", "model-a", {{"signature", "s1"}}};
    r.provider->push(result_call);
    const auto generated = ullm::generate_object(r.client, r.space, "Plan dinner", r.options());

    ullm::Dialog dialog(
        r.client, r.space,
        {.tools = {ullm::DialogTool::handler("add_item", r.add)}, .result_schema = r.schema});
    REQUIRE(dialog.append("alice", generated.messages));
    r.provider->push_text("Enjoy the pesto.");
    const auto turn = dialog.send("alice", "Thanks! How long again?");
    CHECK(turn.status == ullm::DialogTurnStatus::completed);
    const auto sent = r.provider->requests().back().messages;
    REQUIRE(sent.size() == 6);
    for (std::size_t i = 0; i < generated.messages.size(); ++i) {
        CHECK(sent[i] == generated.messages[i]);  // Replay state and ids as generated.
    }
    CHECK(sent[3].tool_calls().at(0).id == sent[4].tool_results().at(0).tool_call_id);
    CHECK(sent[3].replay == result_call.message.replay);
    CHECK(sent[5].text() == "Thanks! How long again?");
}

TEST_CASE("generate_object fails clearly when the model never calls presentResult", "[dialog]") {
    Recipes r;
    r.provider->push_tool_call("add_item", {{"item", "basil"}});
    r.provider->push_text("Pesto, 20 minutes.");
    try {
        (void)ullm::generate_object(r.client, r.space, "Plan dinner", r.options());
        FAIL("no error");
    } catch (const ullm::MissingStructuredResultError& error) {
        CHECK(error.code() == "missing_structured_result");
        CHECK(error.status() == 422);
        CHECK(error.message().find("presentResult") != std::string::npos);
        CHECK(error.message().find("Pesto, 20 minutes.") != std::string::npos);
    }
}

TEST_CASE("generate_object answers arguments that break the schema so the model can retry",
          "[dialog]") {
    Recipes r;
    r.provider->push_tool_call("presentResult", {{"dish", "pesto"}}, "", "bad");
    r.provider->push_tool_call("presentResult", {{"dish", "pesto"}, {"minutes", 20}}, "", "good");
    const auto generated =
        ullm::generate_object(r.client, r.space, "Plan dinner", r.options(false));
    CHECK(generated.object == json{{"dish", "pesto"}, {"minutes", 20}});
    const auto first = generated.messages[2].tool_results().at(0);
    CHECK(first.is_error);
    CHECK(first.result.get<std::string>().find("minutes") != std::string::npos);
    // With no other tool, every round names presentResult.
    for (const auto& request : r.provider->requests()) {
        CHECK(request.tool_choice == ullm::ToolChoice::tool("presentResult"));
    }
}

TEST_CASE("generate_object checks its input and passes provider errors on", "[dialog]") {
    Recipes r;
    CHECK(error_code_of([&] {
              (void)ullm::generate_object(r.client, r.space, std::vector<ullm::Message>{},
                                          r.options());
          }) == "invalid_message");
    CHECK(error_code_of([&] {
              (void)ullm::generate_object(
                  r.client, r.space, std::vector<ullm::Message>{ullm::Message::assistant("hi")},
                  r.options());
          }) == "invalid_message");
    auto no_schema = r.options();
    no_schema.schema = nullptr;
    CHECK(error_code_of([&] {
              (void)ullm::generate_object(r.client, r.space, "Plan", no_schema);
          }) == "invalid_cell_schema");
    r.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::rate_limited, "slow down", 429, true)));
    CHECK(error_code_of([&] {
              (void)ullm::generate_object(r.client, r.space, "Plan", r.options());
          }) == "rate_limited");
}

TEST_CASE("generate_object keeps the cells its messages mention until a dialog takes them",
          "[dialog]") {
    Recipes r;
    auto options = r.options(false);
    options.builtin_tools = true;
    r.provider->push_tool_call("invoke",
                               {{"path", r.add.to_string()}, {"args", {{"item", "basil"}}}});
    r.provider->push_tool_call("presentResult", {{"dish", "pesto"}, {"minutes", 20}});
    std::optional<ullm::GeneratedObject> generated =
        ullm::generate_object(r.client, r.space, "Plan dinner", options);
    const auto result =
        ullm::parse_link(generated->messages.at(2).tool_results().at(0).result["@resultLocation"]);
    CHECK(generated->cells.holds(result));
    (void)r.space->collect();
    CHECK(r.space->get(result) == json{{"items", 1}});

    std::optional<ullm::Dialog> dialog;
    dialog.emplace(r.client, r.space, ullm::DialogOptions{.result_schema = r.schema});
    REQUIRE(dialog->append("alice", generated->messages));
    generated.reset();
    (void)r.space->collect();
    CHECK(r.space->get(result) == json{{"items", 1}});  // the dialog keeps it now
    dialog.reset();
    CHECK(r.space->collect() == 1);
    CHECK(error_code_of([&] { (void)r.space->get(result); }) == "unknown_cell");
}

TEST_CASE("generate_object<T> takes T's schema and decodes the result", "[dialog][structured]") {
    Recipes r;
    r.provider->push_tool_call("presentResult", {{"dish", "pesto"}, {"minutes", 20}}, "", "call");
    const auto generated = ullm::generate_object<Dinner>(r.client, r.space, "Plan dinner",
                                                         {.system = "You plan dinners."});
    CHECK(generated.value.dish == "pesto");
    CHECK(generated.value.minutes == 20);
    CHECK(generated.object == json{{"dish", "pesto"}, {"minutes", 20}});
    // presentResult was declared with the schema of Dinner.
    const auto requests = r.provider->requests();
    const auto& tools = requests.at(0).tools;
    const auto present = std::find_if(
        tools.begin(), tools.end(), [](const auto& tool) { return tool.name == "presentResult"; });
    REQUIRE(present != tools.end());
    CHECK(present->parameters.at("properties") == ullm::json_schema_of<Dinner>().at("properties"));
}

TEST_CASE("generate_object<T>: a result that passes the schema but does not decode is answered",
          "[dialog][structured]") {
    Recipes r;
    r.provider->push_tool_call("presentResult", {{"dish", "lasagne"}, {"minutes", 90}}, "", "slow");
    r.provider->push_tool_call("presentResult", {{"dish", "pesto"}, {"minutes", 20}}, "", "quick");
    int checked = 0;
    const auto generated = ullm::generate_object<QuickDinner>(
        r.client, r.space, "Plan a quick dinner",
        {.result_check = [&checked](const json&) { ++checked; }});
    CHECK(generated.value.dish == "pesto");
    CHECK(checked == 1);  // the caller's check runs after decoding, on the good result only
    const auto first = generated.messages.at(2).tool_results().at(0);
    CHECK(first.tool_call_id == "slow");
    CHECK(first.is_error);
    CHECK(first.result.dump().find("at most 30") != std::string::npos);
    CHECK(r.provider->remaining() == 0);
}

TEST_CASE("a dialog's result_check keeps a result it refuses out of the instance",
          "[dialog][structured]") {
    Recipes r;
    r.provider->push_tool_call("presentResult", {{"dish", "lasagne"}, {"minutes", 90}}, "", "a");
    r.provider->push_text("Lasagne takes too long; I'll think again.");
    ullm::Dialog dialog(r.client, r.space,
                        {.builtin_tools = false,
                         .result_schema = ullm::json_schema_of<QuickDinner>(),
                         .result_check = [](const json& result) {
                             std::optional<QuickDinner> decoded;
                             ullm::detail::decode_object(result, decoded);
                         }});
    const auto turn = dialog.send("alice", "Plan a quick dinner");
    CHECK(turn.status == ullm::DialogTurnStatus::completed);
    CHECK_FALSE(turn.result);
    CHECK_FALSE(ullm::decode_result<QuickDinner>(turn.result));
    // A stored result decodes; one that does not is a StructuredOutputError with the path.
    const auto dinner = ullm::decode_result<Dinner>(json{{"dish", "pesto"}, {"minutes", 20}});
    REQUIRE(dinner);
    CHECK(dinner->minutes == 20);
    try {
        (void)ullm::decode_result<QuickDinner>(json{{"dish", "stew"}, {"minutes", 45}});
        FAIL("a result that does not decode must throw");
    } catch (const ullm::StructuredOutputError& error) {
        CHECK(error.code() == "structured_output_invalid");
        CHECK(error.path() == "/minutes");
    }
}

}  // namespace generate_object_test
