// Turns that end early or differently: sequential tool rounds, interrupted turns kept with every
// call answered, tools that end the turn, appended transcripts, and the options a dialog uses.

#include <ullm/conversation/conversation.hpp>

#include <ullm/core/error.hpp>
#include <ullm/store/memory_session_store.hpp>
#include <ullm/testing/scripted_provider.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/concurrency_counter.hpp"
#include "support/error_code.hpp"
#include "support/scripted_client.hpp"
#include "support/shaped_conversation.hpp"

namespace conversation_interrupt_test {

using namespace std::chrono_literals;
using ullm::json;

using ullm::test::error_code_of;
using ullm::test::parallel_calls;
using ullm::test::tool_running;
using ullm::test::wait_until;
using Scripted = ullm::test::ScriptedClient;
using R = ullm::Role;

namespace {

std::vector<ullm::Role> roles(const std::vector<ullm::Message>& messages) {
    std::vector<ullm::Role> out;
    for (const auto& message : messages) out.push_back(message.role);
    return out;
}

// Records the order in which tool bodies start and finish.
struct Journal {
    std::mutex mutex;
    std::vector<std::string> entries;
    void add(std::string entry) {
        std::lock_guard lock(mutex);
        entries.push_back(std::move(entry));
    }
    std::vector<std::string> get() {
        std::lock_guard lock(mutex);
        return entries;
    }
};

// A scripted client whose conversations persist in a memory store.
struct Stored {
    Scripted scripted;
    std::shared_ptr<ullm::MemorySessionStore> store = std::make_shared<ullm::MemorySessionStore>();
    ullm::Client client{{.default_model = "scripted/model-a",
                         .providers = {scripted.provider},
                         .session_store = store}};
};

// Keeps the interrupted turn and says what happened in an assistant message (none for a
// cancel).
std::optional<ullm::Message> say_what_failed(const ullm::InterruptedTurn& turn) {
    if (turn.code == "cancelled") return std::nullopt;
    return ullm::Message::assistant("failed: " + turn.code + " (" +
                                    std::to_string(turn.unrun_calls) + " unrun)");
}

}  // namespace

TEST_CASE("sequential tool calls run one after another, in call order", "[conversation]") {
    Scripted s;
    Journal journal;
    const auto step = [&](std::string name) {
        return tool_running(name, [&journal, name](const json&, ullm::ToolContext&) -> json {
            journal.add(name + " start");
            std::this_thread::sleep_for(20ms);
            journal.add(name + " end");
            return name;
        });
    };
    s.provider->push(
        parallel_calls({{"c1", "second", json::object()}, {"c2", "first", json::object()}}));
    s.provider->push_text("done");
    auto conversation = s.client.conversation(
        {.tools = {step("first"), step("second")}, .sequential_tool_calls = true});
    (void)conversation.send("go");
    CHECK(journal.get() ==
          std::vector<std::string>{"second start", "second end", "first start", "first end"});
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 2);
    CHECK(results[0].result == "second");
    CHECK(results[1].result == "first");
}

TEST_CASE("each sequential call gets its own deadline", "[conversation]") {
    Scripted s;
    const auto slow = [](std::string name) {
        return tool_running(name, [name](const json&, ullm::ToolContext& context) -> json {
            std::this_thread::sleep_for(150ms);
            return context.stop_requested() ? json("stopped") : json(name);
        });
    };
    s.provider->push(parallel_calls({{"c1", "a", json::object()}, {"c2", "b", json::object()}}));
    s.provider->push_text("done");
    // 150 ms each, 250 ms each allowed: a shared deadline would time out the second call.
    auto conversation = s.client.conversation({.tools = {slow("a"), slow("b")},
                                               .tool_execution_timeout = 250ms,
                                               .sequential_tool_calls = true});
    (void)conversation.send("go");
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 2);
    CHECK(results[0].result == "a");
    CHECK(results[1].result == "b");
}

