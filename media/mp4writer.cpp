#include "media/mp4writer.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

namespace vireo::media {

namespace {

std::string avError(int code)
{
    char text[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(code, text, sizeof text);
    return text;
}

}  // namespace

int moveWithoutReplacing(const std::filesystem::path& from, const std::filesystem::path& to)
{
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return errno;
    if (::link(from.c_str(), to.c_str()) == 0) {
        ::unlink(from.c_str());
        return 0;
    }
    if (errno != EPERM && errno != EOPNOTSUPP)
        return errno;
    if (::access(to.c_str(), F_OK) == 0)
        return EEXIST;
    return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

std::filesystem::path partialPath(const std::filesystem::path& path)
{
    static std::atomic<unsigned long> counter{0};
    return path.parent_path() / ("." + path.filename().string() + ".part" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
}

struct Mp4Writer::Impl {
    std::filesystem::path path, tmp;
    VideoStreamSpec videoSpec;
    std::optional<AudioStreamSpec> audioSpec;
    AVFormatContext* format = nullptr;
    AVCodecContext* video = nullptr;
    AVCodecContext* audio = nullptr;
    AVStream* videoStream = nullptr;
    AVStream* audioStream = nullptr;
    SwsContext* sws = nullptr;
    AVFrame* videoFrame = nullptr;
    AVFrame* audioFrame = nullptr;
    AVAudioFifo* fifo = nullptr;
    AVPacket* packet = nullptr;
    std::vector<std::uint8_t> padded;  // one RGB frame plus FFmpeg's input padding
    std::int64_t frames = 0;
    std::int64_t audioSamples = 0;
    bool finished = false;

    ~Impl()
    {
        // No trailer for an abandoned file: it is deleted below, and after a failed finish()
        // the muxer's state is not safe to write again (avformat_free_context deinits it).
        if (format && !(format->oformat->flags & AVFMT_NOFILE))
            avio_closep(&format->pb);
        avformat_free_context(format);
        avcodec_free_context(&video);
        avcodec_free_context(&audio);
        sws_freeContext(sws);
        av_frame_free(&videoFrame);
        av_frame_free(&audioFrame);
        if (fifo)
            av_audio_fifo_free(fifo);
        av_packet_free(&packet);
        if (!finished && !tmp.empty())
            std::remove(tmp.c_str());
    }

    Error fail(const std::string& what, int code = 0) const
    {
        return makeError(ErrorCode::Io, path.string() + ": " + what + (code ? " (" + avError(code) + ")" : std::string()));
    }

    // Sends one frame (nullptr = flush) and writes every packet the encoder has ready.
    Result<void> encode(AVCodecContext* ctx, AVStream* stream, AVFrame* frame)
    {
        int r = avcodec_send_frame(ctx, frame);
        if (r < 0)
            return fail("encoding failed", r);
        while (true) {
            r = avcodec_receive_packet(ctx, packet);
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF)
                return {};
            if (r < 0)
                return fail("encoding failed", r);
            av_packet_rescale_ts(packet, ctx->time_base, stream->time_base);
            packet->stream_index = stream->index;
            r = av_interleaved_write_frame(format, packet);
            if (r < 0)
                return fail("writing failed (disk full?)", r);
        }
    }

    Result<void> drainAudio(bool final)
    {
        while (av_audio_fifo_size(fifo) >= audio->frame_size || (final && av_audio_fifo_size(fifo) > 0)) {
            const int n = std::min(av_audio_fifo_size(fifo), audio->frame_size);
            if (int r = av_frame_make_writable(audioFrame); r < 0)
                return fail("audio buffer", r);
            audioFrame->nb_samples = n;
            if (av_audio_fifo_read(fifo, reinterpret_cast<void**>(audioFrame->data), n) < n)
                return fail("audio buffer underrun");
            audioFrame->pts = audioSamples;
            audioSamples += n;
            if (auto r = encode(audio, audioStream, audioFrame); !r)
                return r;
        }
        return {};
    }
};

Mp4Writer::Mp4Writer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Mp4Writer::~Mp4Writer() = default;

std::int64_t Mp4Writer::framesWritten() const
{
    return m_impl->frames;
}

Result<std::unique_ptr<Mp4Writer>> Mp4Writer::open(const std::filesystem::path& path, const VideoStreamSpec& videoSpec,
    const std::optional<AudioStreamSpec>& audioSpec, const std::map<std::string, std::string>& metadata)
{
    // Encoder chatter (x264's banner, the muxer's second pass) is not for the user; failures
    // come back as errors with FFmpeg's reason.
    av_log_set_level(AV_LOG_ERROR);
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->videoSpec = videoSpec;
    impl->audioSpec = audioSpec;
    if (videoSpec.width <= 0 || videoSpec.height <= 0 || (!videoSpec.lossless && (videoSpec.width % 2 || videoSpec.height % 2)))
        return makeError(ErrorCode::InvalidArgument,
            path.string() + ": H.264 4:2:0 needs an even frame size, got " + std::to_string(videoSpec.width) + "x"
                + std::to_string(videoSpec.height));
    if (!(videoSpec.fps > 0))
        return makeError(ErrorCode::InvalidArgument, path.string() + ": the frame rate must be positive");
    // POSIX rather than std::filesystem: the torch wheel's libtorch exports its own copy.
    if (::access(path.c_str(), F_OK) == 0)
        return makeError(
            ErrorCode::InvalidArgument, path.string() + ": the file exists; choose another name (outputs are never overwritten)");
    impl->tmp = partialPath(path);

    int r = avformat_alloc_output_context2(&impl->format, nullptr, "mp4", impl->tmp.c_str());
    if (r < 0 || !impl->format)
        return impl->fail("cannot set up an MP4 file", r);

    const AVCodec* h264 = avcodec_find_encoder_by_name(videoSpec.lossless ? "libx264rgb" : "libx264");
    if (!h264 && !videoSpec.lossless)
        h264 = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (!h264)
        return makeError(ErrorCode::Unsupported,
            std::string("this FFmpeg has no ") + (videoSpec.lossless ? "libx264rgb" : "H.264")
                + " encoder (scripts/ffmpeg.sh builds one with it)");
    const AVPixelFormat encoded = videoSpec.lossless ? AV_PIX_FMT_RGB24 : AV_PIX_FMT_YUV420P;
    impl->videoStream = avformat_new_stream(impl->format, nullptr);
    impl->video = avcodec_alloc_context3(h264);
    const AVRational rate = av_d2q(videoSpec.fps, 100000);
    impl->video->width = videoSpec.width;
    impl->video->height = videoSpec.height;
    impl->video->pix_fmt = encoded;
    impl->video->time_base = av_inv_q(rate);
    impl->video->framerate = rate;
    impl->video->gop_size = 48;
    if (impl->format->oformat->flags & AVFMT_GLOBALHEADER)
        impl->video->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary* opts = nullptr;
    if (std::string(h264->name) == "libx264") {
        av_dict_set(&opts, "crf", std::to_string(videoSpec.crf).c_str(), 0);
        av_dict_set(&opts, "preset", videoSpec.preset.c_str(), 0);
    } else if (std::string(h264->name) == "libx264rgb") {
        av_dict_set(&opts, "qp", "0", 0);
        av_dict_set(&opts, "preset", "ultrafast", 0);
    }
    r = avcodec_open2(impl->video, h264, &opts);
    av_dict_free(&opts);
    if (r < 0)
        return impl->fail("cannot open the H.264 encoder", r);
    avcodec_parameters_from_context(impl->videoStream->codecpar, impl->video);
    impl->videoStream->time_base = impl->video->time_base;
    impl->videoStream->avg_frame_rate = rate;

    if (audioSpec) {
        const AVCodec* aac = avcodec_find_encoder(AV_CODEC_ID_AAC);
        if (!aac)
            return makeError(ErrorCode::Unsupported, "this FFmpeg has no AAC encoder");
        impl->audioStream = avformat_new_stream(impl->format, nullptr);
        impl->audio = avcodec_alloc_context3(aac);
        impl->audio->sample_fmt = AV_SAMPLE_FMT_FLTP;
        impl->audio->sample_rate = audioSpec->sampleRate;
        av_channel_layout_default(&impl->audio->ch_layout, audioSpec->channels);
        impl->audio->bit_rate = audioSpec->bitRate;
        impl->audio->time_base = AVRational{1, audioSpec->sampleRate};
        if (impl->format->oformat->flags & AVFMT_GLOBALHEADER)
            impl->audio->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
        r = avcodec_open2(impl->audio, aac, nullptr);
        if (r < 0)
            return impl->fail("cannot open the AAC encoder at " + std::to_string(audioSpec->sampleRate) + " Hz", r);
        avcodec_parameters_from_context(impl->audioStream->codecpar, impl->audio);
        impl->audioStream->time_base = impl->audio->time_base;
        impl->audioFrame = av_frame_alloc();
        impl->audioFrame->format = impl->audio->sample_fmt;
        impl->audioFrame->sample_rate = impl->audio->sample_rate;
        av_channel_layout_copy(&impl->audioFrame->ch_layout, &impl->audio->ch_layout);
        impl->audioFrame->nb_samples = impl->audio->frame_size;
        if ((r = av_frame_get_buffer(impl->audioFrame, 0)) < 0)
            return impl->fail("audio buffer", r);
        impl->fifo = av_audio_fifo_alloc(impl->audio->sample_fmt, audioSpec->channels, impl->audio->frame_size * 4);
    }

    for (const auto& [key, value] : metadata)
        av_dict_set(&impl->format->metadata, key.c_str(), value.c_str(), 0);

    impl->videoFrame = av_frame_alloc();
    impl->videoFrame->format = encoded;
    impl->videoFrame->width = videoSpec.width;
    impl->videoFrame->height = videoSpec.height;
    if ((r = av_frame_get_buffer(impl->videoFrame, 0)) < 0)
        return impl->fail("video buffer", r);
    if (!videoSpec.lossless) {
        impl->sws = sws_getContext(videoSpec.width, videoSpec.height, AV_PIX_FMT_RGB24, videoSpec.width, videoSpec.height,
            AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr, nullptr);
        if (!impl->sws)
            return impl->fail("cannot set up the colour conversion");
    }
    impl->packet = av_packet_alloc();

    if ((r = avio_open(&impl->format->pb, impl->tmp.c_str(), AVIO_FLAG_WRITE)) < 0)
        return impl->fail("cannot create the file (is the folder writable?)", r);
    // Custom keys (vireo_recipe) are only written as MP4 tags with use_metadata_tags.
    AVDictionary* muxOpts = nullptr;
    av_dict_set(&muxOpts, "movflags", "+use_metadata_tags+faststart", 0);
    r = avformat_write_header(impl->format, &muxOpts);
    av_dict_free(&muxOpts);
    if (r < 0)
        return impl->fail("cannot write the MP4 header", r);
    return std::unique_ptr<Mp4Writer>(new Mp4Writer(std::move(impl)));
}

Result<void> Mp4Writer::writeFrame(const std::uint8_t* rgb, std::int64_t strideBytes)
{
    auto& m = *m_impl;
    if (m.finished)
        return makeError(ErrorCode::InvalidArgument, m.path.string() + ": the file is already finished");
    if (int r = av_frame_make_writable(m.videoFrame); r < 0)
        return m.fail("video buffer", r);
    // swscale's SIMD reads up to a vector past the last pixel (valgrind sees it); the caller's
    // buffer ends exactly at the frame, so the rows go through a padded copy.
    const auto rowBytes = static_cast<std::size_t>(m.videoSpec.width) * 3;
    if (m.videoSpec.lossless) {
        for (int y = 0; y < m.videoSpec.height; ++y)
            std::memcpy(
                m.videoFrame->data[0] + static_cast<std::ptrdiff_t>(m.videoFrame->linesize[0]) * y, rgb + strideBytes * y, rowBytes);
        m.videoFrame->pts = m.frames++;
        return m.encode(m.video, m.videoStream, m.videoFrame);
    }
    m.padded.resize(rowBytes * static_cast<std::size_t>(m.videoSpec.height) + AV_INPUT_BUFFER_PADDING_SIZE);
    for (int y = 0; y < m.videoSpec.height; ++y)
        std::memcpy(m.padded.data() + rowBytes * static_cast<std::size_t>(y), rgb + strideBytes * y, rowBytes);
    const std::uint8_t* src[1] = {m.padded.data()};
    const int stride[1] = {static_cast<int>(rowBytes)};
    sws_scale(m.sws, src, stride, 0, m.videoSpec.height, m.videoFrame->data, m.videoFrame->linesize);
    m.videoFrame->pts = m.frames++;
    return m.encode(m.video, m.videoStream, m.videoFrame);
}

Result<void> Mp4Writer::writeAudio(const float* const* planes, std::int64_t samples)
{
    auto& m = *m_impl;
    if (!m.audio)
        return makeError(ErrorCode::InvalidArgument, m.path.string() + ": this file has no audio stream");
    if (samples <= 0)
        return {};
    if (av_audio_fifo_write(m.fifo, const_cast<void**>(reinterpret_cast<const void* const*>(planes)), static_cast<int>(samples)) < samples)
        return m.fail("audio buffer");
    return m.drainAudio(false);
}

Result<void> Mp4Writer::finish()
{
    auto& m = *m_impl;
    if (m.finished)
        return {};
    if (m.frames == 0)
        return makeError(ErrorCode::InvalidArgument, m.path.string() + ": no frame was written");
    if (auto r = m.encode(m.video, m.videoStream, nullptr); !r)
        return r;
    if (m.audio) {
        if (auto r = m.drainAudio(true); !r)
            return r;
        if (auto r = m.encode(m.audio, m.audioStream, nullptr); !r)
            return r;
    }
    if (int r = av_write_trailer(m.format); r < 0)
        return m.fail("cannot finish the MP4", r);
    // The last buffered bytes reach the file on close; a full disk can surface only here.
    if (int r = avio_closep(&m.format->pb); r < 0)
        return m.fail("cannot finish the MP4", r);
    // On disk before it takes the final name, so a crash never leaves an empty "finished" video.
    if (int fd = ::open(m.tmp.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
        const int synced = ::fsync(fd);
        const int err = errno;
        ::close(fd);
        if (synced != 0)
            return m.fail("cannot finish the MP4", AVERROR(err));
    }
    if (const int err = moveWithoutReplacing(m.tmp, m.path); err != 0) {
        if (err != EEXIST)
            return m.fail("cannot move the finished video into place", AVERROR(err));
        m.finished = true;  // the temporary is the only copy of this video now: keep it
        return makeError(ErrorCode::InvalidArgument,
            m.path.string() + ": a file appeared under this name while writing; the video is kept as " + m.tmp.string());
    }
    m.finished = true;
    return {};
}

}  // namespace vireo::media
