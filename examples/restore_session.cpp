// ullm sessions: persist a conversation in SQLite and pick it up again later by its id.
//
// A client with a session store saves every conversation after each committed turn: its
// history and its running totals. A later client (here: a second one in the same program,
// as after a restart) opens the same database, asks for a conversation with the same session
// id, and gets it back. What a conversation does (system prompt, model, tools, budget) comes
// from the options you pass each time, never from the store. Two handles that write the same
// session meet a version conflict; a damaged snapshot is refused whole. A scripted provider
// plays the model.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/price_table.hpp>
#include <ullm/store/sqlite_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>

#include <unistd.h>

namespace {

// A client over `model` whose conversations persist in the SQLite database at `path`.
ullm::Client client_with_store(std::shared_ptr<ullm::ScriptedProvider> model,
                               const std::string& path) {
    // $2 per million tokens in, $8 out, so that the totals show a spend.
    const auto prices =
        std::make_shared<const ullm::PriceTable>(ullm::PriceTable::builtin().with_overrides(
            ullm::json{{"models",
                        {{"scripted/demo",
                          {{"input", 2.0}, {"output", 8.0}, {"lastUpdated", "2025-11-01"}}}}}}));
    return ullm::Client({.default_model = "scripted/demo",
                         .providers = {std::move(model)},
                         .prices = prices,
                         .session_store = ullm::SqliteSessionStore::open(path)});
}

}  // namespace

int main() {
    const auto directory =
        std::filesystem::temp_directory_path() / ("ullm-restore-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory);
    const auto database = (directory / "sessions.db").string();
    // The same options each time: the session id is what finds the stored conversation.
    const ullm::ConversationOptions options{.session_id = "trip-to-lisbon",
                                            .system = "You help plan trips. Be brief."};
    try {
        {
            // The first run: two turns, each saved as it is committed.
            auto model = std::make_shared<ullm::ScriptedProvider>();
            model->push_text("Late spring: warm, not yet crowded.",
                             {.input_tokens = 120, .output_tokens = 40});
            model->push_text("Three days covers Alfama, Belém and Sintra.",
                             {.input_tokens = 180, .output_tokens = 50});
            const auto client = client_with_store(model, database);
            auto conversation = client.conversation(options);
            for (const char* question : {"When should I visit Lisbon?", "How many days?"}) {
                fmt::print("user> {}\nassistant> {}\n", question, conversation.send(question).text);
            }
            fmt::print("saved \"{}\": version {}\n\n", conversation.id(), conversation.version());
        }  // The client and its store close here, as when a program exits.

        // A later run: a new client on the same database, the same session id.
        auto model = std::make_shared<ullm::ScriptedProvider>();
        model->push_text("Take the train from Rossio.", {.input_tokens = 260, .output_tokens = 30});
        const auto client = client_with_store(model, database);
        auto conversation = client.conversation(options);

        const auto totals = conversation.totals();
        fmt::print("restored \"{}\": {} messages, version {}\n", conversation.id(),
                   conversation.history().size(), conversation.version());
        fmt::print("totals so far: {} rounds, {} tokens in, {} out, ${:.6f}\n", totals.rounds,
                   totals.input_tokens, totals.output_tokens, totals.cost_usd);
        for (const auto& message : conversation.history()) {
            fmt::print("  {}: {}\n", ullm::to_string(message.role), message.text());
        }

        // The conversation goes on where it stopped: the model sees the whole history.
        const auto reply = conversation.send("And to Sintra?");
        fmt::print("user> And to Sintra?\nassistant> {}\n", reply.text);
        fmt::print("the request carried {} messages, the session is now version {}, ${:.6f}\n",
                   model->requests().at(0).messages.size(), conversation.version(),
                   conversation.totals().cost_usd);

        // Two handles on one session, as two processes would hold: the first to commit wins.
        // The other's turn is refused: its messages are dropped, its spend is stored (a version
        // of its own), and the handle takes the stored state, so that sending again works.
        auto other = client.conversation(options);
        model->push_text("About forty minutes.", {.input_tokens = 300, .output_tokens = 10});
        for (int i = 0; i < 2; ++i) {
            model->push_text("Yes, an easy day trip.", {.input_tokens = 320, .output_tokens = 10});
        }
        (void)conversation.send("How long is the ride?");
        try {
            (void)other.send("Is it a day trip?");
        } catch (const ullm::SessionStoreConflictError& conflict) {
            fmt::print("conflict: the write expected version {}, the store holds {}\n",
                       conflict.expected_version(), conflict.actual_version());
        }
        const auto retried = other.send("Is it a day trip?");
        fmt::print("sent again: {} (version {}, {} messages, {} rounds paid)\n", retried.text,
                   other.version(), other.history().size(), other.totals().rounds);

        // A snapshot that breaks a rule is refused whole, with the JSON path that failed, and
        // the record is left as it is.
        const auto store = client.session_store();
        auto damaged = ullm::json::parse(store->get("", "trip-to-lisbon")->snapshot);
        damaged["session_id"] = "damaged-trip";
        damaged["messages"][1]["role"] = "robot";
        (void)store->put("", "damaged-trip", damaged.dump(), 0);
        try {
            (void)client.conversation({.session_id = "damaged-trip"});
        } catch (const ullm::InvalidConversationSnapshotError& error) {
            fmt::print("refused: {} at {}: {}\n", error.code(), error.path(), error.constraint());
        }

        // The store can list what it holds (per tenant; "" is the default tenant).
        for (const auto& session : store->list("").sessions) {
            fmt::print("stored session: {} (version {})\n", session.session_id, session.version);
        }
    } catch (const std::exception& error) {
        std::fprintf(stderr, "restore example failed: %s\n", error.what());
        std::filesystem::remove_all(directory);
        return 1;
    }
    std::filesystem::remove_all(directory);
    return 0;
}
