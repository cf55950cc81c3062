#include "support/fixtures.hpp"

#include <ullm/core/json.hpp>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace ullm::test {

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

/// The first component of `path` relative to the fixtures directory ("anthropic", ...).
std::string provider_folder(const std::filesystem::path& path) {
    const auto relative = path.lexically_normal().lexically_relative(fixtures_dir());
    if (relative.empty() || relative.begin() == relative.end()) return {};
    return relative.begin()->string();
}

std::string relative_name(const std::filesystem::path& path) {
    return path.lexically_normal().lexically_relative(fixtures_dir()).generic_string();
}

void add_embedded_bodies(const std::filesystem::path& file, std::vector<RecordedStream>& out) {
    const json recording = json::parse(read_file(file), nullptr, /*allow_exceptions=*/false);
    if (!recording.is_array()) return;
    for (std::size_t i = 0; i < recording.size(); ++i) {
        const json& entry = recording[i];
        const json* body = nullptr;
        if (entry.is_string()) {
            body = &entry;
        } else if (entry.is_object() && entry.contains("response") &&
                   entry["response"].is_object() && entry["response"].contains("body")) {
            body = &entry["response"]["body"];
        }
        if (body == nullptr || !body->is_string()) continue;
        const auto& text = body->get_ref<const std::string&>();
        if (!looks_like_sse_wire(text)) continue;
        out.push_back({relative_name(file) + "#" + std::to_string(i), text, std::nullopt, {}});
    }
}

}  // namespace

std::filesystem::path fixtures_dir() {
    return std::filesystem::path(ULLM_FIXTURES_DIR).lexically_normal();
}

std::vector<std::filesystem::path> fixture_files(std::string_view subdir, std::string_view suffix) {
    const auto root = subdir.empty() ? fixtures_dir() : fixtures_dir() / std::string(subdir);
    if (!std::filesystem::is_directory(root)) {
        throw std::runtime_error("fixture directory not found: " + root.string());
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
        if (entry.is_regular_file() && ends_with(entry.path().filename().string(), suffix)) {
            files.push_back(entry.path());
        }
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    std::ostringstream content;
    content << in.rdbuf();
    if (in.bad()) throw std::runtime_error("cannot read " + path.string());
    return std::move(content).str();
}

Framing framing_for(const std::filesystem::path& chunks_file, std::string_view chunks_txt) {
    const auto lines = chunk_lines(chunks_txt);
    if (!lines.empty()) {
        const json first = json::parse(lines.front(), nullptr, /*allow_exceptions=*/false);
        if (first.is_object() && first.value("object", "") == "chat.completion.chunk") {
            return Framing::chat_completions;
        }
    }
    const std::string folder = provider_folder(chunks_file);
    if (folder == "anthropic" || folder == "openai-responses") return Framing::typed_events;
    if (folder == "gemini") return Framing::data_only;
    return Framing::chat_completions;
}

std::vector<RecordedStream> recorded_sse_streams() {
    std::vector<RecordedStream> streams;
    for (const auto& file : fixture_files("openai-chat/openai-python-sse", ".bin")) {
        streams.push_back({relative_name(file), read_file(file), std::nullopt, {}});
    }
    const std::string anthropic_sdk = "anthropic/anthropic-sdk-python";
    for (const std::string_view suffix : {".txt", ".sse"}) {
        for (const auto& file : fixture_files(anthropic_sdk, suffix)) {
            std::string text = read_file(file);
            if (!looks_like_sse_wire(text)) continue;  // a plain JSON message body
            streams.push_back({relative_name(file), std::move(text), std::nullopt, {}});
        }
    }
    for (const auto& file : fixture_files(anthropic_sdk, ".json")) {
        add_embedded_bodies(file, streams);
    }
    for (const auto& file : fixture_files("", ".chunks.txt")) {
        std::string text = read_file(file);
        if (looks_like_sse_wire(text)) {
            streams.push_back({relative_name(file), std::move(text), std::nullopt, {}});
            continue;
        }
        const Framing framing = framing_for(file, text);
        RecordedStream stream{relative_name(file), frame_chunks_as_sse(text, framing), framing, {}};
        for (const std::string_view line : chunk_lines(text)) stream.payloads.emplace_back(line);
        streams.push_back(std::move(stream));
    }
    std::sort(streams.begin(), streams.end(),
              [](const RecordedStream& a, const RecordedStream& b) { return a.name < b.name; });
    return streams;
}

}  // namespace ullm::test
