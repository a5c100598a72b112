#pragma once

// Real output files for gallery tests: H.264 + AAC clips through the product's MP4 writer (a
// moving landscape and a tone, so thumbnails and playback have something to show), with or
// without a recipe in their tags.

#include "core/output/recipe.h"
#include "media/mp4writer.h"

#include <QByteArray>
#include <QColor>
#include <QFile>
#include <QImage>
#include <QPainter>
#include <QPainterPath>
#include <QString>

#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

namespace vireo::test {

// A landscape at dusk: a sky gradient, a sun that sinks as frames pass, three hill layers
// that drift at different speeds. `style` picks the palette.
inline QImage renderScene(int width, int height, int frame, int style)
{
    QImage image(width, height, QImage::Format_RGB888);
    QPainter p(&image);
    p.setRenderHint(QPainter::Antialiasing);
    const int hue = (style * 47 + 200) % 360;
    QLinearGradient sky(0, 0, 0, height);
    sky.setColorAt(0, QColor::fromHsv(hue, 160, 90));
    sky.setColorAt(0.7, QColor::fromHsv((hue + 40) % 360, 120, 235));
    sky.setColorAt(1, QColor::fromHsv((hue + 60) % 360, 90, 250));
    p.fillRect(image.rect(), sky);
    p.setPen(Qt::NoPen);
    p.setBrush(QColor::fromHsv((hue + 70) % 360, 60, 255));
    const double r = height * 0.12;
    p.drawEllipse(QPointF(width * (0.25 + 0.12 * (style % 5)), height * 0.35 + frame * height * 0.006), r, r);
    for (int layer = 0; layer < 3; ++layer) {
        QPainterPath hills;
        hills.moveTo(0, height);
        const double base = height * (0.62 + 0.12 * layer);
        for (int x = 0; x <= width; x += 4) {
            const double t = (x + frame * (layer + 1) * 2.0) / width;
            hills.lineTo(x, base - height * 0.08 * std::sin(t * (3 + layer + style % 3) + style + layer));
        }
        hills.lineTo(width, height);
        hills.closeSubpath();
        p.setBrush(QColor::fromHsv((hue + 180 + layer * 12) % 360, 120 + layer * 30, 110 - layer * 30));
        p.drawPath(hills);
    }
    p.end();
    return image;
}

// A 16-bit PCM WAV of `seconds` of a tone per channel (channel c at hz x (1 + c / 2): unlike
// channels, so a swap would show); throws when the file cannot be written.
inline void writeWav(const QString& path, int rate, int channels, double seconds, double hz = 330.0)
{
    const auto n = static_cast<int>(rate * seconds);
    QByteArray data;
    for (int i = 0; i < n; ++i)
        for (int c = 0; c < channels; ++c) {
            const auto v = static_cast<qint16>(12000 * std::sin(2 * M_PI * hz * (1 + c / 2.0) * i / rate));
            data.append(reinterpret_cast<const char*>(&v), 2);
        }
    QByteArray out("RIFF");
    const auto u32 = [&](quint32 v) { out.append(reinterpret_cast<const char*>(&v), 4); };
    const auto u16 = [&](quint16 v) { out.append(reinterpret_cast<const char*>(&v), 2); };
    u32(36 + static_cast<quint32>(data.size()));
    out.append("WAVEfmt ");
    u32(16);
    u16(1);
    u16(static_cast<quint16>(channels));
    u32(static_cast<quint32>(rate));
    u32(static_cast<quint32>(rate * channels * 2));
    u16(static_cast<quint16>(channels * 2));
    u16(16);
    out.append("data");
    u32(static_cast<quint32>(data.size()));
    out.append(data);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(out) != out.size())
        throw std::runtime_error("cannot write " + path.toStdString());
}

// Writes a clip and throws (failing the test) when the writer refuses.
inline void writeClip(const QString& path, const std::optional<output::Recipe>& recipe, int frames = 9, int width = 96, int height = 64,
    double fps = 24, int style = 0)
{
    std::map<std::string, std::string> tags;
    if (recipe)
        tags = {{"comment", recipe->toJson()}, {"vireo_recipe", recipe->toJson()}, {"title", recipe->request.prompt}};
    media::VideoStreamSpec v;
    v.width = width;
    v.height = height;
    v.fps = fps;
    v.preset = "ultrafast";
    auto w = media::Mp4Writer::open(path.toStdString(), v, media::AudioStreamSpec{}, tags);
    if (!w)
        throw std::runtime_error(w.error().message);
    for (int f = 0; f < frames; ++f) {
        const QImage image = renderScene(width, height, f, style);
        if (auto r = (*w)->writeFrame(image.constBits(), image.bytesPerLine()); !r)
            throw std::runtime_error(r.error().message);
    }
    const auto samples = static_cast<std::int64_t>(48000.0 * frames / fps);
    std::vector<float> tone(static_cast<std::size_t>(samples));
    for (std::int64_t i = 0; i < samples; ++i)
        tone[static_cast<std::size_t>(i)] =
            0.15f * static_cast<float>(std::sin(static_cast<double>(i) * 2 * M_PI * (220.0 + style * 30) / 48000.0));
    const float* planes[] = {tone.data(), tone.data()};
    if (auto r = (*w)->writeAudio(planes, samples); !r)
        throw std::runtime_error(r.error().message);
    if (auto r = (*w)->finish(); !r)
        throw std::runtime_error(r.error().message);
}

// A safetensors file written byte for byte: the 8-byte length, `header` as given (no padding
// added, so a test can make any header a user's file might carry) and `payload`.
inline bool writeRawSafetensors(const QString& path, const QByteArray& header, const QByteArray& payload = {})
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly))
        return false;
    const auto n = static_cast<quint64>(header.size());
    for (int i = 0; i < 8; ++i)
        f.putChar(static_cast<char>((n >> (8 * i)) & 0xff));
    return f.write(header) == header.size() && f.write(payload) == payload.size();
}

}  // namespace vireo::test