TEST_CASE("a cancel keeps later sequential calls from starting and the kept turn answers all",
          "[conversation]") {
    Scripted s;
    std::stop_source cancel;
    std::atomic<bool> later_started{false};
    std::atomic<bool> stopped{false};
    auto waits = tool_running("waits", [&](const json&, ullm::ToolContext& context) -> json {
        cancel.request_stop();
        while (!context.stop_requested()) std::this_thread::sleep_for(1ms);
        stopped = true;
        return "late result";
    });
    auto later = tool_running("later", [&](const json&, ullm::ToolContext&) -> json {
        later_started = true;
        return "ran";
    });
    auto quick = tool_running(
        "quick", [](const json&, ullm::ToolContext&) -> json { return "quick result"; });
    s.provider->push(parallel_calls({{"c1", "quick", json::object()},
                                     {"c2", "waits", json::object()},
                                     {"c3", "later", json::object()}}));
    auto conversation = s.client.conversation({.tools = {quick, waits, later},
                                               .sequential_tool_calls = true,
                                               .on_interrupted_turn = say_what_failed});
    CHECK(error_code_of([&] { (void)conversation.send("go", {.stop = cancel.get_token()}); }) ==
          "cancelled");
    wait_until([&] { return stopped.load(); });
    CHECK_FALSE(later_started.load());
    const auto history = conversation.history();
    REQUIRE(roles(history) == std::vector<R>{R::user, R::assistant, R::tool});
    const auto results = history[2].tool_results();
    REQUIRE(results.size() == 3);
    CHECK(results[0].result == "quick result");
    CHECK_FALSE(results[0].is_error);
    for (std::size_t i = 1; i < 3; ++i) {
        CHECK(results[i].result == "Tool call cancelled");
        CHECK(results[i].is_error);
    }
    // The next turn sends the kept turn, every call paired with its result.
    s.provider->push_text("next");
    CHECK(conversation.send("again").text == "next");
    const auto request = s.provider->requests().back();
    REQUIRE(request.messages.size() == 4);
    CHECK(request.messages[2].tool_results().size() == 3);
}

TEST_CASE("without on_interrupted_turn a cancelled or failed turn commits nothing",
          "[conversation]") {
    Scripted s;
    s.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "Overloaded", 529, true)));
    auto conversation = s.client.conversation({.sequential_tool_calls = true});
    CHECK(error_code_of([&] { (void)conversation.send("hi"); }) == "provider_overloaded");
    CHECK(conversation.history().empty());
}

TEST_CASE("a failed turn kept by on_interrupted_turn ends with the callback's message",
          "[conversation]") {
    Scripted s;
    std::vector<ullm::InterruptedTurn> seen;
    auto echo = tool_running("echo", [](const json&, ullm::ToolContext&) -> json { return "ok"; });
    s.provider->push_tool_call("echo", json::object(), "", "c1");
    s.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "Overloaded", 529, true)));
    auto conversation = s.client.conversation(
        {.tools = {echo}, .on_interrupted_turn = [&](const ullm::InterruptedTurn& turn) {
             seen.push_back(turn);
             return say_what_failed(turn);
         }});
    CHECK(error_code_of([&] { (void)conversation.send("hi"); }) == "provider_overloaded");
    const auto history = conversation.history();
    CHECK(roles(history) == std::vector<R>{R::user, R::assistant, R::tool, R::assistant});
    CHECK(history.back().text() == "failed: provider_overloaded (0 unrun)");
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].message == "Overloaded");
    // Both requests were made; the failed one reported no usage but is a round all the same.
    CHECK(conversation.totals().rounds == 2);
    CHECK(conversation.totals().input_tokens == 0);
}

TEST_CASE("a turn failed by an exception that is no ullm::Error is kept as turn_failed",
          "[conversation]") {
    Scripted s;
    std::vector<ullm::InterruptedTurn> seen;
    auto echo = tool_running("echo", [](const json&, ullm::ToolContext&) -> json { return "ok"; });
    s.provider->push_tool_call("echo", json::object(), "", "c1");
    s.provider->push_text("never asked for");
    int rounds = 0;
    auto conversation = s.client.conversation({.system_context = [&]() -> std::string {
                                                   if (++rounds == 2)
                                                       throw std::runtime_error("the clock broke");
                                                   return "round " + std::to_string(rounds);
                                               },
                                               .tools = {echo},
                                               .on_interrupted_turn =
                                                   [&](const ullm::InterruptedTurn& turn) {
                                                       seen.push_back(turn);
                                                       return say_what_failed(turn);
                                                   }});
    CHECK_THROWS_WITH(conversation.send("hi"), "the clock broke");
    REQUIRE(seen.size() == 1);
    CHECK(seen[0].code == "turn_failed");
    CHECK(seen[0].message == "the clock broke");
    const auto history = conversation.history();
    CHECK(roles(history) == std::vector<R>{R::user, R::assistant, R::tool, R::assistant});
    CHECK(history.back().text() == "failed: turn_failed (0 unrun)");
    CHECK(s.provider->requests().size() == 1);
}

