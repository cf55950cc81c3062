// Totals count every model request made, and spend is never lost: not by a streamed round
// cancelled after its request went out, not by turns that lose a race for one session id.

#include <ullm/client/client.hpp>
#include <ullm/conversation/conversation.hpp>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/scripted_client.hpp"

namespace conversation_totals_test {

namespace {

// A scripted model that answers every request with "ok" at a fixed usage and cost, counting
// the requests it receives.
std::shared_ptr<ullm::ScriptedProvider> counting_model(std::atomic<int>& requests) {
    auto model = std::make_shared<ullm::ScriptedProvider>("counting");
    model->answer_with([&requests](const ullm::ChatRequest&) {
        ++requests;
        ullm::ChatResponse response;
        response.message = ullm::Message::assistant("ok");
        response.text = "ok";
        response.usage = {10, 5, 0, 0, 0, 0.001};
        return ullm::ScriptedTurn{std::move(response)};
    });
    return model;
}

}  // namespace

TEST_CASE("a streamed round cancelled after its request went out counts as a round",
          "[conversation][totals]") {
    ullm::test::ScriptedClient scripted;
    auto conversation = scripted.client.conversation({});
    scripted.provider->push_text("one two three four five six");
    auto stream = conversation.send_stream("go");
    auto first = stream.next();
    REQUIRE(first.has_value());
    stream.cancel();
    CHECK(scripted.provider->requests().size() == 1);
    CHECK(conversation.totals().rounds == 1);
    CHECK(conversation.history().empty());
    // A finished round is counted once, not again when it answers.
    scripted.provider->push_text("fine");
    (void)conversation.send("again");
    CHECK(conversation.totals().rounds == 2);
}

TEST_CASE("racing writers of one session id lose no spend and no committed message",
          "[conversation][totals][session_store]") {
    std::atomic<int> requests{0};
    const auto model = counting_model(requests);
    auto store = std::make_shared<ullm::MemorySessionStore>();
    constexpr int writers = 8;
    constexpr int turns_each = 25;
    std::atomic<int> conflicts{0};
    std::atomic<int> other_failures{0};
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
        threads.emplace_back([&] {
            const ullm::Client client(
                {.default_model = "counting/m", .providers = {model}, .session_store = store});
            auto conversation = client.conversation({.session_id = "shared"});
            for (int done = 0; done < turns_each;) {
                try {
                    (void)conversation.send("hello");
                    ++done;
                } catch (const ullm::SessionStoreConflictError&) {
                    ++conflicts;  // the conversation took the winner's state: retry the turn
                } catch (...) {
                    ++other_failures;
                    return;
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    REQUIRE(other_failures == 0);

    const auto stored = store->get("", "shared");
    REQUIRE(stored.has_value());
    const auto snapshot = ullm::parse_snapshot_text(stored->snapshot);
    INFO(conflicts << " turns lost a race and were retried");
    // Every committed turn is in the history, and every request made is in the totals, the
    // ones of turns that lost a race included.
    CHECK(snapshot.messages.size() == std::size_t{2} * writers * turns_each);
    CHECK(snapshot.totals.rounds == requests);
    CHECK(snapshot.totals.input_tokens == 10 * requests);
    CHECK(std::abs(snapshot.totals.cost_usd - 0.001 * requests) < 1e-9);
}

}  // namespace conversation_totals_test
