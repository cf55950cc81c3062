#include "sessions.hpp"

#include <ullm/conversation/markdown.hpp>
#include <ullm/conversation/snapshot.hpp>
#include <ullm/core/error.hpp>

#include <fmt/core.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace ullm_cli {

std::string default_store_path() {
    const char* data = std::getenv("XDG_DATA_HOME");
    const char* home = std::getenv("HOME");
    std::filesystem::path base;
    if (data != nullptr && *data != '\0') {
        base = data;
    } else {
        base = std::filesystem::path(home != nullptr && *home != '\0' ? home : ".") / ".local" /
               "share";
    }
    return (base / "ullm" / "sessions.db").string();
}

std::shared_ptr<ullm::SqliteSessionStore> open_store(const std::string& path) {
    const auto parent = std::filesystem::path(path).parent_path();
    std::error_code ignored;
    if (!parent.empty()) std::filesystem::create_directories(parent, ignored);
    try {
        return ullm::SqliteSessionStore::open(path);
    } catch (const ullm::Error& error) {
        // The store's own message names the path.
        throw ullm::SessionStoreError("cannot open the session store: " + error.message());
    }
}

namespace {

std::string model_of(const std::vector<ullm::Message>& messages) {
    for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
        if (it->role != ullm::Role::user) continue;
        const auto cli = it->metadata.find("cli");
        if (cli == it->metadata.end() || !cli->is_object()) continue;
        const auto model = cli->find("model");
        if (model != cli->end() && model->is_string()) return model->get<std::string>();
    }
    return {};
}

}  // namespace

std::string session_model(ullm::SessionStore& store, const std::string& session_id) {
    try {
        const auto stored = store.get("", session_id);
        if (!stored) return {};
        return model_of(ullm::parse_snapshot_text(stored->snapshot).messages);
    } catch (const ullm::Error&) {
        return {};  // The restore itself reports what is wrong.
    }
}

ullm::json turn_metadata(const std::string& model) {
    return {{"cli", {{"model", model}}}};
}

int list_sessions(const std::string& store_path) {
    try {
        const auto store = open_store(store_path);
        ullm::SessionListOptions page_options{.limit = 1000};
        std::size_t count = 0;
        for (;;) {
            const auto page = store->list("", page_options);
            for (const auto& summary : page.sessions) {
                if (count++ == 0) {
                    fmt::print("{:<28} {:<20} {:>8} {:>12}\n", "SESSION", "UPDATED", "MESSAGES",
                               "COST");
                }
                std::string messages = "?";
                std::string cost = "(corrupt)";
                if (const auto stored = store->get("", summary.session_id)) {
                    try {
                        const auto snapshot = ullm::parse_snapshot_text(stored->snapshot);
                        messages = std::to_string(snapshot.messages.size());
                        cost = fmt::format("${:.6f}", snapshot.totals.cost_usd);
                    } catch (const ullm::Error&) {
                    }
                }
                fmt::print("{:<28} {:<20} {:>8} {:>12}\n", summary.session_id,
                           ullm::format_timestamp(summary.updated_at).substr(0, 19), messages,
                           cost);
            }
            if (page.next_cursor.empty()) break;
            page_options.cursor = page.next_cursor;
        }
        if (count == 0) fmt::print("no sessions in {}\n", store_path);
        return 0;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "ullm sessions: %s\n", error.message().c_str());
        return 1;
    }
}

int show_session(const std::string& store_path, const std::string& session_id) {
    try {
        const auto store = open_store(store_path);
        const auto stored = store->get("", session_id);
        if (!stored) {
            std::fprintf(stderr, "ullm show: no session \"%s\" in %s\n", session_id.c_str(),
                         store_path.c_str());
            return 1;
        }
        const auto snapshot = ullm::parse_snapshot_text(stored->snapshot);
        // "provider/model" as the chat recorded it; the model id itself may hold slashes.
        // A session written by the library, or before ullm recorded models, has none.
        std::string model = model_of(snapshot.messages);
        if (model.empty()) model = "(not recorded)/(not recorded)";
        const auto slash = model.find('/');
        fmt::print("{}", ullm::render_markdown(
                             snapshot.messages,
                             {.session_id = snapshot.session_id,
                              .tenant = snapshot.tenant,
                              .provider = slash == std::string::npos ? "" : model.substr(0, slash),
                              .model = slash == std::string::npos ? model : model.substr(slash + 1),
                              .totals = snapshot.totals}));
        return 0;
    } catch (const ullm::Error& error) {
        std::fprintf(stderr, "ullm show: session \"%s\": %s\n", session_id.c_str(),
                     error.message().c_str());
        return 1;
    }
}

}  // namespace ullm_cli