TEST_CASE("calls a failure left unrun are answered in a kept turn", "[conversation]") {
    Scripted s;
    auto echo = tool_running("echo", [](const json&, ullm::ToolContext&) -> json { return "ok"; });
    s.provider->push_tool_call("echo", json::object(), "", "c1");
    s.provider->push_tool_call("echo", json::object(), "", "c2");
    auto conversation = s.client.conversation(
        {.tools = {echo}, .max_tool_rounds = 1, .on_interrupted_turn = say_what_failed});
    CHECK(error_code_of([&] { (void)conversation.send("hi"); }) == "max_tool_rounds_exceeded");
    const auto history = conversation.history();
    REQUIRE(roles(history) ==
            std::vector<R>{R::user, R::assistant, R::tool, R::assistant, R::tool, R::assistant});
    const auto unrun = history[4].tool_results();
    REQUIRE(unrun.size() == 1);
    CHECK(unrun[0].tool_call_id == "c2");
    CHECK(unrun[0].is_error);
    CHECK(unrun[0].result.get<std::string>().rfind("Tool call not run: ", 0) == 0);
    CHECK(history.back().text() == "failed: max_tool_rounds_exceeded (1 unrun)");
}

TEST_CASE("a kept interrupted turn is persisted and a failing callback keeps nothing",
          "[conversation]") {
    Stored st;
    auto& s = st.scripted;
    auto& client = st.client;
    s.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "Overloaded", 529, true)));
    auto kept = client.conversation({.session_id = "kept", .on_interrupted_turn = say_what_failed});
    CHECK(error_code_of([&] { (void)kept.send("hi"); }) == "provider_overloaded");
    CHECK(client.conversation({.session_id = "kept"}).history().size() == 2);

    s.provider->push_error(std::make_exception_ptr(
        ullm::ProviderError(ullm::ErrorCode::provider_overloaded, "Overloaded", 529, true)));
    auto throwing = client.conversation(
        {.session_id = "throwing",
         .on_interrupted_turn = [](const ullm::InterruptedTurn&) -> std::optional<ullm::Message> {
             throw std::runtime_error("callback failed");
         }});
    CHECK(error_code_of([&] { (void)throwing.send("hi"); }) == "provider_overloaded");
    CHECK(throwing.history().empty());
}

TEST_CASE("a dropped stream is an interrupted turn", "[conversation]") {
    Scripted s;
    std::vector<std::string> codes;
    s.provider->push_text("never read");
    auto conversation =
        s.client.conversation({.on_interrupted_turn = [&](const ullm::InterruptedTurn& turn) {
            codes.push_back(turn.code);
            return std::optional<ullm::Message>();
        }});
    {
        auto stream = conversation.send_stream("hi");
        (void)stream.next();  // Takes the slot; then the stream is dropped.
    }
    CHECK(codes == std::vector<std::string>{"cancelled"});
    CHECK(roles(conversation.history()) == std::vector<R>{R::user});
}

TEST_CASE("a tool that sets end_turn ends the turn after its round", "[conversation]") {
    Scripted s;
    std::atomic<int> other_calls{0};
    auto finish = tool_running("finish", [](const json&, ullm::ToolContext& context) -> json {
        context.end_turn = true;
        return "stored";
    });
    auto other = tool_running("other", [&](const json&, ullm::ToolContext&) -> json {
        ++other_calls;
        return "also ran";
    });
    s.provider->push(
        parallel_calls({{"c1", "finish", json::object()}, {"c2", "other", json::object()}}));
    auto conversation = s.client.conversation({.tools = {finish, other}});
    const auto reply = conversation.send("go");
    CHECK(s.provider->requests().size() == 1);  // No further model request.
    CHECK(s.provider->remaining() == 0);
    CHECK(reply.tool_calls.size() == 2);
    CHECK(reply.tool_rounds == 1);
    CHECK(other_calls == 1);  // The other calls of the round still ran.
    CHECK(roles(reply.messages) == std::vector<R>{R::user, R::assistant, R::tool});
    CHECK(roles(conversation.history()) == std::vector<R>{R::user, R::assistant, R::tool});
}

