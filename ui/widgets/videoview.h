#pragma once

#include <QImage>
#include <QWidget>

class QMediaPlayer;
class QPushButton;
class QSlider;
class QVideoSink;

namespace vireo::ui {

// Shows a media player's frames by painting them (a video sink, not a native video window):
// it works on every platform plugin (offscreen, Xvfb, machines without GPU-backed GL), shows
// in grab() screenshots, and keeps the last frame when paused for frame-by-frame stepping.
class VideoView : public QWidget {
    Q_OBJECT
public:
    explicit VideoView(QWidget* parent = nullptr);
    QVideoSink* videoSink() const { return m_sink; }
    // The frame on screen (null before the first).
    QImage currentFrame() const { return m_frame; }
    void clear();
    // Shows a frame decoded elsewhere (a step while paused, which the player does not paint)
    // until the player's next frame.
    void showFrame(const QImage& frame);
    QSize sizeHint() const override { return {640, 360}; }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QVideoSink* m_sink;
    QImage m_frame;
};

// A looping player painting into `view`, with a play/pause button and a position slider kept
// in step. Qt 6.4's FFmpeg backend crashes writing to a missing audio device, so without one
// the clip plays silently and *silent says so (the page tells the user why).
QMediaPlayer* makeClipPlayer(VideoView* view, QPushButton* play, QSlider* position, QObject* parent, bool* silent);

}  // namespace vireo::ui
