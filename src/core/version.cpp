#include <ullm/version.hpp>

namespace ullm {

std::string_view version() noexcept {
    return ULLM_VERSION_STRING;
}

}  // namespace ullm
