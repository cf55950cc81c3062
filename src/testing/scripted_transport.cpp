#include "scripted_transport.hpp"

#include <ullm/core/error.hpp>

#include <condition_variable>
#include <string>
#include <utility>

namespace ullm::detail {

std::uint64_t ScriptPacing::open() {
    std::lock_guard lock(mutex_);
    return ++last_ticket_;
}

void ScriptPacing::set_lines(std::uint64_t ticket, std::size_t lines) {
    std::lock_guard lock(mutex_);
    lines_[ticket] = lines;
}

std::size_t ScriptPacing::lines(std::uint64_t ticket) {
    std::lock_guard lock(mutex_);
    const auto found = lines_.find(ticket);
    return found == lines_.end() ? 0 : found->second;
}

void ScriptPacing::close(std::uint64_t ticket) {
    std::lock_guard lock(mutex_);
    lines_.erase(ticket);
}

namespace {

HttpResponseHead scripted_head() {
    return {200, {{"content-type", std::string(scripted_content_type)}}};
}

// One stream of a `ScriptedTransport`: its ticket line, then its event lines as the pacing
// tells, `delay` apart.
class ScriptedStream final : public HttpStream {
public:
    ScriptedStream(std::shared_ptr<ScriptPacing> pacing, std::chrono::milliseconds delay,
                   std::stop_token stop)
        : pacing_(std::move(pacing)),
          ticket_(pacing_->open()),
          delay_(delay),
          on_stop_(std::move(stop), Cancel{this}) {}

    ScriptedStream(const ScriptedStream&) = delete;
    ScriptedStream& operator=(const ScriptedStream&) = delete;
    ~ScriptedStream() override { pacing_->close(ticket_); }

    const HttpResponseHead& head() override {
        std::lock_guard lock(mutex_);
        throw_if_cancelled();
        return head_;
    }

    bool read(std::string& out) override {
        out.clear();
        std::unique_lock lock(mutex_);
        throw_if_cancelled();
        if (!ticket_sent_) {
            ticket_sent_ = true;
            out = std::to_string(ticket_) + "\n";
            return true;
        }
        const std::size_t lines = pacing_->lines(ticket_);
        if (sent_ >= lines) return false;
        if (delay_.count() == 0) {
            out.assign(lines - sent_, '\n');
            sent_ = lines;
            return true;
        }
        if (sent_ > 0 && changed_.wait_for(lock, delay_, [this] { return cancelled_; })) {
            throw_if_cancelled();
        }
        out = "\n";
        ++sent_;
        return true;
    }

    void cancel() noexcept override {
        {
            std::lock_guard lock(mutex_);
            cancelled_ = true;
        }
        changed_.notify_all();
    }

private:
    struct Cancel {
        ScriptedStream* stream;
        void operator()() const noexcept { stream->cancel(); }
    };

    void throw_if_cancelled() const {
        if (cancelled_) throw CancelledError("the stream was cancelled");
    }

    std::shared_ptr<ScriptPacing> pacing_;
    std::uint64_t ticket_;
    std::chrono::milliseconds delay_;
    HttpResponseHead head_ = scripted_head();
    std::mutex mutex_;
    std::condition_variable changed_;
    bool cancelled_ = false;
    bool ticket_sent_ = false;
    std::size_t sent_ = 0;                ///< Event lines sent.
    std::stop_callback<Cancel> on_stop_;  ///< Last: it may call `cancel` until destroyed.
};

}  // namespace

ScriptedTransport::ScriptedTransport(std::chrono::milliseconds chunk_delay)
    : chunk_delay_(chunk_delay) {}

HttpResponse ScriptedTransport::send(const HttpRequest&, std::stop_token stop) {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    HttpResponse response;
    static_cast<HttpResponseHead&>(response) = scripted_head();
    return response;
}

std::unique_ptr<HttpStream> ScriptedTransport::open_stream(const HttpRequest&,
                                                           std::stop_token stop) {
    if (stop.stop_requested()) throw CancelledError("the request was cancelled");
    return std::make_unique<ScriptedStream>(pacing_, chunk_delay_, std::move(stop));
}

}  // namespace ullm::detail
