// mcp_tools: the tools of real MCP servers (server-everything, server-filesystem, the
// misbehaving fixture) in conversations driven by the scripted model: results in history and
// in stream events, strict arguments, deadlines, name clashes and refused schemas.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/dialog/dialog.hpp>
#include <ullm/dialog/tool_adapter.hpp>
#include <ullm/mcp/mcp_tools.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/error_code.hpp"
#include "support/mcp_servers.hpp"
#include "support/scripted_client.hpp"
#include "support/temp_dir.hpp"

namespace mcp_tools_test {

using namespace std::chrono_literals;
using ullm::json;
using Type = ullm::StreamEvent::Type;

namespace {

std::vector<std::string> names_of(const std::vector<ullm::Tool>& tools) {
    std::vector<std::string> names;
    for (const auto& tool : tools) names.push_back(tool.name());
    return names;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("a conversation calls a tool of server-everything and keeps its result", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(ullm::test::everything_server());
    const auto set = ullm::mcp_tools(client);
    REQUIRE(contains(names_of(set.tools), "echo"));

    ullm::test::ScriptedClient s;
    s.provider->push_tool_call("echo", {{"message", "hi"}}, "", "call_1");
    s.provider->push_text("The server said hi.");
    // Bad arguments never reach the server: strict validation answers the model.
    s.provider->push_tool_call("get-sum", {{"a", "x"}, {"b", 1}}, "", "call_2");
    s.provider->push_text("I will fix that.");
    // The tool loop's deadline becomes MCP cancellation, and the conversation goes on.
    s.provider->push_tool_call("trigger-long-running-operation", {{"duration", 30}, {"steps", 30}},
                               "", "call_3");
    s.provider->push_text("That took too long.");
    auto conversation = s.client.conversation(
        {.tools = set, .tool_execution_timeout = std::chrono::milliseconds(500)});

    CHECK(conversation.send("Say hi through the server").text == "The server said hi.");
    auto history = conversation.history();
    REQUIRE(history.size() == 4);
    auto results = history[2].tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].tool_call_id == "call_1");
    CHECK(results[0].name == "echo");
    CHECK(results[0].result == "Echo: hi");
    CHECK_FALSE(results[0].is_error);

    CHECK(conversation.send("Add x and 1").text == "I will fix that.");
    results = conversation.history()[6].tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].is_error);
    CHECK(results[0].result.get<std::string>().find("/a") != std::string::npos);

    const auto started = std::chrono::steady_clock::now();
    CHECK(conversation.send("Run the long one").text == "That took too long.");
    CHECK(std::chrono::steady_clock::now() - started < 10s);
    results = conversation.history()[10].tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].is_error);
    // Still usable afterwards.
    CHECK(client.call_tool("echo", {{"message", "again"}}).text() == "Echo: again");
    client.close();
}

TEST_CASE("a streamed turn shows the MCP tool call and its result as events", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(ullm::test::everything_server());
    ullm::test::ScriptedClient s;
    s.provider->push_tool_call("get-sum", {{"a", 2}, {"b", 3}}, "", "call_s");
    s.provider->push_text("Five.");
    auto conversation = s.client.conversation({.tools = ullm::mcp_tools(client)});
    bool saw_call = false;
    bool saw_result = false;
    std::string text;
    for (const auto& event : conversation.send_stream("What is 2 + 3?")) {
        if (event.type == Type::tool_call_end) {
            REQUIRE(event.tool_call);
            CHECK(event.tool_call->name == "get-sum");
            saw_call = true;
        }
        if (event.type == Type::tool_call_result) {
            REQUIRE(event.tool_result);
            CHECK(event.tool_result->tool_call_id == "call_s");
            CHECK(event.tool_result->result.get<std::string>().find('5') != std::string::npos);
            saw_result = true;
        }
        if (const auto* delta = event.text_delta()) text += *delta;
    }
    CHECK(saw_call);
    CHECK(saw_result);
    CHECK(text == "Five.");
    // The conversation's tools hold copies of the client until its last stream lets go, maybe
    // on another thread: close() ends the connection now, whoever drops the last copy.
    client.close();
}

