#pragma once

// Internal to the client: the state behind a `ChatStream` (attempts, retries, resuming a
// background response, decoding and checking events). `ChatStream` pulls it; the async face
// (async_calls.cpp) drives it without waiting.

#include <ullm/client/chat_stream.hpp>
#include <ullm/client/client.hpp>
#include <ullm/core/error.hpp>
#include <ullm/detail/redact.hpp>

#include "../core/event_queue.hpp"
#include "../core/text.hpp"
#include "call_steps.hpp"
#include "client_state.hpp"
#include "response_checks.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace ullm::detail {

// Everything a stream needs; lives as long as the ChatStream.
class ChatStreamState {
public:
    // Each attempt waits for the provider's limits in `lane`.
    ChatStreamState(std::shared_ptr<Client::State> client, Route route, ChatRequest request,
                    std::stop_token stop, std::uint64_t lane = 0)
        : client_(std::move(client)),
          route_(std::move(route)),
          request_(std::move(request)),
          codec_(route_.provider->background()),
          // Encoding first means invalid options fail when the stream is created.
          encoded_(detail::encode_request(*route_.provider, request_, true)),
          secrets_(detail::request_secrets(*encoded_)),
          limit_(Limit::of(*client_, route_.provider->name(), lane, *encoded_,
                           max_output_tokens(request_))),
          on_stop_(std::move(stop), [this] { cancel(); }) {}

    // The stream of background response `from.response_id` after event `from.sequence_number`.
    ChatStreamState(std::shared_ptr<Client::State> client, Route route, ChatRequest request,
                    const BackgroundCodec& codec, const StreamPosition& from, std::stop_token stop)
        : client_(std::move(client)),
          route_(std::move(route)),
          request_(std::move(request)),
          codec_(&codec),
          resume_from_(from),
          encoded_(codec.encode_resume(request_, from)),
          secrets_(detail::request_secrets(*encoded_)),
          limit_(Limit::of(*client_, route_.provider->name(), 0, *encoded_, 0)),
          on_stop_(std::move(stop), [this] { cancel(); }) {
        decoder_ = make_decoder();
        checker_.emplace(origin());
    }

    // A stream that sends nothing: a zero-cost usage event, then `done` with `skipped`.
    ChatStreamState(std::shared_ptr<Client::State> client, Route route, ChatRequest request,
                    ChatResponse skipped)
        : client_(std::move(client)),
          route_(std::move(route)),
          request_(std::move(request)),
          started_at_(std::chrono::system_clock::now()),
          skipped_(true),
          on_stop_(std::stop_token{}, [this] { cancel(); }) {
        StreamEvent usage;
        usage.type = StreamEvent::Type::usage_update;
        usage.usage = skipped.usage;
        pending_.push(std::move(usage));
        StreamEvent done;
        done.type = StreamEvent::Type::done;
        done.usage = skipped.usage;
        done.response = std::move(skipped);
        pending_.push(std::move(done));
    }

    ChatStreamState(const ChatStreamState&) = delete;
    ChatStreamState& operator=(const ChatStreamState&) = delete;
    ~ChatStreamState() {
        cancel();
        client_->stream_buffers.give(std::move(bytes_));
    }

    void cancel() noexcept {
        stop_.request_stop();
        std::shared_ptr<RequestLimiter::Waiter> waiting;
        {
            std::lock_guard lock(http_mutex_);
            if (http_) http_->cancel();
            if (admission_) waiting = admission_->waiter.lock();
        }
        // Told `CancelledError`, the admission wakes `poll`, which throws it.
        if (waiting) limit_.limiter->withdraw(waiting);
    }

    std::optional<StreamEvent> next() {
        Poll outcome = Poll::finished;
        return advance(true, outcome);
    }

    /// What `poll` found.
    enum class Poll {
        event,        ///< an event
        blocked,      ///< nothing yet: `notify` (see `poll`) or the retry deadline tells when
        finished,     ///< the stream has ended (after its `done`)
        needs_thread  ///< the stream can only be read by waiting (its transport's streams
                      ///< cannot notify): pull it with `next()`
    };

