#include "media/imageops.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/frame.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>

namespace vireo::media {

namespace {

struct CodecCloser {
    void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameCloser {
    void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketCloser {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsCloser {
    void operator()(SwsContext* s) const { sws_freeContext(s); }
};
using CodecPtr = std::unique_ptr<AVCodecContext, CodecCloser>;
using FramePtr = std::unique_ptr<AVFrame, FrameCloser>;
using PacketPtr = std::unique_ptr<AVPacket, PacketCloser>;
using SwsPtr = std::unique_ptr<SwsContext, SwsCloser>;

std::string avError(int code)
{
    char text[AV_ERROR_MAX_STRING_SIZE] = {};
    av_strerror(code, text, sizeof text);
    return text;
}

Error recompressError(const std::string& what, ErrorCode code = ErrorCode::Internal)
{
    return makeError(code, "H.264 re-compression of the conditioning image: " + what);
}

// Packed RGB and planar GBR: swscale scales planar RGB plane by plane, with no detour through
// YUV that would subsample the colour of a packed RGB picture.
using Planes = std::array<std::vector<std::uint8_t>, 3>;

void toPlanes(const std::uint8_t* rgb, int stride, int w, int h, Planes& planes)
{
    for (auto& p : planes)
        p.assign(static_cast<std::size_t>(w) * h + 64, 0);
    for (int y = 0; y < h; ++y) {
        const std::uint8_t* row = rgb + static_cast<std::size_t>(y) * stride;
        for (int x = 0; x < w; ++x) {
            const auto i = static_cast<std::size_t>(y) * w + x;
            planes[0][i] = row[x * 3 + 1];  // G
            planes[1][i] = row[x * 3 + 2];  // B
            planes[2][i] = row[x * 3 + 0];  // R
        }
    }
}

}  // namespace

RgbImage exifUpright(const RgbImage& image, int orientation)
{
    const std::size_t w = static_cast<std::size_t>(image.width), h = static_cast<std::size_t>(image.height);
    if (orientation < 2 || orientation > 8 || image.rgb.size() != w * h * 3)
        return image;
    const bool swap = orientation >= 5;
    RgbImage out;
    out.width = swap ? image.height : image.width;
    out.height = swap ? image.width : image.height;
    out.rgb.resize(image.rgb.size());
    const std::size_t ow = static_cast<std::size_t>(out.width), oh = static_cast<std::size_t>(out.height);
    for (std::size_t y = 0; y < oh; ++y) {
        for (std::size_t x = 0; x < ow; ++x) {
            // The stored pixel shown at (x, y).
            std::size_t sx = x, sy = y;
            switch (orientation) {
            case 2: sx = w - 1 - x; break;  // mirrored left to right
            case 3:
                sx = w - 1 - x;
                sy = h - 1 - y;
                break;  // upside down
            case 4: sy = h - 1 - y; break;  // mirrored top to bottom
            case 5:
                sx = y;
                sy = x;
                break;  // transposed
            case 6:
                sx = y;
                sy = h - 1 - x;
                break;  // turned a quarter clockwise to view
            case 7:
                sx = w - 1 - y;
                sy = h - 1 - x;
                break;  // transversed
            case 8:
                sx = w - 1 - y;
                sy = x;
                break;  // turned a quarter counter-clockwise to view
            default: break;
            }
            std::memcpy(&out.rgb[(y * ow + x) * 3], &image.rgb[(sy * w + sx) * 3], 3);
        }
    }
    return out;
}

RgbImage fitToSize(const RgbImage& image, int width, int height)
{
    if (image.width < 1 || image.height < 1 || width < 1 || height < 1
        || image.rgb.size() < static_cast<std::size_t>(image.width) * image.height * 3)
        return {};
    // The largest centred region of the source with the target's aspect ratio.
    const double target = static_cast<double>(width) / height;
    int cropW = image.width, cropH = image.height;
    if (static_cast<double>(image.width) / image.height > target)
        cropW = std::clamp(static_cast<int>(std::lround(image.height * target)), 1, image.width);
    else
        cropH = std::clamp(static_cast<int>(std::lround(image.width / target)), 1, image.height);
    const int x0 = (image.width - cropW) / 2, y0 = (image.height - cropH) / 2;
    const int stride = image.width * 3;
    const std::uint8_t* origin = image.rgb.data() + static_cast<std::size_t>(y0) * stride + static_cast<std::size_t>(x0) * 3;

    RgbImage out;
    out.width = width;
    out.height = height;
    out.rgb.resize(static_cast<std::size_t>(width) * height * 3);
    if (cropW == width && cropH == height) {
        for (int y = 0; y < height; ++y)
            std::memcpy(out.rgb.data() + static_cast<std::size_t>(y) * width * 3, origin + static_cast<std::size_t>(y) * stride,
                static_cast<std::size_t>(width) * 3);
        return out;
    }
    const bool shrinking = width <= cropW && height <= cropH;
    const int flags = (shrinking ? SWS_AREA : SWS_BICUBIC) | SWS_ACCURATE_RND;
    SwsPtr sws(sws_getContext(cropW, cropH, AV_PIX_FMT_GBRP, width, height, AV_PIX_FMT_GBRP, flags, nullptr, nullptr, nullptr));
    if (!sws)
        return {};
    Planes src, dst;
    toPlanes(origin, stride, cropW, cropH, src);
    for (auto& p : dst)
        p.assign(static_cast<std::size_t>(width) * height + 64, 0);
    const std::uint8_t* srcData[4] = {src[0].data(), src[1].data(), src[2].data(), nullptr};
    const int srcStride[4] = {cropW, cropW, cropW, 0};
    std::uint8_t* dstData[4] = {dst[0].data(), dst[1].data(), dst[2].data(), nullptr};
    const int dstStride[4] = {width, width, width, 0};
    sws_scale(sws.get(), srcData, srcStride, 0, cropH, dstData, dstStride);
    for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x) {
            const auto i = static_cast<std::size_t>(y) * width + x;
            auto* p = &out.rgb[i * 3];
            p[0] = dst[2][i];
            p[1] = dst[0][i];
            p[2] = dst[1][i];
        }
    return out;
}

Result<RgbImage> recompressH264(const RgbImage& image, int crf)
{
    if (crf < 0 || crf > 51)
        return recompressError("CRF " + std::to_string(crf) + " is outside 0 .. 51", ErrorCode::InvalidArgument);
    if (image.width < 1 || image.height < 1 || image.rgb.size() < static_cast<std::size_t>(image.width) * image.height * 3)
        return recompressError("the image is empty", ErrorCode::InvalidArgument);
    if (crf == 0)
        return image;
    const int w = image.width / 2 * 2, h = image.height / 2 * 2;
    if (w < 2 || h < 2)
        return recompressError(
            std::to_string(image.width) + "x" + std::to_string(image.height) + " is too small for H.264", ErrorCode::InvalidArgument);

    const AVCodec* x264 = avcodec_find_encoder_by_name("libx264");
    if (!x264)
        return recompressError("this FFmpeg has no libx264 (install an FFmpeg built with it, or use CRF 0 to skip the re-compression)",
            ErrorCode::Unsupported);
    av_log_set_level(AV_LOG_ERROR);  // x264's banner and statistics are not for the user
    CodecPtr encoder(avcodec_alloc_context3(x264));
    if (!encoder)
        return recompressError("out of memory", ErrorCode::OutOfMemory);
    encoder->width = w;
    encoder->height = h;
    encoder->pix_fmt = AV_PIX_FMT_YUV420P;
    encoder->time_base = AVRational{1, 1};
    encoder->framerate = AVRational{1, 1};
    // One thread: the same bytes out on every machine.
    encoder->thread_count = 1;
    AVDictionary* options = nullptr;
    av_dict_set(&options, "crf", std::to_string(crf).c_str(), 0);
    av_dict_set(&options, "preset", "veryfast", 0);
    const int opened = avcodec_open2(encoder.get(), x264, &options);
    av_dict_free(&options);
    if (opened < 0)
        return recompressError("libx264 cannot be opened (" + avError(opened) + ")");

    FramePtr yuv(av_frame_alloc());
    PacketPtr packet(av_packet_alloc());
    if (!yuv || !packet)
        return recompressError("out of memory", ErrorCode::OutOfMemory);
    yuv->format = AV_PIX_FMT_YUV420P;
    yuv->width = w;
    yuv->height = h;
    if (av_frame_get_buffer(yuv.get(), 0) < 0)
        return recompressError("out of memory", ErrorCode::OutOfMemory);
    // PyAV's reformat: bilinear, swscale's default BT.601 limited-range matrices.
    {
        SwsPtr sws(sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, AV_PIX_FMT_YUV420P, SWS_BILINEAR, nullptr, nullptr, nullptr));
        if (!sws)
            return recompressError("RGB to YUV conversion cannot be set up");
        const std::uint8_t* src[4] = {image.rgb.data(), nullptr, nullptr, nullptr};
        const int srcStride[4] = {image.width * 3, 0, 0, 0};
        sws_scale(sws.get(), src, srcStride, 0, h, yuv->data, yuv->linesize);
    }
    yuv->pts = 0;

