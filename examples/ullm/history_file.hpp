#pragma once

// The history file of `ullm chat`: one line of JSON (a string) per entry. Apart from the line
// editor so that it, built outside the unity unit for libedit's macros, does not compile
// nlohmann_json on its own.

#include <optional>
#include <string>

namespace ullm_cli {

// The history file of the sessions store at `store_path`: `<store_path>.history`.
std::string history_path(const std::string& store_path);

// `entry` as a line of the history file, with its newline. Bytes that are not UTF-8 are
// replaced.
std::string history_line(const std::string& entry);

// The entry a line of the history file holds (without its newline); none for a line that is
// not a JSON string.
std::optional<std::string> history_entry(const std::string& line);

}  // namespace ullm_cli