TEST_CASE("append adds a transcript unchanged and the next turn pairs its tool results",
          "[conversation]") {
    Scripted s;
    auto conversation = s.client.conversation({});
    ullm::Message call = ullm::Message::assistant("");
    call.parts = {ullm::ToolCallPart{"call_7", "lookup", {{"q", "x"}}}};
    call.replay = ullm::ReplayState{"scripted", "model-a", {{"signature", "sig-1"}}};
    const std::vector<ullm::Message> transcript = {
        ullm::Message::user("look it up"), call,
        ullm::Message::tool_results({{"call_7", "lookup", {{"found", true}}, false}}),
        ullm::Message::assistant("found it")};
    conversation.append(transcript);
    CHECK(conversation.history().size() == 4);
    s.provider->push_text("and then");
    (void)conversation.send("more");
    const auto sent = s.provider->requests().at(0).messages;
    REQUIRE(sent.size() == 5);
    CHECK(sent[1].tool_calls().at(0).id == "call_7");
    CHECK(sent[1].replay == call.replay);  // Replay state is kept for the provider.
    CHECK(sent[2].tool_results().at(0).tool_call_id == "call_7");
    CHECK(sent[2].tool_results().at(0).result == json{{"found", true}});
}

TEST_CASE("append refuses what would break the transcript, with the message's path",
          "[conversation]") {
    Scripted s;
    auto conversation = s.client.conversation({});
    ullm::Message call = ullm::Message::assistant("");
    call.parts = {ullm::ToolCallPart{"call_1", "lookup", json::object()}};
    const auto path_of = [&](std::vector<ullm::Message> messages) -> std::string {
        try {
            conversation.append(std::move(messages));
        } catch (const ullm::InvalidMessageError& error) {
            return error.path();
        }
        return "accepted";
    };
    CHECK(path_of({ullm::Message::user("a"), ullm::Message::system("no")}) == "/1/role");
    CHECK(path_of({ullm::Message::user("a"), call}) == "/1");  // Left unanswered.
    CHECK(path_of({ullm::Message::user("a"), call,
                   ullm::Message::tool_results({{"other", "lookup", 1, false}})}) ==
          "/2/parts/0/tool_call_id");
    CHECK(path_of({ullm::Message::tool_results({{"call_1", "lookup", 1, false}})}) == "/0");
    CHECK(conversation.history().empty());
    CHECK(path_of({}) == "accepted");
}

TEST_CASE("an empty_reply_text shape replaces an empty final answer in reply and history",
          "[conversation]") {
    Scripted s;
    s.provider->push_text("");
    auto conversation =
        ullm::test::shaped_conversation(s.client, {}, {.empty_reply_text = "(no answer)"});
    CHECK(conversation.send("hi").text == "(no answer)");
    CHECK(conversation.history().back().text() == "(no answer)");
}

TEST_CASE("keep_tool_choice forces the tool choice in every round", "[conversation]") {
    Scripted s;
    auto echo = tool_running("echo", [](const json&, ullm::ToolContext& context) -> json {
        static std::atomic<int> calls{0};
        if (++calls == 2) context.end_turn = true;
        return "ok";
    });
    s.provider->push_tool_call("echo", json::object());
    s.provider->push_tool_call("echo", json::object());
    auto conversation = s.client.conversation(
        {.tools = {echo}, .tool_choice = ullm::ToolChoice::tool("echo"), .keep_tool_choice = true});
    (void)conversation.send("go");
    const auto requests = s.provider->requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[1].tool_choice == ullm::ToolChoice::tool("echo"));
}

TEST_CASE("use_session_store false neither restores nor persists", "[conversation]") {
    Stored st;
    auto& s = st.scripted;
    auto& store = st.store;
    auto& client = st.client;
    s.provider->push_text("stored");
    (void)client.conversation({.session_id = "s1"}).send("hi");
    auto memory_only = client.conversation({.session_id = "s1", .use_session_store = false});
    CHECK(memory_only.history().empty());
    s.provider->push_text("not stored");
    (void)memory_only.send("again");
    CHECK(store->get("", "s1")->version == 1);
}

