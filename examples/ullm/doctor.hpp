#pragma once

// `ullm doctor`: checks the environment ullm runs in, one line per check.

#include <string>
#include <vector>

namespace ullm_cli {

// The keys found and where each provider's requests go, the CA store, the proxy variables, the
// session store and whether each server answers (a bare GET of its root, no key sent). Returns
// 0 when nothing failed, 1 when a check failed, 64 for bad usage.
int doctor(const std::vector<std::string>& args);

}  // namespace ullm_cli
