// ullm example: a conversation gets the tools of an MCP server.
//
// Starts the reference filesystem server (`@modelcontextprotocol/server-filesystem`, run with
// node over stdio) allowed into a fresh directory, hands its tools to a conversation with one
// line, and lets a model write a file and read it back. The model here is the scripted
// provider, so that the example runs offline; with a real model only the client changes.
//
// Usage: ullm_example_mcp_filesystem NODE SERVER_JS  (ctest passes both).

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/mcp/mcp_client.hpp>
#include <ullm/mcp/mcp_tools.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s NODE SERVER_JS\n", argv[0]);
        return 2;
    }
    char pattern[] = "/tmp/ullm-mcp-example-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made == nullptr) return 1;
    const std::filesystem::path root = std::filesystem::canonical(made);
    int status = 0;
    try {
        // The server, allowed into `root` only.
        auto files = ullm::McpClient::spawn({.command = {argv[1], argv[2], root.string()}});
        fmt::print("server: {} {} (protocol {})\n", files.server_info().value("name", ""),
                   files.server_info().value("version", ""), files.protocol_version());

        // A scripted model that writes a note and reads it back.
        auto model = std::make_shared<ullm::ScriptedProvider>("scripted");
        const std::string note = (root / "note.txt").string();
        model->push_tool_call("write_file", {{"path", note}, {"content", "Buy milk"}});
        model->push_tool_call("read_text_file", {{"path", note}});
        model->push_text("Your note says: Buy milk.");
        ullm::Client client({.default_model = "scripted/model", .providers = {model}});

        // The server's tools as ullm tools, checked like define_tool's; then one line gives
        // them to a conversation.
        const auto tools = ullm::mcp_tools(files);
        fmt::print("tools: {}, refused: {}\n", tools.tools.size(), tools.rejected.size());
        auto conversation = client.conversation({.tools = tools});

        const auto reply = conversation.send("Note that I need milk, then read it to me.");
        for (const auto& message : conversation.history()) {
            for (const auto& call : message.tool_calls())
                fmt::print("model calls {}({})\n", call.name, call.arguments.dump());
            for (const auto& result : message.tool_results())
                fmt::print("  -> {}{}\n", result.is_error ? "error: " : "", result.result.dump());
        }
        fmt::print("assistant> {}\n", reply.text);
        std::ifstream in(root / "note.txt");
        std::string on_disk;
        std::getline(in, on_disk);
        fmt::print("on disk: {}\n", on_disk);
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "failed (%s): %s\n", error.code().c_str(), error.what());
        status = 1;
    }
    std::filesystem::remove_all(root);
    return status;
}
