#pragma once

// Where `ullm` keeps its sessions, and the `sessions` and `show` commands.

#include <ullm/core/json.hpp>
#include <ullm/store/sqlite_session_store.hpp>

#include <memory>
#include <string>

namespace ullm_cli {

// `$XDG_DATA_HOME/ullm/sessions.db`, else `$HOME/.local/share/ullm/sessions.db`.
std::string default_store_path();

// Opens (creating its directory) the SQLite store at `path`. Throws `ullm::Error` with a
// message naming the path.
std::shared_ptr<ullm::SqliteSessionStore> open_store(const std::string& path);

// The model (`provider/model`) a session's last turn was sent to, as `ullm` records it in the
// user message's metadata (`{"cli": {"model": …}}`); empty when the session is not stored, is
// corrupt, or has none.
std::string session_model(ullm::SessionStore& store, const std::string& session_id);

// The metadata `ullm` gives the user message of a turn sent to `model`.
ullm::json turn_metadata(const std::string& model);

// `ullm sessions`: one line per session (id, last update, messages, cost). Returns the exit
// status.
int list_sessions(const std::string& store_path);

// `ullm show ID`: the session's transcript as Markdown. Returns the exit status.
int show_session(const std::string& store_path, const std::string& session_id);

}  // namespace ullm_cli