TEST_CASE("a conversation writes and reads files through server-filesystem", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    ullm::test::TempDir dir("mcp-fs");
    const auto root = std::filesystem::canonical(dir.path());
    auto client = ullm::McpClient::spawn(ullm::test::filesystem_server(root));
    const auto set = ullm::mcp_tools(client);
    REQUIRE(contains(names_of(set.tools), "write_file"));
    REQUIRE(contains(names_of(set.tools), "read_text_file"));

    const std::string note = (root / "note.txt").string();
    ullm::test::ScriptedClient s;
    s.provider->push_tool_call("write_file", {{"path", note}, {"content", "hello from ullm"}});
    s.provider->push_tool_call("read_text_file", {{"path", note}});
    s.provider->push_tool_call("read_text_file", {{"path", "/etc/passwd"}});
    s.provider->push_text("Done.");
    auto conversation = s.client.conversation({.tools = set});
    CHECK(conversation.send("Write a note, read it back, then peek outside").text == "Done.");
    CHECK(read_file(root / "note.txt") == "hello from ullm");

    const auto history = conversation.history();
    REQUIRE(history.size() == 8);
    const auto read_back = history[4].tool_results();
    REQUIRE(read_back.size() == 1);
    CHECK_FALSE(read_back[0].is_error);
    CHECK(read_back[0].result.dump().find("hello from ullm") != std::string::npos);
    // Outside the allowed directory: the server's isError result, which the model sees.
    const auto outside = history[6].tool_results();
    REQUIRE(outside.size() == 1);
    CHECK(outside[0].is_error);
    CHECK(outside[0].result.get<std::string>().find("denied") != std::string::npos);
    client.close();
}

TEST_CASE("mcp_tools prefixes clashing names with the server's alias", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    ullm::test::TempDir a_dir("mcp-a");
    ullm::test::TempDir b_dir("mcp-b");
    auto a_options = ullm::test::filesystem_server(a_dir.path());
    a_options.alias = "a";
    auto b_options = ullm::test::filesystem_server(b_dir.path());
    b_options.alias = "b";
    auto a = ullm::McpClient::spawn(a_options);
    auto b = ullm::McpClient::spawn(b_options);
    const auto set = ullm::mcp_tools({a, b}, {.taken_names = {"list_allowed_directories"}});
    const auto names = names_of(set.tools);
    CHECK(contains(names, "a__write_file"));
    CHECK(contains(names, "b__write_file"));
    CHECK_FALSE(contains(names, "write_file"));
    CHECK(set.rejected.empty());

    const auto a_file = (std::filesystem::canonical(a_dir.path()) / "x.txt").string();
    const auto b_file = (std::filesystem::canonical(b_dir.path()) / "y.txt").string();
    ullm::test::ScriptedClient s;
    s.provider->push_tool_call("a__write_file", {{"path", a_file}, {"content", "to a"}});
    s.provider->push_tool_call("b__write_file", {{"path", b_file}, {"content", "to b"}});
    s.provider->push_text("Both written.");
    auto conversation = s.client.conversation({.tools = set});
    CHECK(conversation.send("write both").text == "Both written.");
    CHECK(read_file(a_file) == "to a");
    CHECK(read_file(b_file) == "to b");

    // A clash that prefixing cannot resolve (the same alias twice) is refused, not thrown.
    const auto twice = ullm::mcp_tools({a, a});
    CHECK(twice.tools.size() == names.size() / 2);
    REQUIRE_FALSE(twice.rejected.empty());
    CHECK(twice.rejected[0].code == ullm::ErrorCode::duplicate_tool_name);
    a.close();
    b.close();
}

