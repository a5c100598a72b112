#include "ui/widgets/videoview.h"

#include <QAudioDevice>
#include <QAudioOutput>
#include <QMediaDevices>
#include <QMediaPlayer>
#include <QPainter>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QVideoFrame>
#include <QVideoSink>

namespace vireo::ui {

VideoView::VideoView(QWidget* parent) : QWidget(parent), m_sink(new QVideoSink(this))
{
    setAttribute(Qt::WA_OpaquePaintEvent);
    setMinimumSize(320, 180);
    connect(m_sink, &QVideoSink::videoFrameChanged, this, [this](const QVideoFrame& frame) {
        if (!frame.isValid())
            return;
        m_frame = frame.toImage();
        update();
    });
}

void VideoView::clear()
{
    m_frame = {};
    update();
}

void VideoView::showFrame(const QImage& frame)
{
    m_frame = frame;
    update();
}

void VideoView::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), QColor(8, 9, 11));
    if (m_frame.isNull())
        return;
    p.setRenderHint(QPainter::SmoothPixmapTransform);
    const QSize fitted = m_frame.size().scaled(size(), Qt::KeepAspectRatio);
    p.drawImage(QRect(QPoint((width() - fitted.width()) / 2, (height() - fitted.height()) / 2), fitted), m_frame);
}

QMediaPlayer* makeClipPlayer(VideoView* view, QPushButton* play, QSlider* position, QObject* parent, bool* silent)
{
    auto* player = new QMediaPlayer(parent);
    player->setVideoSink(view->videoSink());
    *silent = QMediaDevices::defaultAudioOutput().isNull();
    if (!*silent)
        player->setAudioOutput(new QAudioOutput(player));
    player->setLoops(QMediaPlayer::Infinite);
    QObject::connect(player, &QMediaPlayer::playbackStateChanged, play, [play](QMediaPlayer::PlaybackState s) {
        play->setText(s == QMediaPlayer::PlayingState ? QObject::tr("Pause") : QObject::tr("Play"));
    });
    QObject::connect(
        player, &QMediaPlayer::durationChanged, position, [position](qint64 d) { position->setRange(0, static_cast<int>(d)); });
    QObject::connect(player, &QMediaPlayer::positionChanged, position, [position](qint64 p) {
        const QSignalBlocker block(position);
        position->setValue(static_cast<int>(p));
    });
    return player;
}

}  // namespace vireo::ui