TEST_CASE("a turn started by on_interrupted_turn on another thread is refused, not deadlocked",
          "[conversation]") {
    Scripted s;
    s.provider->push_text("never read");
    std::string inner_code;
    std::optional<ullm::Conversation> self;
    auto conversation = s.client.conversation(
        {.on_interrupted_turn = [&](const ullm::InterruptedTurn&) -> std::optional<ullm::Message> {
            inner_code = error_code_of([&] { (void)self->send("from the callback"); });
            return std::nullopt;
        }});
    self = conversation;
    auto stream = conversation.send_stream("hi");
    (void)stream.next();  // Takes the slot; no pull runs while another thread cancels.
    std::thread canceller([&] { stream.cancel(); });
    canceller.join();
    CHECK(inner_code == "conversation_busy");
    CHECK(roles(conversation.history()) == std::vector<R>{R::user});
    s.provider->push_text("after");
    CHECK(conversation.send("again").text == "after");
}

TEST_CASE("bytes that are not UTF-8 in a tool's result are repaired, and stored",
          "[conversation]") {
    Stored st;
    auto& s = st.scripted;
    auto& client = st.client;
    auto bad = tool_running("bad", [](const json&, ullm::ToolContext&) -> json {
        throw ullm::ToolResultError("broken \xff bytes");
    });
    s.provider->push_tool_call("bad", json::object());
    s.provider->push_text("ok");
    auto conversation = client.conversation({.session_id = "utf8", .tools = {bad}});
    CHECK(conversation.send("go").text == "ok");
    const auto result = conversation.history()[2].tool_results().at(0);
    CHECK(result.result == "broken \xef\xbf\xbd bytes");
    CHECK(client.conversation({.session_id = "utf8"}).history().size() == 4);
}

TEST_CASE("a user message that is not UTF-8 fails the turn with a snapshot error",
          "[conversation]") {
    Stored st;
    auto& s = st.scripted;
    auto& client = st.client;
    s.provider->push_text("ok");
    auto conversation = client.conversation({.session_id = "utf8-user"});
    CHECK(error_code_of([&] { (void)conversation.send("bad \xff"); }) ==
          "invalid_conversation_snapshot");
    CHECK(conversation.history().empty());
}

TEST_CASE("a session removed from the store starts afresh after one refused turn",
          "[conversation]") {
    Stored st;
    auto& s = st.scripted;
    auto& store = st.store;
    auto& client = st.client;
    auto conversation = client.conversation({.session_id = "removed"});
    s.provider->push_text("one");
    (void)conversation.send("first");
    REQUIRE(store->remove("", "removed"));
    s.provider->push_text("refused");
    CHECK(error_code_of([&] { (void)conversation.send("second"); }) == "session_store_conflict");
    CHECK(conversation.history().empty());  // The removal is honoured, not undone.
    s.provider->push_text("three");
    CHECK(conversation.send("third").text == "three");
    // The refused turn's spend re-created the session (version 1); the third turn is version 2.
    CHECK(store->get("", "removed")->version == 2);
    CHECK(conversation.totals().rounds == 2);
    CHECK(client.conversation({.session_id = "removed"}).history().size() == 2);
}