    /// As `next()`, without waiting: the next event, or why there is none. `notify` is handed
    /// to each attempt's `HttpStream::notify_when_ready`; after `blocked`, poll again when it
    /// runs or at `retry_deadline()`. Throws what `next()` throws.
    std::optional<StreamEvent> poll(const std::function<void()>& notify, Poll& outcome) {
        notify_ = &notify;
        outcome = Poll::event;
        auto event = advance(false, outcome);
        notify_ = nullptr;
        if (event) {
            outcome = Poll::event;
        } else if (outcome == Poll::event) {
            outcome = Poll::finished;
        }
        return event;
    }

    /// When a stream that is waiting to retry may go on; nullopt when it is not waiting.
    [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> retry_deadline() const {
        return retry_until_;
    }

private:
    // `next()` (`may_block`) or `poll`: sets `outcome` to blocked or needs_thread when it
    // returns nothing for either reason.
    std::optional<StreamEvent> advance(bool may_block, Poll& outcome) {
        try {
            return advance_or_throw(may_block, outcome);
        } catch (...) {
            permit_.release();  // the stream has failed: it is no longer in flight
            throw;
        }
    }

    std::optional<StreamEvent> advance_or_throw(bool may_block, Poll& outcome) {
        for (;;) {
            if (!pending_.empty()) {
                StreamEvent event = pending_.take();
                if (event.type == StreamEvent::Type::done) {
                    if (event.response) {
                        detail::price_response(*client_->prices, *event.response,
                                               route_.provider->name(), request_.model);
                        event.usage = event.response->usage;
                        report_usage(*client_, route_.provider->name(), request_.model,
                                     event.response->usage, true, skipped_, started_at_);
                        permit_.settle(used_tokens(*event.response));
                    }
                    permit_.release();
                    response_ = event.response;
                    finished_ = true;
                    pending_.clear();
                }
                if (event.sequence_number) last_pulled_sequence_ = event.sequence_number;
                return event;
            }
            if (finished_) return std::nullopt;
            if (stop_.stop_requested()) throw CancelledError("the stream was cancelled");
            try {
                if (deferred_error_) {
                    const auto error = std::exchange(deferred_error_, nullptr);
                    std::rethrow_exception(error);
                }
                if (const Poll stalled = pump(may_block); stalled != Poll::event) {
                    outcome = stalled;
                    return std::nullopt;
                }
            } catch (const CancelledError&) {
                throw;
            } catch (Error& error) {
                redact_secrets(error, secrets_);
                limit_.note(error);
                if (const auto position = resumable(error)) {
                    // The response goes on without us: pick its stream up where it broke off.
                    if (position->sequence_number > progress_mark_) attempt_ = 1;
                    progress_mark_ = position->sequence_number;
                    const auto delay = retry_delay(retry_policy(), error, attempt_);
                    if (!delay || !decoder_->prepare_resume()) throw;
                    resume_at(*position);
                    StreamEvent retry;
                    retry.type = StreamEvent::Type::retry;
                    retry.attempt = attempt_ + 1;
                    retry.delay = *delay;
                    retry.error_code = error.code();
                    retry.resumed = true;
                    pending_.push(std::move(retry));
                    retry_wait_ = *delay;
                    continue;
                }
                const bool visible = decoder_ != nullptr && decoder_->produced_visible_event();
                const auto delay =
                    visible ? std::nullopt : retry_delay(retry_policy(), error, attempt_);
                if (!delay) throw;
                if (started_in_background()) {
                    detail::ErrorEditor::set_message(
                        error, error.message() +
                                   " (not sent again: the server accepted the background "
                                   "request, and without the response id that its stream had "
                                   "not yet sent, a new request would start a second response)");
                    throw;
                }
                reset_attempt();
                StreamEvent retry;
                retry.type = StreamEvent::Type::retry;
                retry.attempt = attempt_ + 1;
                retry.delay = *delay;
                retry.error_code = error.code();
                pending_.push(std::move(retry));
                retry_wait_ = *delay;
            }
        }
    }

public:
    [[nodiscard]] const std::optional<ChatResponse>& response() const noexcept { return response_; }

    // Where the stream would go on after what has been pulled: the decoder's position when
    // everything decoded has been pulled, else the last pulled event's.
    [[nodiscard]] std::optional<StreamPosition> resume_position() const {
        if (codec_ == nullptr || finished_ || decoder_ == nullptr) return std::nullopt;
        auto position = decoder_->resume_position();
        if (!position) return std::nullopt;
        const auto waiting = std::find_if(pending_.begin(), pending_.end(), [](const auto& event) {
            return event.sequence_number.has_value();
        });
        if (waiting == pending_.end()) return position;
        position->sequence_number =
            last_pulled_sequence_ ? *last_pulled_sequence_ : *waiting->sequence_number - 1;
        return position;
    }

private:
    // Moves the stream forward: starts an attempt, or reads and decodes the next bytes.
    // Without `may_block`, returns `blocked` (or `needs_thread`) instead of waiting; else
    // `event` (which may have decoded nothing).
    Poll pump(bool may_block) {
        // The stream opens with its first pull; its usage report says so.
        if (started_at_ == std::chrono::system_clock::time_point{}) {
            started_at_ = std::chrono::system_clock::now();
        }
        if (retry_wait_) {
            const auto wait = *retry_wait_;
            if (!may_block) {
                const auto now = std::chrono::steady_clock::now();
                if (!retry_until_) retry_until_ = now + wait;
                if (now < *retry_until_) return Poll::blocked;
            } else if (!RetryPolicy::sleep(wait, stop_.get_token())) {
                throw CancelledError("the stream was cancelled");
            }
            retry_wait_.reset();
            retry_until_.reset();
            ++attempt_;
        }
        if (!http_ || !head_checked_) {
            if (const Poll stalled = start_attempt(may_block); stalled != Poll::event) {
                return stalled;
            }
        }
        bool more = true;
        if (decoded_ == bytes_.size()) {
            if (!may_block && !http_->ready()) return Poll::blocked;
            // A transport failure is thrown before anything of these bytes is decoded.
            more = http_->read(bytes_);
            decoded_ = 0;
        }
        try {
            if (more) {
                decoder_->feed(next_slice(), buffer_);
            } else {
                decoder_->finish(buffer_);
            }
        } catch (const StreamTruncatedError&) {
            // The body stopped short; a response running in the background goes on.
            if (buffer_.empty()) throw;
            deferred_error_ = std::current_exception();
        } catch (...) {
            // What the provider sent is an error: no resumed stream can mend it.
            content_failed_ = true;
            // Events decoded before the failure in the same bytes are delivered first.
            if (buffer_.empty()) throw;
            deferred_error_ = std::current_exception();
        }
        // The events are checked where the decoder put them, and handed over whole (pump runs
        // only when everything decoded before has been pulled).
        for (auto event = buffer_.begin(); event != buffer_.end(); ++event) {
            try {
                checker_->check(*event);
            } catch (...) {
                // The events before the broken one are delivered, then its error (which came
                // before any error of the decoder's in the same bytes).
                content_failed_ = true;
                deferred_error_ = std::current_exception();
                buffer_.erase(event, buffer_.end());
                break;
            }
        }
        pending_.append(buffer_);
        return Poll::event;
    }

    // The next bytes read and not yet decoded, ending at a line end past `slice_bytes` when
    // there is one. Decoding a read a slice at a time keeps the events waiting to be pulled
    // (about a kilobyte each) to a few, whatever the size of a read: a whole stream arriving
    // in one read no longer makes a heap of hundreds of kilobytes that is freed at once.
    [[nodiscard]] std::string_view next_slice() {
        constexpr std::size_t slice_bytes = 1024;
        const std::string_view rest = std::string_view(bytes_).substr(decoded_);
        std::size_t length = rest.size();
        if (length > slice_bytes) {
            const auto line_end = rest.find('\n', slice_bytes);
            if (line_end != std::string_view::npos) length = line_end + 1;
        }
        decoded_ += length;
        return rest.substr(0, length);
    }

    // Where a failed stream can be resumed: a background response's stream that lost its
    // connection (or got a retryable answer to a resume) rather than carried an error.
    [[nodiscard]] std::optional<StreamPosition> resumable(const Error& error) const {
        if (codec_ == nullptr || decoder_ == nullptr || content_failed_ || !error.retryable()) {
            return std::nullopt;
        }
        return decoder_->resume_position();
    }

    // Whether this attempt's request was accepted (a 2xx head made the decoder) as one that
    // runs in the background: it runs on even though its stream was lost.
    [[nodiscard]] bool started_in_background() const {
        return codec_ != nullptr && decoder_ != nullptr && !resume_from_ &&
               codec_->runs_in_background(request_);
    }

    // Sends the next attempt as a resume of the stream after `position`, with the same decoder
    // and checker, so that a call started before the break can end after it.
    void resume_at(const StreamPosition& position) {
        encoded_ = codec_->encode_resume(request_, position);
        for (auto& secret : detail::request_secrets(*encoded_)) {
            if (std::find(secrets_.begin(), secrets_.end(), secret) == secrets_.end()) {
                secrets_.push_back(std::move(secret));
            }
        }
        discard_bytes();
        permit_.release();
        std::lock_guard lock(http_mutex_);
        http_.reset();
    }

    // Forgets what the connection of the attempt that ended sent and was not decoded.
    void discard_bytes() noexcept {
        bytes_.clear();
        decoded_ = 0;
    }

    [[nodiscard]] std::unique_ptr<StreamDecoder> make_decoder() const {
        return resume_from_ ? codec_->resumed_stream_decoder(request_, *resume_from_)
                            : route_.provider->stream_decoder(request_);
    }

    [[nodiscard]] const RetryPolicy& retry_policy() const {
        return retry_of(*client_, *route_.provider);
    }

    [[nodiscard]] ErrorOrigin origin() const {
        return {std::string(route_.provider->name()), request_.model, ""};
    }

    // Opens the attempt's stream and checks its head: `event` once it is open and fit to
    // decode; without `may_block`, `blocked` while the head (or an error status's body) is
    // still on its way, and `needs_thread` when the stream cannot tell when it will be.
    Poll start_attempt(bool may_block) {
        if (!http_) {
            if (!admitted(may_block)) return Poll::blocked;
            // Read only by waiting (`next()`): the transport may run it on this thread.
            Transport& transport = transport_of(*client_, *route_.provider);
            auto stream = notify_ == nullptr
                              ? transport.open_blocking_stream(*encoded_, stop_.get_token())
                              : transport.open_stream(*encoded_, stop_.get_token());
            const bool notifies = notify_ != nullptr && stream->notify_when_ready(*notify_);
            {
                std::lock_guard lock(http_mutex_);
                http_ = std::move(stream);
            }
            head_checked_ = false;
            failed_.reset();
            if (!may_block && !notifies) return Poll::needs_thread;
        }
        if (!may_block && !http_->ready()) return Poll::blocked;
        const auto& head = http_->head();
        if (head.status < 200 || head.status > 299) {
            if (!failed_) {
                failed_.emplace();
                static_cast<HttpResponseHead&>(*failed_) = head;
            }
            std::string chunk;
            for (;;) {
                if (!may_block && !http_->ready()) return Poll::blocked;
                if (!http_->read(chunk)) break;
                failed_->body += chunk;
            }
            // decode() of an error status throws the mapped error.
            (void)route_.provider->decode(*failed_, request_);
            throw ProviderError(ErrorCode::invalid_provider_response,
                                "HTTP " + std::to_string(head.status) + " without an error", 502,
                                false, {std::string(route_.provider->name()), request_.model, ""});
        }
        check_stream_head(head);
        if (!decoder_) {
            decoder_ = make_decoder();
            checker_.emplace(origin());
        }
        head_checked_ = true;
        return Poll::event;
    }

    // Whether the attempt may open its stream under its provider's limits: `next()` waits for
    // that; `poll` asks once and returns false until the grant comes (it runs `notify`).
    bool admitted(bool may_block) {
        if (!limit_.limiter || permit_.held()) return true;
        if (may_block) {
            permit_ = limit_.limiter->acquire(limit_.lane, limit_.tokens, stop_.get_token());
            return true;
        }
        if (!admission_) {
            auto admission = std::make_shared<Admission>();
            auto waiter = limit_.limiter->request(
                limit_.lane, limit_.tokens,
                [admission](RequestLimiter::Permit permit, std::exception_ptr error) {
                    std::function<void()> wake;
                    {
                        std::lock_guard lock(admission->mutex);
                        admission->permit = std::move(permit);
                        admission->error = std::move(error);
                        admission->decided = true;
                        wake = admission->wake;
                    }
                    if (wake) wake();
                });
            {
                // A grant that comes from now on wakes the poller; one before was seen below.
                std::lock_guard lock(admission->mutex);
                if (!admission->decided && notify_ != nullptr) admission->wake = *notify_;
            }
            {
                std::lock_guard lock(http_mutex_);
                admission->waiter = waiter;
                admission_ = std::move(admission);
            }
            // A `cancel` that came before `admission_` was set could not withdraw it.
            if (waiter && stop_.stop_requested()) limit_.limiter->withdraw(waiter);
        }
        std::exception_ptr error;
        {
            std::lock_guard lock(admission_->mutex);
            if (!admission_->decided) return false;
            permit_ = std::move(admission_->permit);
            error = admission_->error;
        }
        {
            std::lock_guard lock(http_mutex_);
            admission_.reset();
        }
        if (error) std::rethrow_exception(error);
        return true;
    }

    // Refuses a 2xx stream that cannot be the event stream asked for: a body in an encoding
    // that was not requested (stream requests ask for none, so the bytes would reach the
    // parser still compressed) or an HTML page (a proxy's or a captive portal's).
    void check_stream_head(const HttpResponseHead& head) const {
        if (const auto encoding = head.header("content-encoding")) {
            const std::string value = detail::lower_ascii(*encoding);
            if (!value.empty() && value != "identity") {
                throw ProviderError(ErrorCode::invalid_provider_response,
                                    "the stream came with Content-Encoding \"" + *encoding +
                                        "\", which was not asked for",
                                    502, false, origin());
            }
        }
        if (const auto type = head.header("content-type")) {
            if (detail::lower_ascii(*type).starts_with("text/html")) {
                throw ProviderError(
                    ErrorCode::invalid_provider_response,
                    "the stream is an HTML page (Content-Type " + *type + "), not an event stream",
                    502, false, origin());
            }
        }
    }

    void reset_attempt() {
        discard_bytes();
        permit_.release();
        std::lock_guard lock(http_mutex_);
        http_.reset();
        decoder_.reset();
        checker_.reset();
        buffer_.clear();
        content_failed_ = false;
    }

    std::shared_ptr<Client::State> client_;
    Route route_;
    ChatRequest request_;
    /// The provider's background codec: streams of background responses can be resumed.
    const BackgroundCodec* codec_ = nullptr;
    std::optional<StreamPosition> resume_from_;  ///< Of a stream made by `resume_stream`.
    std::optional<HttpRequest> encoded_;
    std::vector<std::string> secrets_;  ///< Of `encoded_`: kept out of every error.
    Limit limit_;                       ///< The provider's limits each attempt waits for.
    RequestLimiter::Permit permit_;     ///< The current attempt's, while it is in flight.
    /// A grant `poll` waits for: filled by the limiter, on whichever thread grants it.
    struct Admission {
        std::mutex mutex;
        bool decided = false;
        RequestLimiter::Permit permit;
        std::exception_ptr error;
        std::function<void()> wake;
        /// Under `http_mutex_`. Weak: the waiter's callback holds this admission.
        std::weak_ptr<RequestLimiter::Waiter> waiter;
    };
    std::stop_source stop_;
    std::mutex http_mutex_;
    std::shared_ptr<Admission> admission_;  ///< Set and reset under `http_mutex_`.
    std::unique_ptr<HttpStream> http_;
    std::unique_ptr<StreamDecoder> decoder_;
    std::optional<detail::StreamEventChecker> checker_;   ///< Of the current attempt.
    std::string bytes_ = client_->stream_buffers.take();  ///< The last read of the body.
    std::size_t decoded_ = 0;  ///< How much of `bytes_` went to the decoder.
    std::vector<StreamEvent> buffer_;
    detail::EventQueue<StreamEvent> pending_;
    std::optional<ChatResponse> response_;
    std::optional<std::chrono::milliseconds> retry_wait_;
    /// When a retry that `poll` waits for may start (`next()` sleeps instead).
    std::optional<std::chrono::steady_clock::time_point> retry_until_;
    /// `poll`'s notification while it runs, handed to each stream it opens.
    const std::function<void()>* notify_ = nullptr;
    bool head_checked_ = false;           ///< The attempt's head was checked.
    std::optional<HttpResponse> failed_;  ///< An error status's answer, while its body arrives.
    std::exception_ptr deferred_error_;
    int attempt_ = 1;
    std::int64_t progress_mark_ = -2;  ///< The position of the last resume: no progress since.
    std::optional<std::int64_t> last_pulled_sequence_;
    bool content_failed_ = false;  ///< The body carried an error (not resumable).
    bool finished_ = false;
    /// When the stream was opened (its first pull), for its usage report.
    std::chrono::system_clock::time_point started_at_{};
    bool skipped_ = false;  ///< A budget skipped the request: nothing is sent.
    std::stop_callback<std::function<void()>> on_stop_;
};

}  // namespace ullm::detail
