#pragma once

// Internal to the conversation layer: the state a Conversation handle shares with its turns
// (conversation.cpp is the facade and the option checks, turn_runner.cpp runs the turns).

#include <ullm/conversation/conversation.hpp>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/conversation/turn_queue.hpp>
#include <ullm/core/error.hpp>
#include <ullm/store/session_store.hpp>
#include <ullm/tools/tool_registry.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "snapshot_checks.hpp"
#include "turn_hooks.hpp"

namespace ullm {

struct Conversation::State {
    Client client;
    ConversationOptions options;
    Route route;
    std::string model_spec;  ///< "provider/model": every round goes to the routed provider.
    std::shared_ptr<TurnQueue> queue = std::make_shared<TurnQueue>();
    std::shared_ptr<SessionStore> store;
    /// What the conversation's owner adds to its turns and its stored form; null for most.
    std::shared_ptr<detail::TurnHooks> hooks;

    mutable std::mutex mutex;  ///< Guards the committed state below.
    /// The tools (replaced by `set_tools`); a turn takes them as it starts.
    std::shared_ptr<const ToolRegistry> registry;
    std::vector<Message> history;
    ConversationTotals totals;
    std::uint64_t version = 0;
    std::chrono::system_clock::time_point created_at;
    std::chrono::system_clock::time_point updated_at;
    /// Spend inside `totals` that the store does not hold yet (see `add_spend`).
    ConversationTotals unstored;

    explicit State(const Client& owner) : client(owner) {}

    // Writes history and totals to the store (when there is one) as the next version; the
    // caller holds the turn slot or runs exclusively, so no other writer of this conversation
    // runs. The first `checked` messages were checked before (they were written or read), so
    // only those after them are. Returns the version now stored.
    std::uint64_t persist(const std::vector<Message>& messages, const ConversationTotals& sums,
                          std::chrono::system_clock::time_point now, std::size_t checked) {
        std::uint64_t expected = 0;
        std::chrono::system_clock::time_point created;
        {
            std::lock_guard lock(mutex);
            expected = version;
            created = created_at;
        }
        if (!store) return expected;
        const ConversationSnapshot snapshot{.session_id = options.session_id,
                                            .tenant = options.tenant,
                                            .messages = messages,
                                            .totals = sums,
                                            .created_at = created,
                                            .updated_at = now};
        const std::string text = encode(snapshot, checked);
        std::uint64_t stored = 0;
        try {
            stored = store->put(options.tenant, options.session_id, text, expected);
        } catch (const SessionStoreConflictError&) {
            // Another writer got there first: take its state, so that retrying the turn works.
            reload();
            throw;
        }
        // What is written always holds the totals in memory, so nothing is owed any more.
        std::lock_guard lock(mutex);
        unstored = {};
        return stored;
    }

    // Counts the spend of a turn that commits no messages (it failed, or was cancelled) and
    // writes it to the store on top of whatever the store holds: another writer's version
    // found in between is reloaded and the write tried again, so that spend is never lost to
    // a race. What still cannot be written (the store fails, or keeps losing races) is owed:
    // kept in memory, added to every reload, and written with the next commit.
    void add_spend(const ConversationTotals& spend) noexcept {
        {
            std::lock_guard lock(mutex);
            totals += spend;
            unstored += spend;
        }
        if (!store) return;
        std::minstd_rand jitter(static_cast<std::uint_fast32_t>(
            std::hash<std::thread::id>{}(std::this_thread::get_id())));
        for (int attempt = 0; attempt < 100; ++attempt) {
            try {
                std::vector<Message> messages;
                ConversationTotals sums;
                {
                    std::lock_guard lock(mutex);
                    messages = history;
                    sums = totals;
                }
                const auto now = write_time();
                const std::uint64_t stored = persist(messages, sums, now, messages.size());
                std::lock_guard lock(mutex);
                version = stored;
                updated_at = now;
                return;
            } catch (const SessionStoreConflictError&) {
                // persist() took the winner's state (and the owed spend on top): try again,
                // after a pause that grows, so that racing writers spread out.
                std::this_thread::sleep_for(std::chrono::microseconds(
                    std::uniform_int_distribution<int>(0, 100 * (attempt + 1))(jitter)));
            } catch (...) {
                return;  // The turn's own error is what the caller needs; the spend is owed.
            }
        }
    }