TEST_CASE("tool callbacks run on the client's bounded pool of threads, reused",
          "[conversation][tool_pool]") {
    auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
    const ullm::Client client(
        {.default_model = "scripted/model-a", .providers = {provider}, .max_tool_threads = 2});
    std::mutex mutex;
    std::set<std::thread::id> threads;
    ullm::test::ConcurrencyCounter running;
    auto work = tool_running("work", [&](const json&, ullm::ToolContext&) -> json {
        const auto counted = running.enter();
        {
            const std::lock_guard lock(mutex);
            threads.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(20ms);
        return "done";
    });
    auto conversation = client.conversation({.tools = {work}, .max_parallel_tool_calls = 8});
    for (int turn = 0; turn < 2; ++turn) {
        std::vector<ullm::ToolCallPart> calls;
        for (int i = 0; i < 6; ++i) {
            calls.push_back(
                {"t" + std::to_string(turn) + "c" + std::to_string(i), "work", json::object()});
        }
        provider->push(parallel_calls(calls));
        provider->push_text("ok");
        CHECK(conversation.send("go").text == "ok");
    }
    CHECK(running.most() <= 2);  // eight may run at once by the conversation, two by the pool
    CHECK(threads.size() <= 2);
    for (const auto& message : conversation.history()) {
        for (const auto& result : message.tool_results()) CHECK_FALSE(result.is_error);
    }
    CHECK(error_code_of([&] {
              const ullm::Client none({.providers = {provider}, .max_tool_threads = 0});
          }) == "invalid_limits");
}

TEST_CASE("a tool that runs a turn of its own never waits behind itself for the pool",
          "[conversation][tool_pool]") {
    // Agents calling agents: with one pool thread, the outer tool holds it while the turn it
    // runs needs the pool for its own tool, two levels down. The pool lends a thread to each
    // level that waits.
    auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
    const ullm::Client client(
        {.default_model = "scripted/model-a", .providers = {provider}, .max_tool_threads = 1});
    std::atomic<int> leaves{0};
    auto leaf = tool_running("leaf", [&](const json&, ullm::ToolContext&) -> json {
        ++leaves;
        return "leaf done";
    });
    const auto delegate_to = [&](const std::string& name, const ullm::Tool& inner) {
        return tool_running(name, [&client, inner](const json&, ullm::ToolContext&) -> json {
            // The deadline only keeps a regression from hanging the test.
            auto nested = client.conversation({.tools = {inner}, .tool_execution_timeout = 5s});
            return nested.send("go on").text;
        });
    };
    auto middle = delegate_to("middle", leaf);
    auto outer = delegate_to("outer", middle);
    provider->push(parallel_calls({{"o", "outer", json::object()}}));
    provider->push(parallel_calls({{"m", "middle", json::object()}}));
    provider->push(parallel_calls({{"l", "leaf", json::object()}}));
    provider->push_text("middle done");
    provider->push_text("outer done");
    provider->push_text("all done");
    auto conversation = client.conversation({.tools = {outer}});
    CHECK(conversation.send("start").text == "all done");
    CHECK(leaves.load() == 1);
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 1);
    CHECK_FALSE(results[0].is_error);
    CHECK(results[0].result == "outer done");

    // The lent threads end once nothing waits: one thread runs the calls of a round again.
    ullm::test::ConcurrencyCounter running;
    auto work = tool_running("work", [&](const json&, ullm::ToolContext&) -> json {
        const auto counted = running.enter();
        std::this_thread::sleep_for(10ms);
        return "done";
    });
    std::vector<ullm::ToolCallPart> four;
    for (int i = 0; i < 4; ++i) four.push_back({"w" + std::to_string(i), "work", json::object()});
    provider->push(parallel_calls(four));
    provider->push_text("ok");
    auto plain = client.conversation({.tools = {work}, .max_parallel_tool_calls = 4});
    CHECK(plain.send("go").text == "ok");
    CHECK(running.most() == 1);
}

TEST_CASE("a tool call whose deadline passes while it waits for the pool never runs",
          "[conversation][tool_pool]") {
    auto provider = std::make_shared<ullm::ScriptedProvider>("scripted");
    const ullm::Client client(
        {.default_model = "scripted/model-a", .providers = {provider}, .max_tool_threads = 1});
    std::atomic<int> ran{0};
    std::atomic<bool> release{false};
    auto stubborn = tool_running("stubborn", [&](const json&, ullm::ToolContext&) -> json {
        ++ran;
        // Ignores its stop token: it holds the pool's one thread past its deadline.
        while (!release.load()) std::this_thread::sleep_for(1ms);
        return "late";
    });
    provider->push(
        parallel_calls({{"a", "stubborn", json::object()}, {"b", "stubborn", json::object()}}));
    provider->push_text("done");
    auto conversation = client.conversation({.tools = {stubborn}, .tool_execution_timeout = 50ms});
    std::thread releaser([&] {
        std::this_thread::sleep_for(300ms);
        release = true;
    });
    CHECK(conversation.send("go").text == "done");
    releaser.join();
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 2);
    CHECK(results[0].is_error);         // timed out while running
    CHECK(results[1].is_error);         // timed out while waiting for the thread
    std::this_thread::sleep_for(50ms);  // the pool's thread is free again: "b" would run now
    CHECK(ran.load() == 1);
}

