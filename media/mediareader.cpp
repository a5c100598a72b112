#include "media/mediareader.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/samplefmt.h>
#include <libswscale/swscale.h>
}

#include "media/imageheader.h"
#include "media/imageops.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <memory>
#include <string_view>
#include <optional>

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
using CodecPtr = std::unique_ptr<AVCodecContext, CodecCloser>;
using FramePtr = std::unique_ptr<AVFrame, FrameCloser>;

// Why a path is not a file a reader may open: a folder, or a pipe or device (which a reader
// would wait on, or read forever); empty for a regular file or one that does not exist.
std::string notAFile(const std::filesystem::path& path)
{
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status) || std::filesystem::is_regular_file(status))
        return {};
    if (std::filesystem::is_directory(status))
        return "is a folder, not a file";
    return std::filesystem::is_fifo(status) ? "is a pipe, not a file" : "is a device or socket, not a file";
}

Result<FormatPtr> openInput(const std::filesystem::path& path)
{
    if (const auto why = notAFile(path); !why.empty())
        return mediaError(path, why, ErrorCode::InvalidArgument);
    AVFormatContext* raw = nullptr;
    // A path is a local file, never a URL or another protocol ("concat:", "http:" ...),
    // whatever its name looks like.
    AVDictionary* options = nullptr;
    av_dict_set(&options, "protocol_whitelist", "file", 0);
    const int opened = avformat_open_input(&raw, path.c_str(), nullptr, &options);
    av_dict_free(&options);
    if (opened < 0)
        return mediaError(path, "cannot be opened as a media file (" + avError(opened) + ")",
            opened == AVERROR(ENOENT) ? ErrorCode::NotFound : ErrorCode::InvalidFormat);
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

// A decoded frame as packed RGB24 at w x h (scaled with `flags`); empty when its pixel
// format cannot be converted.
std::optional<RgbImage> toRgb(const AVFrame* frame, int w, int h, int flags)
{
    SwsContext* sws = sws_getContext(
        frame->width, frame->height, static_cast<AVPixelFormat>(frame->format), w, h, AV_PIX_FMT_RGB24, flags, nullptr, nullptr, nullptr);
    if (!sws)
        return std::nullopt;
    RgbImage image;
    image.width = w;
    image.height = h;
    // swscale's SIMD may write a little past a row: pad the buffer, trim after.
    std::vector<std::uint8_t> padded(static_cast<std::size_t>(w) * 3 * h + 64);
    std::uint8_t* dst[4] = {padded.data(), nullptr, nullptr, nullptr};
    int dstStride[4] = {w * 3, 0, 0, 0};
    sws_scale(sws, frame->data, frame->linesize, 0, frame->height, dst, dstStride);
    sws_freeContext(sws);
    padded.resize(static_cast<std::size_t>(w) * 3 * h);
    image.rgb = std::move(padded);
    return image;
}

// readImage and readClipFrames convert alike: what a video is conditioned on, at its own size, as accurately as swscale can.
std::optional<RgbImage> toRgbAccurate(const AVFrame* frame)
{
    return toRgb(frame, frame->width, frame->height, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT);
}

// A frame the decoder itself marked as damaged (a truncated JPEG's grey bottom, a PNG chunk
// with a wrong CRC) is not a picture to condition a video on.
bool damaged(const AVFrame* frame)
{
    return (frame->flags & AV_FRAME_FLAG_CORRUPT) || frame->decode_error_flags != 0;
}

std::string pixels(std::int64_t w, std::int64_t h)
{
    return std::to_string(w) + "x" + std::to_string(h) + " pixels";
}

// Reads a file held in memory for libavformat (custom I/O: no protocol, no file name).
struct MemoryInput {
    const std::vector<std::uint8_t>* bytes = nullptr;
    std::int64_t at = 0;

    static int read(void* opaque, std::uint8_t* buffer, int size)
    {
        auto* self = static_cast<MemoryInput*>(opaque);
        const auto left = static_cast<std::int64_t>(self->bytes->size()) - self->at;
        if (left <= 0)
            return AVERROR_EOF;
        const int n = static_cast<int>(std::min<std::int64_t>(left, size));
        std::memcpy(buffer, self->bytes->data() + self->at, static_cast<std::size_t>(n));
        self->at += n;
        return n;
    }
    static std::int64_t seek(void* opaque, std::int64_t offset, int whence)
    {
        auto* self = static_cast<MemoryInput*>(opaque);
        const auto size = static_cast<std::int64_t>(self->bytes->size());
        std::int64_t to = 0;
        switch (whence & ~AVSEEK_FORCE) {
        case AVSEEK_SIZE: return size;
        case SEEK_SET: to = offset; break;
        case SEEK_CUR: to = self->at + offset; break;
        case SEEK_END: to = size + offset; break;
        default: return AVERROR(EINVAL);
        }
        if (to < 0 || to > size)
            return AVERROR(EINVAL);
        self->at = to;
        return to;
    }
};

// The HEIF brand of an ISO media file ("heic", "mif1", "avif"...) from its ftyp box (major
// brand or a compatible one), or empty when it is none. Bounded by the box's own size.
std::string heifBrand(const std::vector<std::uint8_t>& bytes)
{
    if (bytes.size() < 16 || std::memcmp(bytes.data() + 4, "ftyp", 4) != 0)
        return {};
    const std::size_t box = (std::size_t(bytes[0]) << 24) | (std::size_t(bytes[1]) << 16) | (std::size_t(bytes[2]) << 8) | bytes[3];
    const std::size_t end = std::min(bytes.size(), std::max<std::size_t>(box, 16));
    static const char* const kBrands[] = {"heic", "heix", "heim", "heis", "hevc", "hevx", "hevm", "hevs", "mif1", "msf1", "avif", "avis"};
    // The major brand at 8, then the compatible brands from 16 (the minor version sits at 12).
    for (std::size_t at = 8; at + 4 <= end; at += at == 8 ? 8 : 4)
        for (const char* b : kBrands)
            if (std::memcmp(bytes.data() + at, b, 4) == 0)
                return b;
    return {};
}

// The demuxers that read one picture (or a sequence of them) rather than a container.
bool imageDemuxer(const char* name)
{
    const std::string n = name ? name : "";
    return n.ends_with("_pipe") || n == "gif";
}

// The turn or mirror a video stream's display matrix asks for, as an EXIF orientation (1 to 8,
// see exifUpright): phones record portrait clips sideways and say so in the container. Read as
// the ffmpeg program's autorotation reads it (and so imageio-ffmpeg, behind diffusers'
// load_video): right angles, with the mirrors the matrix's signs imply. Any other angle is
// left as stored.
int displayOrientation(const AVStream* stream)
{
    std::size_t size = 0;
    const auto* data = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
    if (!data || size < 9 * sizeof(std::int32_t))
        return 1;
    std::int32_t m[9];
    std::memcpy(m, data, sizeof m);
    const double counterClockwise = av_display_rotation_get(m);
    if (!std::isfinite(counterClockwise))
        return 1;
    double theta = std::fmod(-std::round(counterClockwise), 360.0);
    if (theta < 0)
        theta += 360.0;
    if (std::fabs(theta - 90) < 1.0)
        return m[3] > 0 ? 5 : 6;  // transpose: cclock_flip, or clock
    if (std::fabs(theta - 270) < 1.0)
        return m[3] < 0 ? 7 : 8;  // transpose: clock_flip, or cclock
    if (std::fabs(theta - 180) < 1.0) {
        const bool h = m[0] < 0, v = m[4] < 0;
        return h && v ? 3 : h ? 2 : v ? 4 : 1;
    }
    if (std::fabs(theta) < 1.0 || std::fabs(theta - 360) < 1.0)
        return m[4] < 0 ? 4 : 1;
    return 1;
}

struct VideoStream {
    int index = -1;
    const AVStream* stream = nullptr;
    std::unique_ptr<AVCodecContext, CodecCloser> decoder;
    int orientation = 1;  // displayOrientation of the stream
};

// The best video stream of an opened file with its decoder ready (one thread; FFmpeg refuses
// frames above maxPixels when it is given), refusing a size that is absurd or above maxPixels.
Result<VideoStream> openVideoStream(const std::filesystem::path& path, AVFormatContext* f, std::int64_t maxPixels)
{
    VideoStream v;
    v.index = av_find_best_stream(f, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (v.index < 0)
        return mediaError(path, "has no video stream");
    v.stream = f->streams[v.index];
    v.orientation = displayOrientation(v.stream);
    const AVCodec* codec = avcodec_find_decoder(v.stream->codecpar->codec_id);
    if (!codec)
        return mediaError(path, "its video codec cannot be decoded by this FFmpeg", ErrorCode::Unsupported);
    v.decoder.reset(avcodec_alloc_context3(codec));
    if (!v.decoder || avcodec_parameters_to_context(v.decoder.get(), v.stream->codecpar) < 0)
        return mediaError(path, "the video decoder cannot be set up", ErrorCode::Internal);
    v.decoder->thread_count = 1;
    if (maxPixels > 0)
        v.decoder->max_pixels = maxPixels;
    if (const int e = avcodec_open2(v.decoder.get(), codec, nullptr); e < 0)
        return mediaError(path, "the video decoder cannot be opened (" + avError(e) + ")");
    const auto w = v.decoder->width, h = v.decoder->height;
    if (!sane(w, h) || (maxPixels > 0 && static_cast<std::int64_t>(w) * h > maxPixels))
        return mediaError(
            path, "declares a video of " + pixels(w, h), maxPixels > 0 ? ErrorCode::InvalidArgument : ErrorCode::InvalidFormat);
    return v;
}

// Decodes the stream's frames in order and hands each to onFrame (which must not keep it),
// until onFrame says it has enough, the stream ends (the decoder drained) or a frame is
// broken, within maxPackets packets. False when out of memory.
bool decodeFrames(
    AVFormatContext* f, VideoStream& v, int maxPackets, const std::function<bool(AVFrame*)>& onFrame, std::string* stoppedEarly = nullptr)
{
    std::unique_ptr<AVPacket, PacketCloser> packet(av_packet_alloc());
    std::unique_ptr<AVFrame, FrameCloser> frame(av_frame_alloc());
    if (!packet || !frame)
        return false;
    bool done = false;
    for (int packets = 0; !done && packets < maxPackets; ++packets) {
        const int r = av_read_frame(f, packet.get());
        if (r < 0) {
            // A container that ends in an error (mov's "partial file") was cut short.
            if (r != AVERROR_EOF && stoppedEarly && stoppedEarly->empty())
                *stoppedEarly = "its data stops early (" + avError(r) + ")";
            avcodec_send_packet(v.decoder.get(), nullptr);  // drain
        } else if (packet->stream_index != v.index) {
            av_packet_unref(packet.get());
            continue;
        } else {
            avcodec_send_packet(v.decoder.get(), packet.get());
            av_packet_unref(packet.get());
        }
        while (!done) {
            const int d = avcodec_receive_frame(v.decoder.get(), frame.get());
            if (d == AVERROR(EAGAIN))
                break;
            if (d < 0) {
                if (d != AVERROR_EOF && stoppedEarly && stoppedEarly->empty())
                    *stoppedEarly = "a frame does not decode (" + avError(d) + ")";
                done = true;  // end of stream or a broken frame: keep what we have
                break;
            }
            done = onFrame(frame.get());
            av_frame_unref(frame.get());
        }
        if (r < 0)
            break;
    }
    return true;
}

// Seeks to the key frame at or before `count` frames plus `marginSeconds` from the stream's end,
// so that decoding from there reaches its last `count` frames. False (nothing moved) when the
// stream does not say how long it is, or that point is its start.
bool seekBeforeEnd(AVFormatContext* f, VideoStream& v, int count, double marginSeconds)
{
    const AVStream* st = v.stream;
    const AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    if (st->time_base.num <= 0 || st->time_base.den <= 0 || rate.num <= 0 || rate.den <= 0)
        return false;
    const std::int64_t start = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    std::int64_t duration = st->duration;
    if (duration <= 0 && f->duration > 0)
        duration = av_rescale_q(f->duration, AVRational{1, AV_TIME_BASE}, st->time_base);
    if (duration <= 0)
        return false;
    // In doubles first: a hostile header's rates and durations must not overflow the arithmetic.
    const double backTicks = (count / av_q2d(rate) + marginSeconds) / av_q2d(st->time_base);
    if (!(backTicks >= 0) || !(backTicks < static_cast<double>(duration)))
        return false;
    std::int64_t end = 0;
    if (__builtin_add_overflow(start, duration, &end))
        return false;
    const std::int64_t target = end - static_cast<std::int64_t>(backTicks);
    if (target <= start)
        return false;
    if (av_seek_frame(f, v.index, target, AVSEEK_FLAG_BACKWARD) < 0)
        return false;
    avcodec_flush_buffers(v.decoder.get());
    return true;
}

// The Orientation tag (0x0112) of a TIFF structure's first IFD, as EXIF stores it: 1 to 8, or
// 1 when absent, malformed or out of range. Every offset is checked against the bytes given.
int tiffOrientation(const std::uint8_t* data, std::size_t size)
{
    if (size < 8)
        return 1;
    const bool little = data[0] == 'I' && data[1] == 'I';
    if (!little && !(data[0] == 'M' && data[1] == 'M'))
        return 1;
    auto u16 = [&](std::size_t at) {
        return little ? static_cast<unsigned>(data[at] | (data[at + 1] << 8)) : static_cast<unsigned>((data[at] << 8) | data[at + 1]);
    };
    auto u32 = [&](std::size_t at) {
        return little ? (std::uint32_t(data[at]) | (std::uint32_t(data[at + 1]) << 8) | (std::uint32_t(data[at + 2]) << 16)
                   | (std::uint32_t(data[at + 3]) << 24))
                      : ((std::uint32_t(data[at]) << 24) | (std::uint32_t(data[at + 1]) << 16) | (std::uint32_t(data[at + 2]) << 8)
                          | std::uint32_t(data[at + 3]));
    };
    if (u16(2) != 42)
        return 1;
    const std::size_t ifd = u32(4);
    if (ifd > size - 2)
        return 1;
    const std::size_t entries = u16(ifd);
    if (entries > (size - ifd - 2) / 12)
        return 1;
    for (std::size_t i = 0; i < entries; ++i) {
        const std::size_t e = ifd + 2 + 12 * i;
        if (u16(e) == 0x0112) {
            // SHORT, one value, stored in the entry itself.
            if (u16(e + 2) != 3 || u32(e + 4) != 1)
                return 1;
            const unsigned value = u16(e + 8);
            return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
        }
    }
    return 1;
}

// A PNG's eXIf chunk orientation (FFmpeg 5.1's PNG decoder does not read that chunk; Pillow,
// and so diffusers' load_image, does). Chunks are walked with their lengths checked; 1 when
// there is none.
int pngExifOrientation(const std::vector<std::uint8_t>& bytes)
{
    static const std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (bytes.size() < 8 || std::memcmp(bytes.data(), kSignature, 8) != 0)
        return 1;
    std::size_t at = 8;
    while (bytes.size() - at >= 12) {
        const std::uint32_t length = (std::uint32_t(bytes[at]) << 24) | (std::uint32_t(bytes[at + 1]) << 16)
            | (std::uint32_t(bytes[at + 2]) << 8) | std::uint32_t(bytes[at + 3]);
        if (length > bytes.size() - at - 12)
            return 1;
        const auto* type = &bytes[at + 4];
        if (std::memcmp(type, "eXIf", 4) == 0)
            return tiffOrientation(&bytes[at + 8], length);
        if (std::memcmp(type, "IEND", 4) == 0)
            return 1;
        at += 12 + static_cast<std::size_t>(length);
    }
    return 1;
}

// The EXIF orientation tag the decoder reported (1 to 8), or 1 when there is none or it is
// not a single number in range (a hostile file gets no transform at all).
int exifOrientation(const AVFrame* frame)
{
    const AVDictionaryEntry* entry = av_dict_get(frame->metadata, "Orientation", nullptr, AV_DICT_MATCH_CASE);
    if (!entry || !entry->value)
        return 1;
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(entry->value, &end, 10);
    if (errno != 0 || end == entry->value || *end != '\0' || value < 1 || value > 8)
        return 1;
    return static_cast<int>(value);
}

}  // namespace

Result<MediaInfo> probeMedia(const std::filesystem::path& path)
{
    auto format = openInput(path);
    if (!format)
        return format.error();
    MediaInfo info;
    info.damage = mp4Truncation(path);
    if ((*format)->iformat && (*format)->iformat->name)
        info.container = (*format)->iformat->name;
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
            // As displayed: a clip recorded sideways with a quarter turn in its matrix is portrait.
            const bool turned = displayOrientation(s) >= 5;
            info.width = turned ? p->height : p->width;
            info.height = turned ? p->width : p->height;
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
    auto video = openVideoStream(path, f, 0);
    if (!video)
        return video.error();
    std::int64_t target = 0;
    if (seconds > 0 && video->stream->time_base.num > 0) {
        target = static_cast<std::int64_t>(seconds / av_q2d(video->stream->time_base));
        // The nearest key frame before the target, then decode forward to it.
        av_seek_frame(f, video->index, target, AVSEEK_FLAG_BACKWARD);
        avcodec_flush_buffers(video->decoder.get());
    }
    std::unique_ptr<AVFrame, FrameCloser> best(av_frame_alloc());
    bool have = false;
    // The first frame at or after the target; the last one decoded otherwise.
    const bool decoded = best && decodeFrames(f, *video, 100000, [&](AVFrame* frame) {
        av_frame_unref(best.get());
        av_frame_ref(best.get(), frame);
        have = true;
        return frame->best_effort_timestamp != AV_NOPTS_VALUE && frame->best_effort_timestamp >= target;
    });
    if (!decoded)
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    if (!have)
        return mediaError(path, "no video frame could be decoded (truncated or damaged?)", ErrorCode::Truncated);
    if (!sane(best->width, best->height))
        return mediaError(path, "decoded a frame of " + std::to_string(best->width) + "x" + std::to_string(best->height) + " pixels");
    // maxWidth bounds the width as displayed, which is the stored height of a clip turned a quarter.
    const bool turned = video->orientation >= 5;
    int w = turned ? best->height : best->width, h = turned ? best->width : best->height;
    if (maxWidth > 0 && w > maxWidth) {
        h = std::max(2, static_cast<int>(std::lround(static_cast<double>(h) * maxWidth / w)) / 2 * 2);
        w = maxWidth / 2 * 2;
    }
    auto image = turned ? toRgb(best.get(), h, w, SWS_AREA) : toRgb(best.get(), w, h, SWS_AREA);
    if (!image)
        return mediaError(path, "its pixel format cannot be converted", ErrorCode::Unsupported);
    if (video->orientation > 1)
        return exifUpright(*image, video->orientation);
    return std::move(*image);
}

namespace {

// readImage's first stage: the whole file in memory, refused before its buffer is allocated when it is no regular file, empty or too big.
Result<std::vector<std::uint8_t>> readImageBytes(const std::filesystem::path& path)
{
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        return mediaError(path, "no such file", ErrorCode::NotFound);
    if (!std::filesystem::is_regular_file(status))
        return mediaError(path, notAFile(path), ErrorCode::InvalidArgument);
    const auto size = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
    if (ec)
        return mediaError(path, "cannot be read (" + ec.message() + ")", ErrorCode::Io);
    if (size == 0)
        return mediaError(path, "not an image FFmpeg can decode (the file is empty)");
    if (size > kMaxImageFileBytes)
        return mediaError(path,
            "is " + std::to_string(size >> 20) + " MiB; a still image may be at most " + std::to_string(kMaxImageFileBytes >> 20) + " MiB",
            ErrorCode::InvalidArgument);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
    {
        std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
        if (!file)
            return mediaError(path, "cannot be opened (" + std::string(std::strerror(errno)) + ")",
                errno == EACCES ? ErrorCode::PermissionDenied : ErrorCode::Io);
        if (std::fread(bytes.data(), 1, bytes.size(), file.get()) != bytes.size())
            return mediaError(path, "cannot be read to the end (changed while reading?)", ErrorCode::Io);
    }
    return bytes;
}

// What is refused, or cut out, from a still's bytes before FFmpeg parses any of them.
Result<void> screenImageBytes(const std::filesystem::path& path, std::vector<std::uint8_t>& bytes, std::int64_t maxPixels)
{
    // HEIF pictures (HEIC, the iPhone's default; AVIF) are ISO media files to FFmpeg 5.1, which
    // cannot read them: say what the file is and what to do, not that it "looks like a MOV".
    if (const auto brand = heifBrand(bytes); brand == "avif" || brand == "avis")
        return mediaError(
            path, "is a HEIF picture (AVIF), which this version cannot read: export it as JPEG or PNG", ErrorCode::Unsupported);
    else if (!brand.empty())
        return mediaError(path,
            "is a HEIF picture (HEIC, as iPhones save photos), which this version cannot read: export it as JPEG or PNG "
            "(an iPhone saves JPEG with Settings, Camera, Formats, Most Compatible)",
            ErrorCode::Unsupported);
    // Text and ICC chunks of a PNG never reach FFmpeg, which would inflate them without a bound;
    // a size over the limit is refused as such from the header, before any decoder runs.
    stripInflatablePngChunks(bytes);
    // Divided, not multiplied: a header may say 4294967271 x 3890735079 (found by fuzz_media).
    if (const auto declared = declaredImageSize(bytes);
        declared && declared->width > 0 && declared->height > 0 && declared->width > maxPixels / declared->height)
        return mediaError(path,
            "is " + pixels(declared->width, declared->height) + " (its " + declared->format + " header says so), more than "
                + std::to_string(maxPixels) + " pixels, the most a still is read with; scale it down first",
            ErrorCode::InvalidArgument);
    return {};
}

// The demuxer for the bytes, which readImage accepts only when it is one of FFmpeg's picture formats.
Result<const AVInputFormat*> probeImageDemuxer(const std::filesystem::path& path, AVIOContext* io)
{
    const AVInputFormat* demuxer = nullptr;
    const int score = av_probe_input_buffer2(io, &demuxer, "", nullptr, 0, 0);
    if (score < 0 || !demuxer)
        return mediaError(path, "not an image FFmpeg can decode (" + (score < 0 ? avError(score) : std::string("unknown format")) + ")");
    // A guess this weak (noise that might be MP3) is no format at all.
    if (score < AVPROBE_SCORE_RETRY)
        return mediaError(path, "not an image FFmpeg can decode (unknown format)");
    // Only picture formats are parsed further: a still that is really a playlist or a
    // container is refused before any of its headers are read.
    if (!imageDemuxer(demuxer->name))
        return mediaError(path,
            std::string("not an image FFmpeg can decode (it looks like ") + (demuxer->long_name ? demuxer->long_name : demuxer->name)
                + ", not a picture)");
    return demuxer;
}

// The still opened through the caller's `io` (custom I/O: the context reads through it and does not own it), a picture stream first.
Result<FormatPtr> openImageInput(const std::filesystem::path& path, AVIOContext* io, const AVInputFormat* demuxer)
{
    AVFormatContext* raw = avformat_alloc_context();
    if (!raw)
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    raw->pb = io;
    raw->flags |= AVFMT_FLAG_CUSTOM_IO;
    if (const int e = avformat_open_input(&raw, "", demuxer, nullptr); e < 0)
        return mediaError(path, "not an image FFmpeg can decode (" + avError(e) + ")");
    FormatPtr format(raw);
    if (format->nb_streams < 1 || format->streams[0]->codecpar->codec_type != AVMEDIA_TYPE_VIDEO)
        return mediaError(path, "not an image FFmpeg can decode (no picture in it)");
    return format;
}

// The picture stream's decoder, set up to refuse what a hostile still declares (too many pixels, damage) before it allocates.
Result<CodecPtr> openImageDecoder(const std::filesystem::path& path, const AVFormatContext* format, std::int64_t maxPixels)
{
    const AVCodecParameters* par = format->streams[0]->codecpar;
    if (par->width > 0 && par->height > 0 && static_cast<std::int64_t>(par->width) * par->height > maxPixels)
        return mediaError(path, "is " + pixels(par->width, par->height) + "; at most " + std::to_string(maxPixels) + " pixels are read",
            ErrorCode::InvalidArgument);
    const AVCodec* codec = avcodec_find_decoder(par->codec_id);
    if (!codec)
        return mediaError(path,
            std::string("not an image FFmpeg can decode (this FFmpeg has no ") + avcodec_get_name(par->codec_id) + " decoder)",
            ErrorCode::Unsupported);
    CodecPtr decoder(avcodec_alloc_context3(codec));
    if (!decoder || avcodec_parameters_to_context(decoder.get(), par) < 0)
        return mediaError(path, "the image decoder cannot be set up", ErrorCode::Internal);
    decoder->thread_count = 1;
    // The decoder refuses a header that declares more pixels before allocating them.
    decoder->max_pixels = maxPixels;
    // Damage is an error, not a picture with a grey end. Except for TIFF: its decoder then also
    // refuses every tag it does not know, Orientation among them, which cameras and scanners all
    // write; a strip cut short is still refused without it.
    decoder->err_recognition = AV_EF_CRCCHECK | AV_EF_BITSTREAM | (codec->id == AV_CODEC_ID_TIFF ? 0 : AV_EF_EXPLODE);
    if (const int e = avcodec_open2(decoder.get(), codec, nullptr); e < 0)
        return mediaError(path, "not an image FFmpeg can decode (the decoder refused it: " + avError(e) + ")");
    return decoder;
}

// The still's one picture, decoded and checked (size, damage) before anything is converted or allocated for it.
Result<FramePtr> decodeImageFrame(
    const std::filesystem::path& path, AVFormatContext* format, AVCodecContext* decoder, std::int64_t maxPixels)
{
    std::unique_ptr<AVPacket, PacketCloser> packet(av_packet_alloc());
    FramePtr frame(av_frame_alloc());
    if (!packet || !frame)
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    std::string problem;
    bool have = false;
    for (int packets = 0; !have && packets < 64; ++packets) {
        const int r = av_read_frame(format, packet.get());
        int sent = 0;
        if (r < 0) {
            sent = avcodec_send_packet(decoder, nullptr);
        } else {
            if (packet->stream_index == 0)
                sent = avcodec_send_packet(decoder, packet.get());
            av_packet_unref(packet.get());
        }
        int failure = sent < 0 && sent != AVERROR_EOF && sent != AVERROR(EAGAIN) ? sent : 0;
        if (!failure) {
            const int d = avcodec_receive_frame(decoder, frame.get());
            if (d == 0)
                have = true;
            else if (d != AVERROR(EAGAIN) && d != AVERROR_EOF)
                failure = d;
            else if (d == AVERROR_EOF)
                break;
        }
        if (failure) {
            // A header over max_pixels is refused with EINVAL before the decoder says its size.
            problem = failure == AVERROR(EINVAL) ? "its header declares more than " + std::to_string(maxPixels) + " pixels, or is damaged"
                                                 : avError(failure) + "; truncated or damaged?";
            break;
        }
        if (r < 0)
            break;
    }
    if (decoder->width > 0 && decoder->height > 0 && static_cast<std::int64_t>(decoder->width) * decoder->height > maxPixels)
        return mediaError(path,
            "is " + pixels(decoder->width, decoder->height) + "; at most " + std::to_string(maxPixels) + " pixels are read",
            ErrorCode::InvalidArgument);
    if (!have)
        return mediaError(path,
            "not an image FFmpeg can decode (" + (problem.empty() ? std::string("no picture in it; truncated?") : problem) + ")",
            ErrorCode::InvalidFormat);
    if (damaged(frame.get()))
        return mediaError(path, "not an image FFmpeg can decode (the picture is damaged or cut short)");
    if (!sane(frame->width, frame->height) || static_cast<std::int64_t>(frame->width) * frame->height > maxPixels)
        return mediaError(path, "decoded a picture of " + pixels(frame->width, frame->height), ErrorCode::InvalidArgument);
    return frame;
}

}  // namespace

Result<RgbImage> readImage(const std::filesystem::path& path, std::int64_t maxPixels)
{
    auto read = readImageBytes(path);
    if (!read)
        return read.error();
    std::vector<std::uint8_t>& bytes = *read;
    if (auto screened = screenImageBytes(path, bytes, maxPixels); !screened)
        return screened.error();
    MemoryInput input{&bytes, 0};
    constexpr int kBufferBytes = 64 << 10;
    auto* buffer = static_cast<std::uint8_t*>(av_malloc(kBufferBytes));
    if (!buffer)
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    AVIOContext* io = avio_alloc_context(buffer, kBufferBytes, 0, &input, &MemoryInput::read, nullptr, &MemoryInput::seek);
    if (!io) {
        av_free(buffer);
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    }
    // The format context goes first: it reads through `io`, which it does not own.
    struct IoCloser {
        AVIOContext* io;
        ~IoCloser()
        {
            av_freep(&io->buffer);
            avio_context_free(&io);
        }
    } ioCloser{io};
    // The decoders' own complaints ("CRC mismatch in chunk") would reach the terminal beside
    // the error this function returns, which says the same for the file by name.
    if (av_log_get_level() > AV_LOG_FATAL)
        av_log_set_level(AV_LOG_FATAL);
    auto probed = probeImageDemuxer(path, io);
    if (!probed)
        return probed.error();
    const AVInputFormat* demuxer = *probed;
    auto format = openImageInput(path, io, demuxer);
    if (!format)
        return format.error();
    auto decoder = openImageDecoder(path, format->get(), maxPixels);
    if (!decoder)
        return decoder.error();
    auto decoded = decodeImageFrame(path, format->get(), decoder->get(), maxPixels);
    if (!decoded)
        return decoded.error();
    const AVFrame* frame = decoded->get();
    auto image = toRgbAccurate(frame);
    if (!image)
        return mediaError(path,
            std::string("its pixel format (") + av_get_pix_fmt_name(static_cast<AVPixelFormat>(frame->format))
                + ") cannot be converted to RGB",
            ErrorCode::Unsupported);
    // A phone's portrait photo is stored sideways with an EXIF tag that says so; FFmpeg's JPEG
    // and WebP decoders report the tag in the frame's metadata, a PNG's eXIf chunk and a TIFF's
    // own Orientation tag (the same tag, in its first IFD; FFmpeg's TIFF decoder skips it) are
    // read here.
    int orientation = exifOrientation(frame);
    if (orientation == 1 && std::string_view(demuxer->name) == "png_pipe")
        orientation = pngExifOrientation(bytes);
    else if (orientation == 1 && std::string_view(demuxer->name) == "tiff_pipe")
        orientation = tiffOrientation(bytes.data(), bytes.size());
    if (orientation > 1)
        return exifUpright(*image, orientation);
    return std::move(*image);
}

namespace {

// From the start of a clip without a known length, the frames decoded to find its end are
// bounded: ten minutes at 60 fps.
constexpr std::int64_t kMaxFramesToFindTheEnd = 36000;

// readClipFrames' state across its decoding passes and the checks after them, kept together so each stage sees the same frames.
struct ClipFrames {
    int count = 0;
    int fitWidth = 0, fitHeight = 0;
    bool fit = false;
    bool fromEnd = false;
    std::int64_t maxPixels = 0;
    int orientation = 1;  // displayOrientation of the stream
    bool convertEach = false;  // frames are converted as they come rather than held

    // Decoded frames held as they came (references, no copy): from the end, only the last
    // `count` are converted to RGB, once it is known which they are. Converting every frame of a
    // long clip to keep nine cost seconds per thousand frames.
    std::deque<FramePtr> held;
    std::deque<RgbImage> frames;
    std::string problem, stoppedEarly;
    std::int64_t lastPts = AV_NOPTS_VALUE, decodedFrames = 0;
    int width = 0, height = 0;
    bool endUnknown = false;

    // Both ways of keeping a frame (as it comes, or once known to be among the last) end here.
    bool convert(const AVFrame* frame)
    {
        auto rgb = toRgbAccurate(frame);
        if (!rgb) {
            problem = "its pixel format cannot be converted to RGB";
            return false;
        }
        if (orientation > 1)
            *rgb = exifUpright(*rgb, orientation);
        frames.push_back(fit ? fitToSize(*rgb, fitWidth, fitHeight) : std::move(*rgb));
        return true;
    }

    // decodeFrames' onFrame: every frame is checked here before it is kept; true stops the decoding.
    bool onFrame(AVFrame* frame)
    {
        if (decodedFrames++ == 0) {
            width = frame->width;
            height = frame->height;
        }
        if (frame->width != width || frame->height != height) {
            problem = "its frames change size (" + pixels(width, height) + ", then " + pixels(frame->width, frame->height) + ")";
            return true;
        }
        if (!sane(frame->width, frame->height) || static_cast<std::int64_t>(frame->width) * frame->height > maxPixels) {
            problem = "decoded a frame of " + pixels(frame->width, frame->height);
            return true;
        }
        if (frame->best_effort_timestamp != AV_NOPTS_VALUE)
            lastPts = frame->best_effort_timestamp;
        if (endUnknown && decodedFrames > kMaxFramesToFindTheEnd) {
            problem = "declares no duration, so its end can only be found by decoding it all, and it holds more than "
                + std::to_string(kMaxFramesToFindTheEnd)
                + " frames; give its end as a shorter clip, or remux it so its length is known "
                  "(ffmpeg -i IN -c copy OUT.mkv)";
            return true;
        }
        if (convertEach) {
            if (!convert(frame))
                return true;
            if (static_cast<int>(frames.size()) > count)
                frames.pop_front();  // from the end: only the last `count` are kept
            return !fromEnd && static_cast<int>(frames.size()) == count;
        }
        FramePtr ref(av_frame_clone(frame));
        if (!ref) {
            problem = "out of memory while decoding";
            return true;
        }
        held.push_back(std::move(ref));
        if (static_cast<int>(held.size()) > count)
            held.pop_front();
        return false;
    }
};

// readClipFrames' decoding, in one pass or, when a seek towards the end falls short, two; false when out of memory.
bool decodeClip(AVFormatContext* f, VideoStream& video, ClipFrames& clip)
{
    const auto onFrame = [&clip](AVFrame* frame) { return clip.onFrame(frame); };
    // From the end: start at the key frame before the last count frames (and two seconds more),
    // not at the start of what may be a long recording; from the start when that falls short.
    const int maxPackets = clip.fromEnd ? 4000000 : 200000;
    const bool sought = clip.fromEnd && seekBeforeEnd(f, video, clip.count, 2.0);
    clip.endUnknown = clip.fromEnd && !sought;
    bool decoded = decodeFrames(f, video, maxPackets, onFrame, &clip.stoppedEarly);
    if (sought && decoded && clip.problem.empty() && static_cast<int>(clip.held.size() + clip.frames.size()) < clip.count) {
        clip.held.clear();
        clip.frames.clear();
        clip.stoppedEarly.clear();
        clip.decodedFrames = 0;
        clip.endUnknown = true;
        av_seek_frame(f, video.index, video.stream->start_time != AV_NOPTS_VALUE ? video.stream->start_time : 0, AVSEEK_FLAG_BACKWARD);
        avcodec_flush_buffers(video.decoder.get());
        decoded = decodeFrames(f, video, maxPackets, onFrame, &clip.stoppedEarly);
    }
    return decoded;
}

// Why the frames read from a clip's end are not its end (the demuxer's or decoder's complaint first), or empty when they are.
std::string clipEndCut(const AVStream* st, const std::string& stoppedEarly, std::int64_t lastPts)
{
    const AVRational rate = st->avg_frame_rate.num > 0 ? st->avg_frame_rate : st->r_frame_rate;
    const std::int64_t start = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
    std::string cut = stoppedEarly;
    if (cut.empty() && st->duration > 0 && lastPts != AV_NOPTS_VALUE && rate.num > 0 && rate.den > 0 && st->time_base.num > 0
        && st->time_base.den > 0) {
        // Its frames should run to within two frames of the duration its header declares.
        const double endSeconds = static_cast<double>(lastPts - start) * av_q2d(st->time_base) + 1.0 / av_q2d(rate);
        const double declared = static_cast<double>(st->duration) * av_q2d(st->time_base);
        if (endSeconds + 2.0 / av_q2d(rate) < declared) {
            char text[160];
            std::snprintf(text, sizeof text, "its frames end at %.2f s, its header says %.2f s", endSeconds, declared);
            cut = text;
        }
    }
    return cut;
}

}  // namespace

Result<std::vector<RgbImage>> readClipFrames(
    const std::filesystem::path& path, int count, int fitWidth, int fitHeight, std::int64_t maxPixels, bool fromEnd)
{
    if (count < 1 || count > 1025)
        return mediaError(path, "a clip of " + std::to_string(count) + " frames was asked for (1 to 1025)", ErrorCode::InvalidArgument);
    auto format = openInput(path);
    if (!format)
        return format.error();
    AVFormatContext* f = format->get();
    auto video = openVideoStream(path, f, maxPixels);
    if (!video)
        return video.error();
    const auto& decoder = video->decoder;
    const bool fit = fitWidth > 0 && fitHeight > 0;
    // Unfitted frames are kept whole: refuse a clip whose frames would not fit in memory.
    if (!fit && static_cast<std::int64_t>(decoder->width) * decoder->height * 3 * count > (4ll << 30))
        return mediaError(path, std::to_string(count) + " frames of " + pixels(decoder->width, decoder->height) + " are more than 4 GiB",
            ErrorCode::InvalidArgument);

    ClipFrames clip;
    clip.count = count;
    clip.fitWidth = fitWidth;
    clip.fitHeight = fitHeight;
    clip.fit = fit;
    clip.fromEnd = fromEnd;
    clip.maxPixels = maxPixels;
    clip.orientation = video->orientation;
    // Decoded frames of a large clip held `count` at a time could take gigabytes: those are
    // converted (and fitted, usually much smaller) as they come, the way that costs time, not memory.
    const std::int64_t frameBytes = std::max<std::int64_t>(
        0, av_image_get_buffer_size(static_cast<AVPixelFormat>(decoder->pix_fmt), decoder->width, decoder->height, 1));
    clip.convertEach = !fromEnd || frameBytes <= 0 || frameBytes * count > (1ll << 30);
    if (!decodeClip(f, *video, clip))
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    const std::string& problem = clip.problem;
    if (!problem.empty())
        return mediaError(
            path, problem, problem.rfind("declares no duration", 0) == 0 ? ErrorCode::InvalidArgument : ErrorCode::InvalidFormat);
    for (const auto& ref : clip.held)
        if (!clip.convert(ref.get()))
            return mediaError(path, problem);
    clip.held.clear();
    // Its last frames are what a clip from its end continues: a file cut short (an unfinished
    // download or copy) would hand over earlier ones as if they were the end.
    if (fromEnd) {
        if (const std::string cut = clipEndCut(video->stream, clip.stoppedEarly, clip.lastPts); !cut.empty())
            return mediaError(path,
                "is cut short or damaged near its end (" + cut
                    + "): its last frames cannot be read, so it cannot be "
                      "continued from there (an unfinished download or copy?)",
                ErrorCode::Truncated);
    }
    std::deque<RgbImage>& frames = clip.frames;
    if (static_cast<int>(frames.size()) < count)
        return mediaError(path, "has " + std::to_string(frames.size()) + " decodable frames; " + std::to_string(count) + " are needed",
            frames.empty() ? ErrorCode::Truncated : ErrorCode::InvalidArgument);
    return std::vector<RgbImage>(std::make_move_iterator(frames.begin()), std::make_move_iterator(frames.end()));
}

namespace {

// One decoded frame's samples appended to `out` as float, whatever the decoder's sample format.
bool appendSamples(const AVFrame* frame, int keep, std::vector<std::vector<float>>& out)
{
    const auto format = static_cast<AVSampleFormat>(frame->format);
    const bool planar = av_sample_fmt_is_planar(format) != 0;
    const auto packed = av_get_packed_sample_fmt(format);
    const int channels = frame->ch_layout.nb_channels;
    const int n = frame->nb_samples;
    const int bytes = av_get_bytes_per_sample(format);
    if (channels <= 0 || n < 0 || bytes <= 0)
        return false;
    // The frame's own size, not the stream's: a plane (or the interleaved buffer) must hold
    // every sample it claims.
    if (static_cast<std::int64_t>(frame->linesize[0]) < static_cast<std::int64_t>(n) * bytes * (planar ? 1 : channels))
        return false;
    for (int c = 0; c < keep; ++c) {
        // A stream that drops to fewer channels mid-way: the last one it has fills the others,
        // so the kept channels stay the same length.
        const int source = std::min(c, channels - 1);
        const std::uint8_t* base = planar ? frame->extended_data[source] : frame->extended_data[0];
        if (!base)
            return false;
        auto& dst = out[static_cast<std::size_t>(c)];
        dst.reserve(dst.size() + static_cast<std::size_t>(n));
        const int stride = planar ? 1 : channels;
        const int offset = planar ? 0 : source;
        for (int i = 0; i < n; ++i) {
            const auto at = static_cast<std::size_t>(i) * static_cast<std::size_t>(stride) + static_cast<std::size_t>(offset);
            float v = 0;
            switch (packed) {
            case AV_SAMPLE_FMT_U8: v = (static_cast<float>(base[at]) - 128.0f) / 128.0f; break;
            case AV_SAMPLE_FMT_S16: v = static_cast<float>(reinterpret_cast<const std::int16_t*>(base)[at]) / 32768.0f; break;
            case AV_SAMPLE_FMT_S32:
                v = static_cast<float>(static_cast<double>(reinterpret_cast<const std::int32_t*>(base)[at]) / 2147483648.0);
                break;
            case AV_SAMPLE_FMT_S64:
                v = static_cast<float>(static_cast<double>(reinterpret_cast<const std::int64_t*>(base)[at]) / 9223372036854775808.0);
                break;
            case AV_SAMPLE_FMT_FLT: v = reinterpret_cast<const float*>(base)[at]; break;
            case AV_SAMPLE_FMT_DBL: v = static_cast<float>(reinterpret_cast<const double*>(base)[at]); break;
            default: return false;
            }
            // A float stream may carry NaN or values past full scale: neither is audio.
            dst.push_back(std::isfinite(v) ? std::clamp(v, -1.0f, 1.0f) : 0.0f);
        }
    }
    return true;
}

}  // namespace

Result<AudioSamples> readAudio(const std::filesystem::path& path, double maxSeconds)
{
    av_log_set_level(AV_LOG_ERROR);  // encoders' priming notes are not for the user
    auto format = openInput(path);
    if (!format)
        return format.error();
    AVFormatContext* f = format->get();
    const int index = av_find_best_stream(f, AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
    if (index < 0)
        return mediaError(path, "has no audio stream");
    const AVStream* stream = f->streams[index];
    const AVCodecParameters* par = stream->codecpar;
    const auto* descriptor = avcodec_descriptor_get(par->codec_id);
    const std::string codecName = descriptor ? descriptor->name : "unknown";
    const AVCodec* codec = avcodec_find_decoder(par->codec_id);
    if (!codec)
        return mediaError(path,
            "its audio is " + codecName
                + ", which this build does not decode (WAV, AIFF, FLAC, MP3, AAC, ALAC, Vorbis and Opus are; convert it to one of those)",
            ErrorCode::Unsupported);
    if (par->sample_rate <= 0 || par->sample_rate > 768000 || par->ch_layout.nb_channels <= 0 || par->ch_layout.nb_channels > 64)
        return mediaError(path,
            "its audio stream says " + std::to_string(par->sample_rate) + " Hz and " + std::to_string(par->ch_layout.nb_channels)
                + " channels, which no audio has");
    // Before a sample is decoded: what the container says of the length.
    double declared = 0;
    if (stream->duration > 0 && stream->time_base.den > 0)
        declared = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
    else if (f->duration > 0)
        declared = static_cast<double>(f->duration) / AV_TIME_BASE;
    auto tooLong = [&](double seconds) {
        return mediaError(path,
            "is " + std::to_string(static_cast<long long>(std::ceil(seconds))) + " s of audio; at most "
                + std::to_string(static_cast<long long>(maxSeconds)) + " s are taken (cut it first)",
            ErrorCode::InvalidArgument);
    };
    if (declared > maxSeconds + 1)
        return tooLong(declared);

    CodecPtr decoder(avcodec_alloc_context3(codec));
    if (!decoder || avcodec_parameters_to_context(decoder.get(), par) < 0)
        return mediaError(path, "its audio decoder cannot be set up", ErrorCode::Internal);
    decoder->thread_count = 1;
    if (const int e = avcodec_open2(decoder.get(), codec, nullptr); e < 0)
        return mediaError(path, "its " + codecName + " audio cannot be decoded (" + avError(e) + ")");

    AudioSamples audio;
    audio.sampleRate = par->sample_rate;
    audio.codec = codecName;
    const int channels = par->ch_layout.nb_channels;
    const int keep = std::min(channels, 2);
    if (channels > 2)
        audio.note = path.filename().string() + " has " + std::to_string(channels)
            + " audio channels; its first two (front left and right) are used";
    audio.channels.resize(static_cast<std::size_t>(keep));
    const auto maxFrames = static_cast<std::int64_t>(std::ceil(maxSeconds * par->sample_rate)) + par->sample_rate;
    std::string problem;
    std::unique_ptr<AVPacket, PacketCloser> packet(av_packet_alloc());
    FramePtr frame(av_frame_alloc());
    if (!packet || !frame)
        return mediaError(path, "out of memory", ErrorCode::OutOfMemory);
    auto drain = [&]() {
        for (;;) {
            const int d = avcodec_receive_frame(decoder.get(), frame.get());
            if (d == AVERROR(EAGAIN) || d == AVERROR_EOF)
                return true;
            if (d < 0) {
                problem = "a frame of its audio does not decode (" + avError(d) + ")";
                return false;
            }
            // The decoder may change its layout mid-stream; what is kept stays two channels or one.
            if (frame->sample_rate != audio.sampleRate) {
                problem = "its audio changes sample rate mid-stream (" + std::to_string(audio.sampleRate) + " to "
                    + std::to_string(frame->sample_rate) + " Hz)";
                return false;
            }
            if (!appendSamples(frame.get(), keep, audio.channels)) {
                problem = "a frame of its audio is malformed or in a sample format this reader does not take";
                return false;
            }
            av_frame_unref(frame.get());
            if (audio.frames() > maxFrames) {
                problem = "long";
                return false;
            }
        }
    };
    bool ok = true;
    int skipped = 0;
    while (ok) {
        const int r = av_read_frame(f, packet.get());
        if (r < 0) {
            if (r != AVERROR_EOF)
                problem = "its data stops early (" + avError(r) + ")";
            avcodec_send_packet(decoder.get(), nullptr);
            ok = drain();
            break;
        }
        if (packet->stream_index == index) {
            const int s = avcodec_send_packet(decoder.get(), packet.get());
            if (s == AVERROR_INVALIDDATA)
                ++skipped;  // a damaged packet: the stream goes on, and the user is told
            else if (s < 0 && s != AVERROR(EAGAIN)) {
                problem = "its audio does not decode (" + avError(s) + ")";
                ok = false;
            }
        }
        av_packet_unref(packet.get());
        if (ok)
            ok = drain();
    }
    if (problem == "long")
        return tooLong(audio.seconds());
    if (!problem.empty() && audio.frames() == 0)
        return mediaError(path, problem, ErrorCode::Truncated);
    if (!problem.empty())
        return mediaError(path, problem + " after " + std::to_string(audio.seconds()).substr(0, 5) + " s", ErrorCode::Truncated);
    if (audio.frames() == 0)
        return mediaError(path, "holds no audio samples (0 s)", ErrorCode::InvalidArgument);
    if (skipped > 0)
        audio.note += (audio.note.empty() ? "" : "; ") + path.filename().string() + ": " + std::to_string(skipped)
            + " damaged audio packet(s) skipped";
    return audio;
}

}  // namespace vireo::media
