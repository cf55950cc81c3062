#include "gemini_internal.hpp"

#include "../json_readers.hpp"

#include <ullm/http/line_splitter.hpp>
#include <ullm/http/sse_parser.hpp>

#include <utility>

namespace ullm::detail::gemini {

namespace {

class GeminiStreamDecoder final : public StreamDecoder {
public:
    GeminiStreamDecoder(std::string provider, const ChatRequest& request)
        : reader_(std::move(provider), request, {}) {}

    void feed(std::string_view bytes, std::vector<StreamEvent>& out) override {
        if (finished_) return;
        if (mode_ == Mode::undecided) {
            prefix_.append(bytes);
            if (!decide_mode()) return;
            const std::string pending = std::move(prefix_);
            prefix_.clear();
            dispatch(pending, out);
            return;
        }
        dispatch(bytes, out);
    }

    void finish(std::vector<StreamEvent>& out) override {
        if (finished_) return;
        bool clean = true;
        if (mode_ == Mode::sse) clean = parser_.finish().clean();
        if (mode_ == Mode::array) clean = splitter_.finish();
        if (!reader_.finished()) {
            finished_ = true;
            throw StreamTruncatedError(
                mode_ == Mode::undecided ? "the stream ended before any chunk"
                : clean                  ? "the stream ended before a chunk with a finishReason"
                                         : "the stream ended in the middle of a chunk",
                reader_.origin());
        }
        finished_ = true;
        const EventSink sink{&out, &visible_};
        reader_.close(sink);
        visible_.push(out, detail::done_event(reader_.build()));
    }

    [[nodiscard]] bool produced_visible_event() const override { return visible_.any(); }

private:
    enum class Mode { undecided, sse, array };

    // Chooses SSE or the JSON-array form from the first significant byte.
    bool decide_mode() {
        static constexpr std::string_view bom = "\xEF\xBB\xBF";
        const std::string_view text = prefix_;
        std::size_t i = 0;
        if (text.size() < bom.size() && bom.substr(0, text.size()) == text) return false;
        if (text.substr(0, bom.size()) == bom) i = bom.size();
        while (i < text.size() &&
               (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) {
            ++i;
        }
        if (i == text.size() && text.size() < (std::size_t{64} << 10)) return false;
        mode_ = i < text.size() && text[i] == '[' ? Mode::array : Mode::sse;
        return true;
    }

    void dispatch(std::string_view bytes, std::vector<StreamEvent>& out) {
        if (mode_ == Mode::sse) {
            parser_.feed(bytes, [&](SseEvent&& event) { on_payload(event.data, out); });
        } else {
            splitter_.feed(bytes, [&](std::string_view element) { on_payload(element, out); });
        }
    }

    void on_payload(std::string_view payload, std::vector<StreamEvent>& out) {
        // Gemini sends no terminator; some proxies add an OpenAI-style one.
        if (finished_ || payload == "[DONE]") return;
        const json chunk = parse_stream_json(
            payload, [this] { return reader_.origin(); }, "a stream chunk");
        reader_.read(chunk, false, EventSink{&out, &visible_});
    }

    ResponseReader reader_;
    detail::VisibleEvents visible_;
    SseParser parser_;
    JsonArrayStreamSplitter splitter_;
    std::string prefix_;
    Mode mode_ = Mode::undecided;
    bool finished_ = false;
};

}  // namespace

std::unique_ptr<StreamDecoder> make_stream_decoder(std::string provider,
                                                   const ChatRequest& request) {
    return std::make_unique<GeminiStreamDecoder>(std::move(provider), request);
}

}  // namespace ullm::detail::gemini