TEST_CASE("max_parallel_tool_calls bounds how many calls of a round run at once",
          "[conversation]") {
    Scripted s;
    ullm::test::ConcurrencyCounter running;
    auto work = tool_running("work", [&](const json&, ullm::ToolContext&) -> json {
        const auto counted = running.enter();
        // Wait (briefly) for a partner, so that the bound is reached however slow the machine.
        const auto give_up = std::chrono::steady_clock::now() + 500ms;
        while (running.now() < 2 && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(1ms);
        }
        std::this_thread::sleep_for(5ms);
        return "done";
    });
    std::vector<ullm::ToolCallPart> six;
    for (int i = 0; i < 6; ++i) six.push_back({"c" + std::to_string(i), "work", json::object()});
    s.provider->push(parallel_calls(six));
    s.provider->push_text("ok");
    auto conversation = s.client.conversation({.tools = {work}, .max_parallel_tool_calls = 2});
    (void)conversation.send("go");
    CHECK(running.most() == 2);
    const auto results = conversation.history()[2].tool_results();
    REQUIRE(results.size() == 6);
    for (int i = 0; i < 6; ++i)
        CHECK(results[static_cast<std::size_t>(i)].tool_call_id == "c" + std::to_string(i));
    CHECK(error_code_of([&] { (void)s.client.conversation({.max_parallel_tool_calls = 0}); }) ==
          "invalid_max_parallel_tool_calls");
    CHECK(error_code_of([&] { (void)s.client.conversation({.max_parallel_tool_calls = 257}); }) ==
          "invalid_max_parallel_tool_calls");
}

namespace {

// A scripted provider whose answer ignores the stop token: its decoding returns only when
// released, as a server may answer a request the client has already given up on.
class DeafProvider final : public ullm::Provider {
public:
    std::shared_ptr<ullm::ScriptedProvider> inner =
        std::make_shared<ullm::ScriptedProvider>("deaf");
    mutable std::atomic<bool> entered{false};  // set by the const decode()
    std::atomic<bool> release{false};

    [[nodiscard]] std::string_view name() const noexcept override { return "deaf"; }
    [[nodiscard]] ullm::ProviderCapabilities capabilities(std::string_view model) const override {
        return inner->capabilities(model);
    }
    [[nodiscard]] ullm::HttpRequest encode(const ullm::ChatRequest& request,
                                           bool stream) const override {
        return inner->encode(request, stream);
    }
    [[nodiscard]] ullm::ChatResponse decode(const ullm::HttpResponse& response,
                                            const ullm::ChatRequest& request) const override {
        entered = true;
        while (!release) std::this_thread::sleep_for(1ms);
        return inner->decode(response, request);
    }
    [[nodiscard]] std::unique_ptr<ullm::StreamDecoder> stream_decoder(
        const ullm::ChatRequest& request) const override {
        return inner->stream_decoder(request);
    }
    [[nodiscard]] ullm::Transport* transport() const noexcept override {
        return inner->transport();
    }
    [[nodiscard]] const ullm::RetryPolicy* retry_policy() const noexcept override {
        return inner->retry_policy();
    }
};

}  // namespace

TEST_CASE("a reply that arrives after the turn was cancelled is counted, never stored",
          "[conversation]") {
    auto deaf = std::make_shared<DeafProvider>();
    deaf->inner->push_text("too late", {12, 5, 0, 0, 0, std::nullopt});
    const ullm::Client client({.default_model = "deaf/model", .providers = {deaf}});
    auto conversation = client.conversation({});
    std::stop_source stop;
    std::string code;
    std::thread turn([&] {
        code = error_code_of([&] { (void)conversation.send("hello", {.stop = stop.get_token()}); });
    });
    wait_until([&] { return deaf->entered.load(); });
    stop.request_stop();
    deaf->release = true;
    turn.join();
    CHECK(code == "cancelled");
    CHECK(conversation.history().empty());
    CHECK(conversation.totals().input_tokens == 12);  // What it spent still counts.
    CHECK(conversation.totals().output_tokens == 5);
}

}  // namespace conversation_interrupt_test
