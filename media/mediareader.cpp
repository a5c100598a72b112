#include "media/mediareader.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

namespace vireo::media {

namespace {

std::string avError(int code)
{
    char text[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(code, text, sizeof text);
    return text;
}

Error mediaError(const std::filesystem::path& path, const std::string& what, ErrorCode code = ErrorCode::InvalidFormat)
{
    return makeError(code, path.string() + ": " + what);
}

struct FormatCloser {
    void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct CodecCloser {
    void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameCloser {
    void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketCloser {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
};
using FormatPtr = std::unique_ptr<AVFormatContext, FormatCloser>;

Result<FormatPtr> openInput(const std::filesystem::path& path)
{
    AVFormatContext* raw = nullptr;
    if (const int e = avformat_open_input(&raw, path.c_str(), nullptr, nullptr); e < 0)
        return mediaError(path, "cannot be opened as a media file (" + avError(e) + ")",
            e == AVERROR(ENOENT) ? ErrorCode::NotFound : ErrorCode::InvalidFormat);
    FormatPtr format(raw);
    if (const int e = avformat_find_stream_info(format.get(), nullptr); e < 0)
        return mediaError(path, "the streams cannot be read (" + avError(e) + "; truncated or damaged?)", ErrorCode::Truncated);
    return format;
}

// Decoded frames of absurd size are refused before anything is allocated for them.
bool sane(int w, int h)
{
    return w > 0 && h > 0 && w <= 16384 && h <= 16384;
}

// An MP4 cut short (an interrupted copy, a full disk) still opens and may even decode its
// first frames; its top-level boxes say how long it should be. Returns what is missing, or
// nothing for a whole file (or one that is not ISO-BMFF).
std::string mp4Truncation(const std::filesystem::path& path)
{
    std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!file || std::fseek(file.get(), 0, SEEK_END) != 0)
        return {};
    const long long size = std::ftell(file.get());
    long long offset = 0;
    for (int box = 0; box < 4096 && offset + 8 <= size; ++box) {
        unsigned char h[16];
        if (std::fseek(file.get(), offset, SEEK_SET) != 0 || std::fread(h, 1, 8, file.get()) != 8)
            return {};
        const std::string type(reinterpret_cast<const char*>(h + 4), 4);
        if (box == 0 && type != "ftyp")
            return {};
        unsigned long long boxSize = (std::uint64_t(h[0]) << 24) | (std::uint64_t(h[1]) << 16) | (std::uint64_t(h[2]) << 8) | h[3];
        if (boxSize == 0)
            return {};  // runs to the end of the file by definition
        if (boxSize == 1) {
            if (std::fread(h + 8, 1, 8, file.get()) != 8)
                return "the " + type + " box header is cut short";
            boxSize = 0;
            for (int i = 8; i < 16; ++i)
                boxSize = (boxSize << 8) | h[i];
        }
        if (boxSize < 8)
            return "a box of impossible size " + std::to_string(boxSize) + " at byte " + std::to_string(offset);
        if (boxSize > static_cast<unsigned long long>(size - offset))
            return "the file is cut short: its " + type + " box needs " + std::to_string(boxSize) + " bytes from byte "
                + std::to_string(offset) + ", and " + std::to_string(size - offset) + " are there";
        offset += static_cast<long long>(boxSize);
    }
    return {};
}

} // namespace

Result<MediaInfo> probeMedia(const std::filesystem::path& path)
{
    auto format = openInput(path);
    if (!format)
        return format.error();
    MediaInfo info;
    info.damage = mp4Truncation(path);
    const AVDictionaryEntry* tag = nullptr;
    while ((tag = av_dict_get((*format)->metadata, "", tag, AV_DICT_IGNORE_SUFFIX)))
        if (tag->key && tag->value && info.tags.size() < 256)
            info.tags[tag->key] = tag->value;
    if ((*format)->duration > 0)
        info.durationSeconds = static_cast<double>((*format)->duration) / AV_TIME_BASE;
    for (unsigned i = 0; i < (*format)->nb_streams; ++i) {
        const AVStream* s = (*format)->streams[i];
        const AVCodecParameters* p = s->codecpar;
        if (p->codec_type == AVMEDIA_TYPE_VIDEO && !info.hasVideo) {
            info.hasVideo = true;
            info.width = p->width;
            info.height = p->height;
            const AVRational rate = s->avg_frame_rate.num ? s->avg_frame_rate : s->r_frame_rate;
            info.fps = rate.den ? av_q2d(rate) : 0;
            info.frames = s->nb_frames;
            if (info.frames <= 0 && info.fps > 0 && info.durationSeconds > 0)
                info.frames = static_cast<std::int64_t>(std::llround(info.durationSeconds * info.fps));
            if (const auto* codec = avcodec_descriptor_get(p->codec_id))
                info.videoCodec = codec->name;
        } else if (p->codec_type == AVMEDIA_TYPE_AUDIO && !info.hasAudio) {
            info.hasAudio = true;
            info.sampleRate = p->sample_rate;
            info.channels = p->ch_layout.nb_channels;
            if (const auto* codec = avcodec_descriptor_get(p->codec_id))
                info.audioCodec = codec->name;
        }
    }
    return info;
}

Result<RgbImage> frameAt(const std::filesystem::path& path, double seconds, int maxWidth)
{
    auto format = openInput(path);
    if (!format)
        return format.error();
    AVFormatContext* f = format->get();
    const int index = av_find_best_stream(f, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (index < 0)
        return mediaError(path, "has no video stream");
    const AVStream* stream = f->streams[index];
    const AVCodec* codec = avcodec_find_decoder(stream->codecpar->codec_id);
    if (!codec)
        return mediaError(path, "its video codec cannot be decoded by this FFmpeg", ErrorCode::Unsupported);
    std::unique_ptr<AVCodecContext, CodecCloser> decoder(avcodec_alloc_context3(codec));
    if (!decoder || avcodec_parameters_to_context(decoder.get(), stream->codecpar) < 0)
        return mediaError(path, "the video decoder cannot be set up", ErrorCode::Internal);
    decoder->thread_count = 1;
    if (const int e = avcodec_open2(decoder.get(), codec, nullptr); e < 0)
        return mediaError(path, "the video decoder cannot be opened (" + avError(e) + ")");
    if (!sane(decoder->width, decoder->height))
        return mediaError(path, "declares a video of " + std::to_string(decoder->width) + "x" + std::to_string(decoder->height) + " pixels");

    std::int64_t target = 0;
    if (seconds > 0 && stream->time_base.num > 0) {
        target = static_cast<std::int64_t>(seconds / av_q2d(stream->time_base));
        // The nearest key frame before the target, then decode forward to it.
        av_seek_frame(f, index, target, AVSEEK_FLAG_BACKWARD);
        avcodec_flush_buffers(decoder.get());
    }
    std::unique_ptr<AVPacket, PacketCloser> packet(av_packet_alloc());
    std::unique_ptr<AVFrame, FrameCloser> frame(av_frame_alloc());
    std::unique_ptr<AVFrame, FrameCloser> best(av_frame_alloc());
    if (!packet || !frame || !best)
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    bool have = false;
    auto take = [&]() -> bool {
        // The first frame at or after the target; the last one decoded otherwise.
        av_frame_unref(best.get());
        av_frame_ref(best.get(), frame.get());
        have = true;
        return frame->best_effort_timestamp != AV_NOPTS_VALUE && frame->best_effort_timestamp >= target;
    };
    bool done = false;
    for (int packets = 0; !done && packets < 100000; ++packets) {
        const int r = av_read_frame(f, packet.get());
        if (r < 0) {
            avcodec_send_packet(decoder.get(), nullptr);  // drain
        } else if (packet->stream_index != index) {
            av_packet_unref(packet.get());
            continue;
        } else {
            avcodec_send_packet(decoder.get(), packet.get());
            av_packet_unref(packet.get());
        }
        while (!done) {
            const int d = avcodec_receive_frame(decoder.get(), frame.get());
            if (d == AVERROR(EAGAIN))
                break;
            if (d < 0) {
                done = true;  // end of stream or a broken frame: keep what we have
                break;
            }
            done = take();
            av_frame_unref(frame.get());
        }
        if (r < 0)
            break;
    }
    if (!have)
        return mediaError(path, "no video frame could be decoded (truncated or damaged?)", ErrorCode::Truncated);
    if (!sane(best->width, best->height))
        return mediaError(path, "decoded a frame of " + std::to_string(best->width) + "x" + std::to_string(best->height) + " pixels");
    int w = best->width, h = best->height;
    if (maxWidth > 0 && w > maxWidth) {
        h = std::max(2, static_cast<int>(std::lround(static_cast<double>(h) * maxWidth / w)) / 2 * 2);
        w = maxWidth / 2 * 2;
    }
    SwsContext* sws = sws_getContext(best->width, best->height, static_cast<AVPixelFormat>(best->format), w, h, AV_PIX_FMT_RGB24,
        SWS_AREA, nullptr, nullptr, nullptr);
    if (!sws)
        return mediaError(path, "its pixel format cannot be converted", ErrorCode::Unsupported);
    RgbImage image;
    image.width = w;
    image.height = h;
    // swscale's SIMD may write a little past a row: pad the buffer, trim after.
    std::vector<std::uint8_t> padded(static_cast<std::size_t>(w) * 3 * h + 64);
    std::uint8_t* dst[4] = {padded.data(), nullptr, nullptr, nullptr};
    int dstStride[4] = {w * 3, 0, 0, 0};
    sws_scale(sws, best->data, best->linesize, 0, best->height, dst, dstStride);
    sws_freeContext(sws);
    padded.resize(static_cast<std::size_t>(w) * 3 * h);
    image.rgb = std::move(padded);
    return image;
}

} // namespace vireo::media