    std::vector<std::vector<std::uint8_t>> encoded;
    auto drain = [&]() -> int {
        for (;;) {
            const int r = avcodec_receive_packet(encoder.get(), packet.get());
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF)
                return 0;
            if (r < 0)
                return r;
            encoded.emplace_back(packet->data, packet->data + packet->size);
            av_packet_unref(packet.get());
        }
    };
    int e = avcodec_send_frame(encoder.get(), yuv.get());
    if (e >= 0)
        e = drain();
    if (e >= 0)
        e = avcodec_send_frame(encoder.get(), nullptr);
    if (e >= 0)
        e = drain();
    if (e < 0)
        return recompressError("libx264 failed (" + avError(e) + ")");
    if (encoded.empty())
        return recompressError("libx264 produced no frame");

    const AVCodec* h264 = avcodec_find_decoder(AV_CODEC_ID_H264);
    if (!h264)
        return recompressError("this FFmpeg has no H.264 decoder", ErrorCode::Unsupported);
    CodecPtr decoder(avcodec_alloc_context3(h264));
    if (!decoder)
        return recompressError("out of memory", ErrorCode::OutOfMemory);
    decoder->thread_count = 1;
    if (const int r = avcodec_open2(decoder.get(), h264, nullptr); r < 0)
        return recompressError("the H.264 decoder cannot be opened (" + avError(r) + ")");
    FramePtr decoded(av_frame_alloc());
    if (!decoded)
        return recompressError("out of memory", ErrorCode::OutOfMemory);
    bool have = false;
    auto receive = [&] {
        if (!have && avcodec_receive_frame(decoder.get(), decoded.get()) == 0)
            have = true;
    };
    for (const auto& bytes : encoded) {
        PacketPtr p(av_packet_alloc());
        if (!p || av_new_packet(p.get(), static_cast<int>(bytes.size())) < 0)
            return recompressError("out of memory", ErrorCode::OutOfMemory);
        std::memcpy(p->data, bytes.data(), bytes.size());
        if (const int r = avcodec_send_packet(decoder.get(), p.get()); r < 0 && r != AVERROR(EAGAIN))
            return recompressError("the H.264 decoder failed (" + avError(r) + ")");
        receive();
    }
    avcodec_send_packet(decoder.get(), nullptr);
    receive();
    if (!have || decoded->width != w || decoded->height != h)
        return recompressError("the compressed frame did not decode back");

    RgbImage out;
    out.width = w;
    out.height = h;
    std::vector<std::uint8_t> padded(static_cast<std::size_t>(w) * h * 3 + 64);
    {
        SwsPtr sws(sws_getContext(
            w, h, static_cast<AVPixelFormat>(decoded->format), w, h, AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
        if (!sws)
            return recompressError("YUV to RGB conversion cannot be set up");
        std::uint8_t* dst[4] = {padded.data(), nullptr, nullptr, nullptr};
        const int dstStride[4] = {w * 3, 0, 0, 0};
        sws_scale(sws.get(), decoded->data, decoded->linesize, 0, h, dst, dstStride);
    }
    padded.resize(static_cast<std::size_t>(w) * h * 3);
    out.rgb = std::move(padded);
    return out;
}

}  // namespace vireo::media
