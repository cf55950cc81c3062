#pragma once

// `ullm chat` (an interactive chat in the terminal), `ullm send` (one prompt, for scripts) and
// `ullm embed` (embeddings of texts, as one line of JSON).

#include <string>
#include <vector>

namespace ullm_cli {

// Each returns the exit status: 0 on success, 1 when the session, store or provider fails, 2
// without a key or server, 64 for bad usage.
int chat(const std::vector<std::string>& args);
int send(const std::vector<std::string>& args);
int embed(const std::vector<std::string>& args);

}  // namespace ullm_cli
