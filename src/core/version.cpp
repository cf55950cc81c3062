#include <ullm/version.hpp>

#include <nlohmann/json.hpp>

#include <curl/curl.h>
#include <sqlite3.h>

#include <string>

namespace ullm {

std::string_view version() noexcept {
    return ULLM_VERSION_STRING;
}

BuildInfo build_info() {
    BuildInfo info;
    info.ullm = std::string(version());
    info.libcurl = LIBCURL_VERSION;
    const curl_version_info_data* curl = curl_version_info(CURLVERSION_NOW);
    if (curl != nullptr) {
        info.libcurl_runtime = curl->version != nullptr ? curl->version : "";
        if (curl->ssl_version != nullptr)
            info.libcurl_runtime += std::string(" (") + curl->ssl_version + ")";
        if (curl->age >= CURLVERSION_NINTH) {
            if (curl->cainfo != nullptr) info.libcurl_ca_bundle = curl->cainfo;
            if (curl->capath != nullptr) info.libcurl_ca_path = curl->capath;
        }
    }
    info.nlohmann_json = std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                         std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                         std::to_string(NLOHMANN_JSON_VERSION_PATCH);
    info.sqlite = SQLITE_VERSION;
    info.sqlite_runtime = sqlite3_libversion();
    return info;
}

}  // namespace ullm
