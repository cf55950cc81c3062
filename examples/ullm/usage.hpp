#pragma once

// `ullm usage`: totals of a usage ledger, and the ledger `chat` and `send` write with
// `--ledger`.

#include <ullm/client/client.hpp>

#include <functional>
#include <string>
#include <vector>

namespace ullm_cli {

// `$XDG_DATA_HOME/ullm/usage.db`, else `$HOME/.local/share/ullm/usage.db`.
std::string default_ledger_path();

// An `on_usage` callback that records every request in the SQLite ledger at `path` (created
// with its directory) under `session_id`; a failed write is reported on stderr, never thrown.
std::function<void(const ullm::UsageReport&)> ledger_callback(const std::string& path,
                                                              const std::string& session_id);

// `ullm usage [--ledger PATH | --postgres URL] [--by KEY]... [--tenant T] [--since WHEN]
// [--until WHEN] [--csv | --jsonl]`. Returns the exit status.
int usage(const std::vector<std::string>& args);

}  // namespace ullm_cli
