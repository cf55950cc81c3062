#pragma once

// Internal to the provider adapters: the base URL every adapter joins its paths to.

#include <string>

namespace ullm::detail {

/// `base_url` without trailing slashes, so that `base_url + "/path"` never doubles one.
inline std::string trimmed_base_url(std::string base_url) {
    while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
    return base_url;
}

}  // namespace ullm::detail
