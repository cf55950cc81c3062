// ullm sessions across processes: two processes continue one conversation through PostgreSQL.
//
// The program starts a throwaway PostgreSQL server (initdb in a temporary directory, 127.0.0.1,
// an ephemeral port) and an in-process HTTP server that plays the OpenAI Chat Completions API.
// It runs a turn, then starts a second process (itself, with `--continue`) that finds the
// session in PostgreSQL by its tenant and id and runs the next turn. Back in the first process,
// its conversation handle is one turn behind: its write meets a version conflict instead of
// overwriting the other process's turn, the handle takes the stored state, and the turn is sent
// again. Every message of both processes is in the one history.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/openai_chat.hpp>
#include <ullm/store/postgres_session_store.hpp>

#include <fmt/core.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "support/postgres_server.hpp"
#include "support/test_server.hpp"

extern char** environ;

namespace {

// What every process passes: the session is found by these, the rest is the caller's.
ullm::ConversationOptions trip_options() {
    return {.session_id = "trip-42", .tenant = "acme", .system = "You plan trips. Be brief."};
}

// A client whose conversations persist in the PostgreSQL database at `connection`.
ullm::Client client_for(const std::string& connection, const std::string& model_url) {
    return ullm::Client(
        {.default_model = "gpt-4o-mini",
         .providers = {std::make_shared<ullm::OpenAiChatProvider>(
             ullm::OpenAiChatOptions{.api_key = "sk-offline-example", .base_url = model_url})},
         .session_store = ullm::PostgresSessionStore::open({.connection_string = connection})});
}

// The model: answers the user's last message, naming how many messages it was sent.
ullm::test::ScriptedResponse answer(const ullm::test::RecordedRequest& request) {
    const ullm::json body = ullm::json::parse(request.body);
    const std::string question = body["messages"].back()["content"].get<std::string>();
    const std::string text =
        "(" + std::to_string(body["messages"].size()) + " messages) About " + question;
    const ullm::json reply = {{"model", "gpt-4o-mini"},
                              {"choices",
                               {{{"index", 0},
                                 {"message", {{"role", "assistant"}, {"content", text}}},
                                 {"finish_reason", "stop"}}}},
                              {"usage", {{"prompt_tokens", 20}, {"completion_tokens", 6}}}};
    return {.headers = {{"Content-Type", "application/json"}}, .body = reply.dump()};
}

// The second process: restores the session and runs one turn.
int continue_session(const std::string& connection, const std::string& model_url) {
    auto conversation = client_for(connection, model_url).conversation(trip_options());
    fmt::print("process 2: restored {} messages at version {}\n", conversation.history().size(),
               conversation.version());
    const auto reply = conversation.send("Trains from Lisbon to Porto?");
    fmt::print("process 2: {}\n", reply.text);
    fmt::print("process 2: stored version {}\n", conversation.version());
    return 0;
}

// Runs this program again with `arguments`, its output on ours; its exit status.
int run_self(const char* self, std::vector<std::string> arguments) {
    std::vector<char*> argv{const_cast<char*>(self)};
    for (auto& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    pid_t child = -1;
    if (posix_spawn(&child, self, nullptr, nullptr, argv.data(), environ) != 0) return -1;
    int status = 0;
    if (waitpid(child, &status, 0) != child) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) try {
    if (argc == 4 && std::string(argv[1]) == "--continue") {
        return continue_session(argv[2], argv[3]);
    }
    auto& postgres = ullm::test::PostgresServer::instance();
    const std::string connection = postgres.connection_string(postgres.create_database());
    ullm::test::TestServer model;
    model.set_handler(answer);
    const std::string model_url = model.base_url() + "/v1";

    auto conversation = client_for(connection, model_url).conversation(trip_options());
    fmt::print("process 1: {}\n", conversation.send("A weekend in Lisbon?").text);
    fmt::print("process 1: stored version {}\n", conversation.version());

    const int status = run_self(argv[0], {"--continue", connection, model_url});
    if (status != 0) {
        fmt::print("process 2 failed (status {})\n", status);
        return 1;
    }

    // This handle has not seen process 2's turn: its write is refused, never a lost update.
    try {
        (void)conversation.send("And the beaches?");
    } catch (const ullm::SessionStoreConflictError& conflict) {
        fmt::print("process 1: {} (expected version {}, found {})\n", conflict.code(),
                   conflict.expected_version(), conflict.actual_version());
    }
    // The conflict left the handle with the stored state; the same turn now goes through.
    // (Version 3 is the refused turn's spend: a failed turn's tokens still count.)
    fmt::print("process 1: {}\n", conversation.send("And the beaches?").text);
    fmt::print("process 1: stored version {}\n", conversation.version());
    for (const auto& message : conversation.history()) {
        fmt::print("  {}: {}\n", ullm::to_string(message.role), message.text());
    }
    return 0;
} catch (const std::exception& error) {
    std::fprintf(stderr, "example failed: %s\n", error.what());
    return 1;
}
