# Precompiled headers for ullm's own targets: nlohmann_json is most of what every translation
# unit parses (about 133k of the 147k lines the umbrella header preprocesses to), so it and the
# standard headers are compiled once per target. Consumers never see this.
option(ULLM_ENABLE_PCH "Precompile the heavy headers of ullm's own targets" ON)

set(ULLM_PCH_HEADERS
  <nlohmann/json.hpp> <algorithm> <atomic> <chrono> <cstdint> <functional> <map> <memory>
  <mutex> <optional> <stdexcept> <stop_token> <string> <string_view> <thread> <utility>
  <vector>)

# Gives `target` a precompiled header of ULLM_PCH_HEADERS and `ARGN` (extra headers).
function(ullm_target_pch target)
  if(ULLM_ENABLE_PCH)
    target_precompile_headers(${target} PRIVATE ${ULLM_PCH_HEADERS} ${ARGN})
  endif()
endfunction()