TEST_CASE("a server's changed tool list reaches the conversation's next turn", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    std::atomic<int> announced{0};
    auto options = ullm::test::misbehaving_server("changing");
    options.on_tools_changed = [&] { ++announced; };
    auto client = ullm::McpClient::spawn(options);
    ullm::test::ScriptedClient s;
    auto conversation = s.client.conversation({.tools = ullm::mcp_tools(client)});
    CHECK(announced == 1);
    REQUIRE(client.tools_changed());
    CHECK(names_of(conversation.tools()) == std::vector<std::string>{"slow", "fast"});

    conversation.set_tools(ullm::mcp_tools(client));
    CHECK_FALSE(client.tools_changed());
    s.provider->push_tool_call("added", json::object());
    s.provider->push_text("Used it.");
    CHECK(conversation.send("use the new tool").text == "Used it.");
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 1);
    CHECK(results[0].result == "answer of added");
    const auto requests = s.provider->requests();
    std::vector<std::string> offered;
    for (const auto& tool : requests[0].tools) offered.push_back(tool.name);
    CHECK(offered == std::vector<std::string>{"slow", "fast", "added"});
    client.close();
}

TEST_CASE("mcp_tools refuses tools whose schemas break the define_tool rules, one by one",
          "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(ullm::test::misbehaving_server("bad-tools"));
    const auto set = ullm::mcp_tools(client, {.taken_names = {}});
    const auto names = names_of(set.tools);
    CHECK(contains(names, "good"));
    CHECK(contains(names, "misbehaving_bad-tools__a_b"));  // "a.b" is not a valid name
    const auto long_name =
        std::find_if(names.begin(), names.end(), [](const auto& n) { return n.size() == 64; });
    REQUIRE(long_name != names.end());  // 100 characters: cut, with a hash
    const auto& long_tool = *std::find_if(set.tools.begin(), set.tools.end(),
                                          [&](const auto& t) { return t.name() == *long_name; });
    CHECK(long_tool.description().find("misbehaving/bad-tools") != std::string::npos);

    std::map<std::string, ullm::ErrorCode> rejected;
    for (const auto& tool : set.rejected) rejected[tool.name] = tool.code;
    CHECK(rejected.at("records") == ullm::ErrorCode::unsupported_schema_keyword);
    CHECK(rejected.at("untyped") == ullm::ErrorCode::invalid_tool_schema);
    CHECK(rejected.at("needs-task") == ullm::ErrorCode::unsupported_option);
    CHECK(set.rejected.size() == 3);

    // The good tool still works, its arguments checked strictly first.
    ullm::ToolContext context;
    const auto& good = *std::find_if(set.tools.begin(), set.tools.end(),
                                     [](const auto& t) { return t.name() == "good"; });
    CHECK(good.execute({{"x", 1}}, context) == "answer of good");
    CHECK(ullm::test::error_code_of([&] {
              (void)good.execute({{"x", "one"}}, context);
          }) == "invalid_tool_arguments");

    // A name the conversation already has is prefixed.
    const auto beside = ullm::mcp_tools(client, {.taken_names = {"good"}});
    CHECK(contains(names_of(beside.tools), "misbehaving_bad-tools__good"));
    client.close();
}

TEST_CASE("a dialog calls a tool of server-everything through dialog_tools", "[mcp]") {
    ullm::test::NoLeaks no_leaks;
    auto client = ullm::McpClient::spawn(ullm::test::everything_server());
    auto space = std::make_shared<ullm::CellSpace>();
    ullm::test::ScriptedClient s;
    s.provider->push_tool_call("echo", {{"message", "from a dialog"}}, "", "call_d");
    s.provider->push_tool_call("get-sum", {{"a", "x"}, {"b", 1}}, "", "call_bad");
    s.provider->push_text("Echoed.");
    {
        ullm::Dialog dialog(s.client, space,
                            {.tools = ullm::dialog_tools(ullm::mcp_tools(client).tools, *space),
                             .builtin_tools = false});
        const auto turn = dialog.send("alice", "echo something");
        CHECK(turn.error_code.empty());
        const auto transcript = dialog.transcript("alice");
        REQUIRE(transcript.size() == 6);
        const auto echoed = transcript[2].tool_results();
        REQUIRE(echoed.size() == 1);
        CHECK_FALSE(echoed[0].is_error);
        CHECK(echoed[0].result.dump().find("Echo: from a dialog") != std::string::npos);
        const auto refused = transcript[4].tool_results();
        REQUIRE(refused.size() == 1);
        CHECK(refused[0].is_error);  // checked before the server sees it
    }
    client.close();
}

}  // namespace mcp_tools_test
