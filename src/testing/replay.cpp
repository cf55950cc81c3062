#include <ullm/testing/replay.hpp>

#include <ullm/core/json.hpp>

namespace ullm::testing {

namespace {

/// Records the top-level "type" string of an object and stops parsing as soon as it has it.
class TypeFieldReader : public nlohmann::json_sax<json> {
public:
    std::optional<std::string> type;

    bool null() override { return value_done(); }
    bool boolean(bool) override { return value_done(); }
    bool number_integer(number_integer_t) override { return value_done(); }
    bool number_unsigned(number_unsigned_t) override { return value_done(); }
    bool number_float(number_float_t, const string_t&) override { return value_done(); }
    bool string(string_t& value) override {
        if (depth_ == 1 && key_is_type_) {
            type = value;
            return false;  // found: stop
        }
        return value_done();
    }
    bool binary(binary_t&) override { return value_done(); }
    bool start_object(std::size_t) override { return open(); }
    bool key(string_t& value) override {
        key_is_type_ = depth_ == 1 && value == "type";
        return true;
    }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }

private:
    bool open() {
        ++depth_;
        key_is_type_ = false;
        return true;
    }
    bool close() {
        --depth_;
        return true;
    }
    bool value_done() {
        key_is_type_ = false;
        return true;
    }

    int depth_ = 0;
    bool key_is_type_ = false;
};

}  // namespace

std::vector<std::string_view> chunk_lines(std::string_view chunks_txt) {
    std::vector<std::string_view> lines;
    std::size_t start = 0;
    while (start < chunks_txt.size()) {
        const std::size_t end = chunks_txt.find('\n', start);
        if (end == std::string_view::npos) {
            lines.push_back(chunks_txt.substr(start));
            break;
        }
        lines.push_back(chunks_txt.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

std::optional<std::string> json_type_field(std::string_view line) {
    TypeFieldReader reader;
    json::sax_parse(line, &reader, json::input_format_t::json, /*strict=*/false);
    return reader.type;
}

std::string frame_chunks_as_sse(std::string_view chunks_txt, ChunkFraming framing) {
    std::string wire;
    wire.reserve(chunks_txt.size() + chunks_txt.size() / 4 + 64);
    for (const std::string_view line : chunk_lines(chunks_txt)) {
        if (framing == ChunkFraming::typed_events) {
            if (const auto type = json_type_field(line)) {
                wire += "event: ";
                wire += *type;
                wire += '\n';
            }
        }
        wire += "data: ";
        wire += line;
        wire += "\n\n";
    }
    if (framing == ChunkFraming::chat_completions) wire += "data: [DONE]\n\n";
    return wire;
}

bool looks_like_sse_wire(std::string_view text) {
    if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    for (const std::string_view field : {"event:", "data:", "id:", "retry:", ":"}) {
        if (text.starts_with(field)) return true;
    }
    return false;
}

}  // namespace ullm::testing