    // Persists `messages` and `sums` as the next version and makes them the conversation's
    // state. The caller holds the turn slot or runs exclusively; the first `checked` messages
    // are the conversation's history as it was (checked when they were written or read).
    void commit(std::vector<Message> messages, const ConversationTotals& sums,
                std::size_t checked) {
        const auto now = write_time();
        const std::uint64_t stored = persist(messages, sums, now, checked);
        std::lock_guard lock(mutex);
        history = std::move(messages);
        totals = sums;
        version = stored;
        updated_at = now;
    }

    // Replaces history, totals and version with what the store holds. Fails closed. A session
    // that was removed from the store is gone: the conversation starts afresh, so that the
    // next turn creates it again instead of failing on a version that no longer exists.
    void reload() {
        const auto stored = store->get(options.tenant, options.session_id);
        if (!stored) {
            if (hooks) hooks->session_gone();
            std::lock_guard lock(mutex);
            history.clear();
            totals = unstored;
            version = 0;
            return;
        }
        auto [snapshot, apply] = decode(stored->snapshot);
        if (snapshot.session_id != options.session_id) {
            throw InvalidConversationSnapshotError(
                "/session_id", "does not match the session id it is stored under");
        }
        if (snapshot.tenant != options.tenant) {
            throw InvalidConversationSnapshotError("/tenant",
                                                   "does not match the tenant it is stored under");
        }
        if (apply) apply();
        std::lock_guard lock(mutex);
        history = std::move(snapshot.messages);
        totals = snapshot.totals;
        totals += unstored;
        version = stored->version;
        created_at = snapshot.created_at;
        updated_at = snapshot.updated_at;
    }

    // The stored text of `snapshot`, with the owner's state when there are hooks. Checked as a
    // restore checks it, except for its first `checked` messages, which were checked when they
    // were written or read: what a restore would refuse (a `__proto__` key in a tool result, a
    // snapshot over the size limit) is never stored, and fails the write with its path.
    [[nodiscard]] std::string encode(const ConversationSnapshot& snapshot,
                                     std::size_t checked) const {
        json value = snapshot_to_json(snapshot);
        if (hooks) value = hooks->stored_form(std::move(value));
        std::string text;
        try {
            text = value.dump();
        } catch (const json::type_error&) {
            throw InvalidConversationSnapshotError(hooks ? "" : "/messages",
                                                   "holds a string that is not valid UTF-8");
        }
        if (!hooks) {
            detail::check_snapshot_write(value, snapshot.messages, checked, text.size());
            return text;
        }
        const detail::TurnHooks::Restored restored = hooks->restore(value);
        try {
            detail::check_snapshot_write(*restored.snapshot, snapshot.messages, checked,
                                         text.size());
        } catch (const InvalidConversationSnapshotError& error) {
            throw InvalidConversationSnapshotError(restored.snapshot_at + error.path(),
                                                   error.constraint());
        }
        return text;
    }

    // What stored `text` holds: the snapshot, and with hooks the owner's state, to be applied
    // once everything else passed. Fails closed, applying nothing.
    [[nodiscard]] std::pair<ConversationSnapshot, std::function<void()>> decode(
        std::string_view text) const {
        if (!hooks) return {parse_snapshot_text(text), nullptr};
        const json stored = detail::parse_stored_json(text);
        detail::TurnHooks::Restored restored = hooks->restore(stored);
        try {
            return {parse_snapshot(*restored.snapshot), std::move(restored.apply)};
        } catch (const InvalidConversationSnapshotError& error) {
            throw InvalidConversationSnapshotError(restored.snapshot_at + error.path(),
                                                   error.constraint());
        }
    }

    // The time of a write: never before the last one, whatever the clock did since.
    [[nodiscard]] std::chrono::system_clock::time_point write_time() const {
        const std::chrono::system_clock::time_point now =
            std::chrono::time_point_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now());
        std::lock_guard lock(mutex);
        return std::max({now, created_at, updated_at});
    }
};

namespace detail {

/// Throws the error of the first invalid option of a turn.
void check_send_options(const SendOptions& options);

/// `messages` without provider replay state.
std::vector<Message> without_replay(std::vector<Message> messages);

}  // namespace detail

}  // namespace ullm
