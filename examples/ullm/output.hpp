#pragma once

// JSON output of the `ullm` program: canonical responses, events, usage and errors, with keys
// in the order written.

#include <ullm/core/error.hpp>
#include <ullm/core/json.hpp>
#include <ullm/providers/chat.hpp>

namespace ullm_cli {

// The exit status of a command line the program does not accept (sysexits' EX_USAGE).
constexpr int exit_usage = 64;

// Output keeps keys in the order written: "type" first, then the rest.
using out_json = ullm::ordered_json;

out_json usage_json(const ullm::Usage& usage);
out_json event_json(const ullm::StreamEvent& event);
out_json response_json(const ullm::ChatResponse& response);
out_json error_json(const ullm::Error& error);
// One JSON value on one line of stdout.
void print_line(const out_json& value);

}  // namespace ullm_cli
