// The documentation stays true to the code: every C++ block in docs/ is quoted verbatim from a
// compiled source file named before it, and every local link leads to a file and heading that
// exist. (The README's own example is compiled by the ullm_readme_check target.)

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/catch.hpp"

namespace docs_test {

namespace {

namespace fs = std::filesystem;

const fs::path source_dir{ULLM_SOURCE_DIR};

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

std::vector<fs::path> markdown_files() {
    std::vector<fs::path> files{source_dir / "README.md"};
    for (const auto& entry : fs::directory_iterator(source_dir / "docs")) {
        if (entry.path().extension() == ".md") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

struct Block {
    std::size_t line;    // 1-based line of the opening fence
    std::string info;    // the fence's info string, e.g. "cpp"
    std::string body;    // the text between the fences
    std::size_t offset;  // where the opening fence starts in the document
};

std::size_t line_of(const std::string& text, std::size_t offset) {
    return 1 + static_cast<std::size_t>(
                   std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n'));
}

std::vector<Block> fenced_blocks(const std::string& text) {
    std::vector<Block> blocks;
    std::size_t at = 0;
    while ((at = text.find("```", at)) != std::string::npos) {
        if (at != 0 && text[at - 1] != '\n') {
            at += 3;
            continue;
        }
        const auto info_end = text.find('\n', at);
        if (info_end == std::string::npos) break;
        const auto close = text.find("\n```", info_end);
        if (close == std::string::npos) break;
        blocks.push_back({line_of(text, at), text.substr(at + 3, info_end - at - 3),
                          text.substr(info_end + 1, close + 1 - (info_end + 1)), at});
        at = close + 4;
    }
    return blocks;
}

// `text` with its fenced blocks blanked out, so that links inside code are not links.
std::string prose_of(const std::string& text) {
    std::string prose = text;
    for (const auto& block : fenced_blocks(text)) {
        const auto end = block.offset + 3 + block.info.size() + 1 + block.body.size() + 3;
        std::fill(prose.begin() + static_cast<long>(block.offset),
                  prose.begin() + static_cast<long>(std::min(end, prose.size())), ' ');
    }
    return prose;
}

// GitHub's anchor for a heading: lower case, spaces to '-', other punctuation dropped.
std::string anchor_of(const std::string& heading) {
    std::string anchor;
    for (const char c : heading) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) != 0 || c == '-' || c == '_') {
            anchor += static_cast<char>(std::tolower(u));
        } else if (c == ' ') {
            anchor += '-';
        } else if (u >= 0x80) {
            anchor += c;
        }
    }
    return anchor;
}

std::set<std::string> anchors_in(const fs::path& file) {
    std::set<std::string> anchors;
    std::istringstream lines(prose_of(read_text(file)));
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind('#', 0) != 0) continue;
        const auto start = line.find_first_not_of('#');
        if (start == std::string::npos || line[start] != ' ') continue;
        anchors.insert(anchor_of(line.substr(start + 1)));
    }
    return anchors;
}

}  // namespace

TEST_CASE("every C++ block in docs/ is quoted verbatim from the source file named before it",
          "[docs]") {
    const std::regex named_file(R"(`((?:examples|tests|include)/[^`\s]+\.(?:cpp|hpp))`)");
    std::size_t blocks = 0;
    for (const auto& doc : markdown_files()) {
        if (doc.filename() == "README.md") continue;  // compiled by ullm_readme_check
        const auto text = read_text(doc);
        for (const auto& block : fenced_blocks(text)) {
            if (block.info != "cpp") continue;
            ++blocks;
            INFO(doc.filename().string() << ":" << block.line);
            // The source is the last file the text names before the block.
            const auto before = text.substr(0, block.offset);
            std::string source;
            for (std::sregex_iterator it(before.begin(), before.end(), named_file), end; it != end;
                 ++it) {
                source = (*it)[1];
            }
            REQUIRE_FALSE(source.empty());
            INFO("quoted from " << source);
            REQUIRE(fs::exists(source_dir / source));
            CHECK(read_text(source_dir / source).find(block.body) != std::string::npos);
        }
    }
    CHECK(blocks >= 80);
}

TEST_CASE("every local link in the README and docs/ leads to a file and heading that exist",
          "[docs]") {
    const std::regex link(R"(\]\(([^)\s]+)\))");
    std::size_t links = 0;
    for (const auto& doc : markdown_files()) {
        const auto prose = prose_of(read_text(doc));
        for (std::sregex_iterator it(prose.begin(), prose.end(), link), end; it != end; ++it) {
            const std::string target = (*it)[1];
            if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) {
                continue;
            }
            ++links;
            INFO(doc.filename().string() << " links to " << target);
            const auto hash = target.find('#');
            const auto file = target.substr(0, hash);
            const auto path = file.empty() ? doc : doc.parent_path() / file;
            REQUIRE(fs::exists(path));
            if (hash != std::string::npos) {
                CHECK(anchors_in(path).count(target.substr(hash + 1)) == 1);
            }
        }
    }
    CHECK(links >= 40);
}

}  // namespace docs_test
