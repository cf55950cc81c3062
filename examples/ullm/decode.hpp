#pragma once

#include <string>

namespace ullm_cli {

// `ullm decode --provider NAME [--status N] FILE`: prints the canonical events of a recorded
// response as JSON lines, then the final response. Returns the exit status: 0 when the file
// decoded (an error the provider reported is part of the output), 2 when it is not a valid
// transcript, 64 for an unknown provider.
int decode(const std::string& provider_name, int status, const std::string& path);

}  // namespace ullm_cli
